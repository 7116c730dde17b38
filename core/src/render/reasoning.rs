//! The model's reasoning, sent back while its tool cycle is open.
//!
//! Anthropic with extended thinking refuses a request whose last assistant
//! turn calls a tool without the thinking block it came with (`400 …
//! expected thinking or redacted_thinking`), and the AI SDK's Anthropic
//! provider writes that block only from the `reasoning` part the SDK
//! returned (its signature in `providerOptions`). No provider needs an
//! earlier cycle's reasoning: Anthropic leaves it out of the model's view
//! and other providers answer without it (the Responses API recommends the
//! open cycle's items back, and takes them without an id when they carry
//! their `encrypted_content`). So a [`Part::Reasoning`] goes to a
//! provider only
//!
//! - in the format it came in (a signature is valid only where it was made),
//! - of a type that format's reasoning has (Anthropic `thinking` and
//!   `redacted_thinking`, the AI SDK's `reasoning`, a Responses `reasoning`
//!   item with its `encrypted_content`), and
//! - in an assistant turn of the open tool cycle: after the context's last
//!   member (user-role) message, so as long as the model is calling tools
//!   and reading their results.
//!
//! Everywhere else it is left out. An AI SDK tool call's `providerOptions`
//! (Gemini 3's `thoughtSignature` of the call) follows the same rule: in the
//! AI SDK's form, in the open tool cycle. foldline's own form keeps every
//! part as it is.

use std::borrow::Cow;

use serde_json::Value;

use super::format::{Format, Outgoing};
use crate::canonical::Encode;
use crate::records::turn::{Part, Role, Turn};

/// `messages` with every reasoning part and call's provider options the
/// provider is not to get left out (the rules above).
pub(crate) fn for_provider(format: Format, messages: Vec<Outgoing<'_>>) -> Vec<Outgoing<'_>> {
    let open = cycle_start(&messages, |m| m.role);
    messages
        .into_iter()
        .enumerate()
        .map(|(i, m)| {
            let sent = i >= open && m.role == Role::Assistant;
            // Provider data this provider is not to get.
            let held = |p: &Part| private(p) && !(sent && carried(format, p).is_some());
            if !m.parts.iter().any(held) {
                return m;
            }
            let parts = (m.parts.iter())
                .filter_map(|p| match p {
                    Part::Reasoning { .. } if held(p) => None,
                    Part::ToolCall { .. } if held(p) => {
                        let mut p = p.clone();
                        if let Part::ToolCall {
                            provider_options, ..
                        } = &mut p
                        {
                            *provider_options = Value::Null;
                        }
                        Some(p)
                    }
                    p => Some(p.clone()),
                })
                .collect();
            Outgoing {
                parts: Cow::Owned(parts),
                ..m
            }
        })
        .collect()
}

/// Where the open tool cycle begins: after the last member (user-role)
/// message.
fn cycle_start<T>(items: &[T], role: impl Fn(&T) -> Role) -> usize {
    items
        .iter()
        .rposition(|x| role(x) == Role::User)
        .map_or(0, |i| i + 1)
}

/// Whether a part holds data for one provider alone: reasoning, or a call
/// with its provider options.
fn private(p: &Part) -> bool {
    match p {
        Part::Reasoning { .. } => true,
        Part::ToolCall {
            provider_options, ..
        } => !provider_options.is_null(),
        _ => false,
    }
}

/// What a part of an assistant turn in the open tool cycle carries for
/// `format`: a reasoning block of that format's own kind, or an AI SDK
/// call's options.
fn carried(format: Format, p: &Part) -> Option<&Value> {
    match p {
        Part::Reasoning { format: f, data } if *f == format && takes(format, data) => Some(data),
        Part::ToolCall {
            provider_options, ..
        } if format == Format::AiSdk && !provider_options.is_null() => Some(provider_options),
        _ => None,
    }
}

/// Whether `format` has reasoning of this block's type (the AI SDK's
/// part and a Responses item share the name).
fn takes(format: Format, data: &Value) -> bool {
    let kind = data.get("type").and_then(Value::as_str).unwrap_or("");
    match format {
        Format::Anthropic => kind == "thinking" || kind == "redacted_thinking",
        Format::AiSdk | Format::OpenaiResponses => kind == "reasoning",
        _ => false,
    }
}

/// Characters of what a context in `format` sends by the rules above from
/// `turns` (the exact tail's candidates, in order, no prompt after them),
/// as written. The budget holds them back like the prompt, since a
/// provider counts the open cycle's reasoning it is sent; no turn counts
/// them. With no format (a compaction plan, which renders for none), each
/// part counts as the format that would send it does: a block in its own,
/// a call's options in the AI SDK's.
pub(crate) fn open_cycle_chars(format: Option<Format>, turns: &[&Turn]) -> u64 {
    let mut out = Vec::new();
    let cycle = &turns[cycle_start(turns, |t| t.role)..];
    for t in cycle.iter().filter(|t| t.role == Role::Assistant) {
        for p in &t.parts {
            let sent = match format {
                Some(f) => carried(f, p),
                None => match p {
                    Part::Reasoning { format: f, .. } => carried(*f, p),
                    _ => carried(Format::AiSdk, p),
                },
            };
            if let Some(v) = sent {
                v.encode(&mut out);
            }
        }
    }
    out.len() as u64
}
