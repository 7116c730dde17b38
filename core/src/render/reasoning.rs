//! The model's reasoning, sent back while its tool cycle is open.
//!
//! Anthropic with extended thinking refuses a request whose last assistant
//! turn calls a tool without the thinking block it came with (`400 …
//! expected thinking or redacted_thinking`), and the AI SDK's Anthropic
//! provider writes that block only from the `reasoning` part the SDK
//! returned (its signature in `providerOptions`). No provider needs an
//! earlier cycle's reasoning: Anthropic leaves it out of the model's view
//! and other providers answer without it. So a [`Part::Reasoning`] goes to a
//! provider only
//!
//! - in the format it came in (a signature is valid only where it was made),
//! - of a type that format's reasoning has (Anthropic `thinking` and
//!   `redacted_thinking`, the AI SDK's `reasoning`), and
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
    let open = messages
        .iter()
        .rposition(|m| m.role == Role::User)
        .map_or(0, |i| i + 1);
    messages
        .into_iter()
        .enumerate()
        .map(|(i, m)| {
            let sent = i >= open && m.role == Role::Assistant;
            let keep = |p: &Part| match p {
                Part::Reasoning { format: f, data } => sent && *f == format && takes(format, data),
                _ => true,
            };
            let options_kept = sent && format == Format::AiSdk;
            let bare = |p: &Part| {
                !options_kept
                    && matches!(p, Part::ToolCall { provider_options, .. } if !provider_options.is_null())
            };
            if m.parts.iter().all(|p| keep(p) && !bare(p)) {
                return m;
            }
            let parts = (m.parts.iter())
                .filter(|p| keep(p))
                .map(|p| {
                    let mut p = p.clone();
                    if let Part::ToolCall {
                        provider_options, ..
                    } = &mut p
                    {
                        if !options_kept {
                            *provider_options = Value::Null;
                        }
                    }
                    p
                })
                .collect();
            Outgoing {
                parts: Cow::Owned(parts),
                ..m
            }
        })
        .collect()
}

/// Whether `format` has reasoning of this block's type.
fn takes(format: Format, data: &Value) -> bool {
    let kind = data.get("type").and_then(Value::as_str).unwrap_or("");
    match format {
        Format::Anthropic => kind == "thinking" || kind == "redacted_thinking",
        Format::AiSdk => kind == "reasoning",
        _ => false,
    }
}

/// Characters of the reasoning a context in `format` sends from `turns`
/// (the exact tail's candidates, in order, no prompt after them): the
/// blocks of the assistant turns after the last member turn, as written.
/// The budget holds them back like the prompt, since a provider counts the
/// open cycle's reasoning it is sent; no turn counts them.
pub(crate) fn open_cycle_chars(format: Format, turns: &[&Turn]) -> u64 {
    let open = turns
        .iter()
        .rposition(|t| t.role == Role::User)
        .map_or(0, |i| i + 1);
    let mut out = Vec::new();
    for t in turns[open..].iter().filter(|t| t.role == Role::Assistant) {
        for p in &t.parts {
            match p {
                Part::Reasoning { format: f, data } if *f == format && takes(format, data) => {
                    data.encode(&mut out)
                }
                Part::ToolCall {
                    provider_options, ..
                } if format == Format::AiSdk && !provider_options.is_null() => {
                    provider_options.encode(&mut out)
                }
                _ => {}
            }
        }
    }
    out.len() as u64
}
