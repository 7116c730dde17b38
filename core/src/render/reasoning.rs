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
//!
//! A provider requires only the last step's reasoning: Anthropic refuses a
//! final assistant message that does not start with its thinking block and
//! recommends, without requiring, the earlier steps' (`400 … a final
//! assistant message must start with a thinking block … We recommend you
//! include thinking blocks from previous turns`). So when the whole cycle's
//! reasoning does not fit the budget beside every turn no summary covers,
//! a context sends the last step's alone ([`Sent::LastStep`]: the last
//! run of assistant turns, one message to the provider); a call's
//! provider options, a signature of a few dozen bytes that Gemini requires
//! on every step's call, still go on every step. A compaction plan counts
//! what is required, the last step's: the earlier steps' reasoning is
//! needed only until the member writes, and folding history for it would
//! lose for good what the context needs for a moment.

use std::borrow::Cow;

use serde_json::Value;

use super::format::{Format, Outgoing};
use crate::canonical::Encode;
use crate::records::turn::{Part, Role, Turn};

/// How much of the open cycle's reasoning a context sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Sent {
    /// Every step's.
    Whole,
    /// The last step's alone, the last run of assistant turns (calls'
    /// options on every step).
    LastStep,
}

/// `messages` with every reasoning part and call's provider options the
/// provider is not to get left out (the rules above).
pub(crate) fn for_provider(
    format: Format,
    messages: Vec<Outgoing<'_>>,
    how: Sent,
) -> Vec<Outgoing<'_>> {
    let (open, last) = match (how, cycle_bounds(&messages, |m| m.role)) {
        (Sent::Whole, (open, _)) => (open, open),
        (Sent::LastStep, bounds) => bounds,
    };
    messages
        .into_iter()
        .enumerate()
        .map(|(i, m)| {
            let sent = i >= open && m.role == Role::Assistant;
            // Provider data this provider is not to get.
            let held = |p: &Part| {
                private(p)
                    && !(sent
                        && carried(format, p).is_some()
                        && (i >= last || !matches!(p, Part::Reasoning { .. })))
            };
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

/// Where the open tool cycle begins (after the last member, user-role,
/// message) and where its last step does: the last run of consecutive
/// assistant items, which a provider takes as one message (Anthropic merges
/// them, and refuses one whose thinking does not come first); the length
/// when the cycle has no assistant item.
fn cycle_bounds<T>(items: &[T], role: impl Fn(&T) -> Role) -> (usize, usize) {
    let (mut last, mut in_run) = (None, false);
    for i in (0..items.len()).rev() {
        let r = role(&items[i]);
        if r == Role::User {
            return (i + 1, last.unwrap_or(items.len()));
        }
        in_run = r == Role::Assistant && (last.is_none() || in_run);
        if in_run {
            last = Some(i);
        }
    }
    (0, last.unwrap_or(items.len()))
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

/// What a context in `format` sends by the rules above from `turns` (the
/// exact tail's candidates, in order, no prompt after them), in characters
/// as written: the whole cycle's and the last step's alone. The budget
/// holds it back like the prompt, since a provider counts the open cycle's
/// reasoning it is sent; no turn counts it. With no format (a compaction
/// plan, which renders for none), each part counts as the format that
/// would send it does: a block in its own, a call's options in the AI SDK's.
pub(crate) fn open_cycle(format: Option<Format>, turns: &[&Turn]) -> Cycle {
    let (mut whole, mut last, mut earlier) = (Vec::new(), 0u64, 0u64);
    let (open, final_step) = cycle_bounds(turns, |t| t.role);
    for (i, t) in turns.iter().enumerate().skip(open) {
        if t.role != Role::Assistant {
            continue;
        }
        let mut thinks = false;
        for p in &t.parts {
            let sent = match format {
                Some(f) => carried(f, p),
                None => match p {
                    Part::Reasoning { format: f, .. } => carried(*f, p),
                    _ => carried(Format::AiSdk, p),
                },
            };
            if let Some(v) = sent {
                let at = whole.len();
                v.encode(&mut whole);
                let reasoning = matches!(p, Part::Reasoning { .. });
                thinks |= reasoning;
                if i >= final_step || !reasoning {
                    last += (whole.len() - at) as u64;
                }
            }
        }
        earlier += u64::from(thinks && i < final_step);
    }
    Cycle {
        whole: whole.len() as u64,
        last_step: last,
        earlier,
    }
}

/// The open cycle's reasoning a context sends, in characters as written.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Cycle {
    /// Every step's.
    pub whole: u64,
    /// The last step's alone ([`Sent::LastStep`]).
    pub last_step: u64,
    /// The assistant turns before the last step whose reasoning is sent
    /// only with the whole cycle's.
    pub earlier: u64,
}
