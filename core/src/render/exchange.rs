//! Tool exchanges as the providers take them.
//!
//! OpenAI, Anthropic and the AI SDK refuse a whole request over one broken
//! tool exchange: a call whose results do not come right after it (OpenAI:
//! "an assistant message with 'tool_calls' must be followed by tool messages
//! responding to each 'tool_call_id'"; Anthropic: "`tool_use` ids were found
//! without `tool_result` blocks immediately after"; the AI SDK:
//! `MissingToolResultsError`), a result without its call, a call id used
//! twice. A journal holds such exchanges for ordinary reasons: a tool run
//! interrupted before its result (a crash, a member who wrote on instead of
//! answering an approval), another member's message between a call and its
//! result in a shared room, a result whose call was folded into the summary.
//! Left as they are, every later model call of the conversation would fail.
//!
//! So in the provider formats a call is sent as a call only with its
//! answer in the tool messages right after its own message — its result
//! or, in the AI SDK, the response to its approval request when that is
//! the context's last message, nothing of its tool message sent as text
//! after it (the SDK then runs the approved tool, or
//! records the denial, itself) — and the first time its id is sent. Every
//! other call, result and approval part is sent as text where it was
//! written: in the assistant's message its own words (`[tool call search]
//! {"q":"x"}`), a result or an answer as the member's text after the tool
//! messages it came in (`[tool result search] 3 hotels`), as is text among
//! results. Nothing is dropped, and foldline's own form keeps every part as
//! it is.

use std::borrow::Cow;
use std::ops::Range;

use super::format::Outgoing;
use crate::records::turn::{render_parts, Part, Role};

/// `messages` with every tool exchange a provider would refuse sent as
/// text; `approval_answers`: whether an approval's response in the last
/// message answers its call (the AI SDK), or only a result does (OpenAI,
/// Anthropic).
pub(crate) fn as_providers_take(
    messages: Vec<Outgoing<'_>>,
    approval_answers: bool,
) -> Vec<Outgoing<'_>> {
    if !messages
        .iter()
        .any(|m| m.parts.iter().any(|p| out_of_place(m.role, p)))
    {
        return messages;
    }
    let mut sent = Sent::new(&messages, approval_answers);
    // An approval's response answers its call only in the context's last
    // message: not when a part of that tool message goes as text after it.
    if approval_answers && sent.text_after_last(&messages) {
        sent = Sent::new(&messages, false);
    }
    let mut out = Vec::with_capacity(messages.len() + 1);
    // Results and answers sent as text, after the tool messages they came in.
    let mut after_tools = Vec::new();
    for (i, m) in messages.into_iter().enumerate() {
        if m.role != Role::Tool {
            out.append(&mut after_tools);
        }
        let flags = &sent.flags[sent.start[i]..sent.start[i + 1]];
        let as_text = |j: usize, p: &Part| out_of_place(m.role, p) && !flags[j];
        if !m.parts.iter().enumerate().any(|(j, p)| as_text(j, p)) {
            out.push(m);
            continue;
        }
        if m.role == Role::Assistant {
            // The assistant's own words, in place.
            let parts = m
                .parts
                .iter()
                .enumerate()
                .map(|(j, p)| {
                    if as_text(j, p) {
                        Part::Text {
                            text: render_parts(std::slice::from_ref(p)),
                        }
                    } else {
                        p.clone()
                    }
                })
                .collect();
            out.push(Outgoing {
                parts: Cow::Owned(parts),
                ..m
            });
            continue;
        }
        let (mut kept, mut text) = (Vec::new(), Vec::new());
        for (j, p) in m.parts.iter().enumerate() {
            if as_text(j, p) {
                text.push(p.clone());
            } else {
                kept.push(p.clone());
            }
        }
        let member = Outgoing {
            kind: m.kind,
            role: Role::User,
            turn_id: m.turn_id,
            parts: Cow::Owned(vec![Part::Text {
                text: render_parts(&text),
            }]),
        };
        if !kept.is_empty() {
            out.push(Outgoing {
                parts: Cow::Owned(kept),
                ..m
            });
        }
        if m.role == Role::Tool {
            after_tools.push(member);
        } else {
            out.push(member);
        }
    }
    out.append(&mut after_tools);
    out
}

/// Whether a part needs the exchange rules to be sent as it is: a call,
/// result or approval part (sent so only when answered), or text among
/// tool results (never: it would stand between them, and the AI SDK's tool
/// messages hold none).
fn out_of_place(role: Role, p: &Part) -> bool {
    p.link().is_some() || (role == Role::Tool && matches!(p, Part::Text { .. }))
}

/// Which linking parts are sent as they are: `flags[start[i] + j]` for
/// part `j` of message `i`.
struct Sent {
    start: Vec<usize>,
    flags: Vec<bool>,
}

impl Sent {
    fn new(messages: &[Outgoing<'_>], approval_answers: bool) -> Sent {
        let mut start = Vec::with_capacity(messages.len() + 1);
        let mut total = 0;
        for m in messages {
            start.push(total);
            total += m.parts.len();
        }
        start.push(total);
        let mut sent = Sent {
            start,
            flags: vec![false; total],
        };
        // Call ids sent as calls so far (a request names each once).
        let mut ids: Vec<&str> = Vec::new();
        for (i, m) in messages.iter().enumerate() {
            if m.role != Role::Assistant {
                continue;
            }
            // The tool messages right after this one.
            let tools = i + 1
                ..(i + 1..messages.len())
                    .find(|&k| messages[k].role != Role::Tool)
                    .unwrap_or(messages.len());
            for (j, p) in m.parts.iter().enumerate() {
                if let Part::ToolCall { call_id, .. } = p {
                    if !ids.contains(&call_id.as_str())
                        && sent.answer(messages, i, j, tools.clone(), approval_answers)
                    {
                        ids.push(call_id);
                    }
                }
            }
        }
        sent
    }

    /// Whether the last message is a tool message with a part that is sent
    /// as text after it.
    fn text_after_last(&self, messages: &[Outgoing<'_>]) -> bool {
        let Some(m) = messages.last() else {
            return false;
        };
        let at = self.start[messages.len() - 1];
        m.role == Role::Tool
            && (m.parts.iter().enumerate())
                .any(|(j, p)| out_of_place(m.role, p) && !self.flags[at + j])
    }

    /// Whether the call (part `call` of message `at`) is answered in the
    /// tool messages `tools`; if so, marks it, its answer and its approval
    /// exchange as sent.
    fn answer(
        &mut self,
        messages: &[Outgoing<'_>],
        at: usize,
        call: usize,
        tools: Range<usize>,
        approval_answers: bool,
    ) -> bool {
        let Part::ToolCall { call_id, .. } = &messages[at].parts[call] else {
            return false;
        };
        let result = self.first(
            messages,
            tools.clone(),
            &|p: &Part| matches!(p, Part::ToolResult { call_id: c, .. } if c == call_id),
        );
        let mut exchange = vec![self.start[at] + call];
        // Answered by an approval's response (the AI SDK).
        let mut responded = false;
        for (j, p) in messages[at].parts.iter().enumerate() {
            let Part::ApprovalRequest {
                approval_id,
                call_id: c,
            } = p
            else {
                continue;
            };
            if c != call_id {
                continue;
            }
            exchange.push(self.start[at] + j);
            let response = self.first(
                messages,
                tools.clone(),
                &|p: &Part| matches!(p, Part::ApprovalResponse { approval_id: a, .. } if a == approval_id),
            );
            if let Some(r) = response {
                exchange.push(r);
                // Only in the last message: the SDK then runs the approved
                // tool (or records the denial) itself; further back it
                // wants the result.
                responded |= approval_answers && r >= self.start[messages.len() - 1];
            }
        }
        if result.is_none() && !responded {
            return false;
        }
        exchange.extend(result);
        for k in exchange {
            self.flags[k] = true;
        }
        true
    }

    /// The first part in `messages[range]` that `is` and is not yet sent,
    /// as its flag's index.
    fn first(
        &self,
        messages: &[Outgoing<'_>],
        range: Range<usize>,
        is: &dyn Fn(&Part) -> bool,
    ) -> Option<usize> {
        range.into_iter().find_map(|k| {
            messages[k]
                .parts
                .iter()
                .enumerate()
                .map(|(j, p)| (self.start[k] + j, p))
                .find(|&(f, p)| !self.flags[f] && is(p))
                .map(|(f, _)| f)
        })
    }
}
