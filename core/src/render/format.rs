//! Rendering a selected context to the message shapes clients already use:
//! foldline's own form, OpenAI chat messages, OpenAI Responses input items
//! (`responses.rs`), Anthropic messages (system apart; `tool_use` /
//! `tool_result` blocks) and Vercel AI SDK model messages.
//!
//! Pinned system, developer and document turns become system text. The
//! summary and amendment envelopes are always user messages.

use foldline_derive::{Decode, Encode};
use serde::Serialize;
use serde_json::{json, Value};

use std::borrow::Cow;

use super::exchange::as_providers_take;
use super::reasoning;
use crate::canonical::{write_str, Encode};
use crate::decode::{At, Decode};
use crate::records::turn::{Part, Role};

/// What a context message is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Encode, Decode)]
#[serde(rename_all = "camelCase")]
pub enum Kind {
    /// A pinned turn.
    Pinned,
    /// The summary envelope.
    Summary,
    /// The amendment envelope.
    Amendment,
    /// An exact turn.
    Turn,
    /// The current prompt.
    Prompt,
    /// A member-compression system fragment (plain-speak, the settings
    /// projection).
    Member,
}

/// One message of the context in foldline's own form.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Encode, Decode)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ContextMessage {
    /// What it is.
    pub kind: Kind,
    /// The provider-facing role (`user` for envelopes).
    pub role: Role,
    /// The turn it renders, for turns and pinned turns.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn_id: Option<String>,
    /// Content.
    pub parts: Vec<Part>,
}

pub use crate::records::provider::Format;

/// Messages rendered in a format. foldline's own form stays typed and is
/// written straight to its canonical bytes, as are OpenAI messages (the
/// format a chat client asks for on every message); the other provider
/// shapes are JSON values (OpenAI Responses items are canonical bytes too). Read back from JSON (by a Rust host), a rendering
/// is `Json`. Two renderings are equal when their JSON is.
#[derive(Debug, Clone)]
pub enum Rendered {
    /// foldline's own messages.
    Foldline(Vec<ContextMessage>),
    /// Messages already in their canonical bytes (a JSON array).
    Canonical(Vec<u8>),
    /// A provider's shape, or any rendering read back from JSON.
    Json(Value),
}

impl Rendered {
    /// The rendering as a JSON value.
    pub fn to_value(&self) -> Value {
        match self {
            Rendered::Foldline(m) => Value::Array(m.iter().map(message_value).collect()),
            // Written by `openai` below or `openai_responses`: JSON by construction.
            Rendered::Canonical(b) => crate::decode::parse_value(b).unwrap_or(Value::Null),
            Rendered::Json(v) => v.clone(),
        }
    }
}

impl PartialEq for Rendered {
    fn eq(&self, other: &Self) -> bool {
        self.to_value() == other.to_value()
    }
}

fn message_value(m: &ContextMessage) -> Value {
    let mut out = Vec::new();
    m.encode(&mut out);
    // The canonical encoding is JSON by construction.
    crate::decode::parse_value(&out).unwrap_or(Value::Null)
}

impl Encode for Rendered {
    fn encode(&self, out: &mut Vec<u8>) {
        match self {
            Rendered::Foldline(m) => m.encode(out),
            Rendered::Canonical(b) => out.extend_from_slice(b),
            Rendered::Json(v) => v.encode(out),
        }
    }
}

impl Decode for Rendered {
    fn decode(v: crate::decode::Tree<'_>, _: &At<'_>) -> crate::decode::Decoded<Self> {
        Ok(Rendered::Json(v.into_value()))
    }
}

impl Serialize for Rendered {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        match self {
            Rendered::Foldline(m) => m.serialize(s),
            Rendered::Canonical(_) => self.to_value().serialize(s),
            Rendered::Json(v) => v.serialize(s),
        }
    }
}

impl<'de> serde::Deserialize<'de> for Rendered {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        crate::decode::deserialize(d)
    }
}

/// Render messages in a format.
pub fn render(format: Format, messages: Vec<ContextMessage>) -> Rendered {
    match format {
        Format::Foldline => Rendered::Foldline(messages),
        f => render_outgoing(
            f,
            messages.iter().map(Outgoing::of).collect(),
            reasoning::Sent::Whole,
        ),
    }
}

/// A context message as rendering reads it, its content borrowed from the
/// turn it renders (copied only into foldline's own form).
#[derive(Debug, Clone)]
pub(crate) struct Outgoing<'a> {
    /// What it is.
    pub kind: Kind,
    /// The provider-facing role.
    pub role: Role,
    /// The turn it renders.
    pub turn_id: Option<&'a str>,
    /// Content.
    pub parts: Cow<'a, [Part]>,
}

impl<'a> Outgoing<'a> {
    fn of(m: &'a ContextMessage) -> Self {
        Outgoing {
            kind: m.kind,
            role: m.role,
            turn_id: m.turn_id.as_deref(),
            parts: Cow::Borrowed(&m.parts),
        }
    }

    fn owned(self) -> ContextMessage {
        ContextMessage {
            kind: self.kind,
            role: self.role,
            turn_id: self.turn_id.map(str::to_owned),
            parts: self.parts.into_owned(),
        }
    }
}

/// [`render`] of borrowed messages, sending the open cycle's reasoning
/// `how`.
pub(crate) fn render_outgoing(
    format: Format,
    messages: Vec<Outgoing<'_>>,
    how: reasoning::Sent,
) -> Rendered {
    let messages = match format {
        Format::Foldline => messages,
        f => reasoning::for_provider(f, messages, how),
    };
    match format {
        Format::Foldline => Rendered::Foldline(messages.into_iter().map(Outgoing::owned).collect()),
        Format::Openai => Rendered::Canonical(openai(&as_providers_take(messages, false))),
        Format::OpenaiResponses => Rendered::Canonical(super::responses::openai_responses(
            &as_providers_take(messages, false),
        )),
        Format::Anthropic => Rendered::Json(anthropic(&as_providers_take(messages, false))),
        Format::AiSdk => {
            let mut out: Vec<Value> = as_providers_take(messages, true)
                .iter()
                .filter_map(ai_sdk)
                .collect();
            // The SDK's form goes to any provider; its Anthropic and Google
            // providers pass an assistant first on, which those refuse.
            if let Some(i) = out.iter().position(|m| m["role"] != "system") {
                if out[i]["role"] == "assistant" {
                    let line =
                        json!({"role": "user", "content": [{"type": "text", "text": OPENING}]});
                    out.insert(i, line);
                }
            }
            Rendered::Json(Value::Array(out))
        }
    }
}

/// The member's text an Anthropic or AI SDK context opens with when its
/// first turn is the assistant's (Anthropic and Gemini refuse such a
/// request).
pub const OPENING: &str = "[the conversation so far]";

/// How an error result's text begins where the format has no error flag
/// (OpenAI chat).
pub const ERROR_MARK: &str = "[error] ";

fn is_system(role: Role) -> bool {
    role.always_pinned()
}

/// The text parts of a message, joined as the model reads them.
pub(crate) fn texts(parts: &[Part]) -> String {
    parts
        .iter()
        .filter_map(|p| match p {
            Part::Text { text } => Some(text.as_str()),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Tool-call arguments as a JSON value: the parsed object, or the raw text
/// under `arguments` when they are not one JSON object (or repeat a key).
fn input_of(arguments: &str) -> Value {
    match crate::decode::parse_value(arguments.as_bytes()) {
        Ok(v @ Value::Object(_)) => v,
        _ => json!({ "arguments": arguments }),
    }
}

/// What an OpenAI shape writes in its own way: an assistant turn (its
/// parts), or a tool result.
pub(super) enum Item<'a> {
    /// An assistant turn's parts.
    Assistant(&'a [Part]),
    /// A result: the call it answers, its text, whether it is an error.
    Result(&'a str, &'a str, bool),
}

/// The walk both OpenAI shapes share (chat messages and Responses items),
/// into one JSON array: pinned system text as a `system` message where it
/// was written; assistant turns and results through `write`; a tool turn's
/// text, and every other turn, as the member's.
pub(super) fn openai_walk<'a>(
    messages: &'a [Outgoing<'a>],
    mut write: impl FnMut(&mut Vec<u8>, Item<'a>),
) -> Vec<u8> {
    let mut out = Vec::with_capacity(messages.iter().map(|m| 64 + parts_len(&m.parts)).sum());
    out.push(b'[');
    for m in messages {
        if is_system(m.role) {
            simple(&mut out, &texts(&m.parts), "system");
            continue;
        }
        match m.role {
            Role::Assistant => write(&mut out, Item::Assistant(&m.parts)),
            Role::Tool => {
                for p in m.parts.iter() {
                    match p {
                        Part::ToolResult {
                            call_id,
                            content,
                            is_error,
                            ..
                        } => write(&mut out, Item::Result(call_id, content, *is_error)),
                        Part::Text { text } => simple(&mut out, text, "user"),
                        // OpenAI has no approvals: the call and its result carry the exchange.
                        Part::ToolCall { .. }
                        | Part::ApprovalRequest { .. }
                        | Part::ApprovalResponse { .. }
                        | Part::Reasoning { .. } => {}
                    }
                }
            }
            _ => simple(&mut out, &texts(&m.parts), "user"),
        }
    }
    out.push(b']');
    out
}

/// OpenAI chat messages, written straight to their canonical bytes: each
/// object's keys in byte order (`content`, `role`, `tool_call_id`,
/// `tool_calls`; a call's `function`, `id`, `type`; a function's
/// `arguments`, `name`), as the canonical writer orders a JSON value's.
fn openai(messages: &[Outgoing<'_>]) -> Vec<u8> {
    openai_walk(messages, |out, item| match item {
        Item::Assistant(parts) => assistant_message(out, parts),
        Item::Result(call_id, content, is_error) => {
            next(out);
            out.extend_from_slice(b"{\"content\":");
            output(out, content, is_error);
            out.extend_from_slice(b",\"role\":\"tool\",\"tool_call_id\":");
            write_str(call_id, out);
            out.push(b'}');
        }
    })
}

/// An assistant turn as one chat message: its text (`null` beside calls
/// when there is none) and its calls as `tool_calls`.
fn assistant_message(out: &mut Vec<u8>, parts: &[Part]) {
    let text = texts(parts);
    let mut calls = parts.iter().filter_map(|p| match p {
        Part::ToolCall {
            call_id,
            name,
            arguments,
            custom,
            ..
        } => Some((call_id, name, arguments, *custom)),
        _ => None,
    });
    let first = calls.next();
    next(out);
    out.extend_from_slice(b"{\"content\":");
    match first {
        Some(_) if text.is_empty() => out.extend_from_slice(b"null"),
        _ => write_str(&text, out),
    }
    out.extend_from_slice(b",\"role\":\"assistant\"");
    if let Some(call) = first {
        out.extend_from_slice(b",\"tool_calls\":[");
        for (i, (call_id, name, arguments, custom)) in
            std::iter::once(call).chain(calls).enumerate()
        {
            if i > 0 {
                out.push(b',');
            }
            if custom {
                out.extend_from_slice(b"{\"custom\":{\"input\":");
            } else {
                out.extend_from_slice(b"{\"function\":{\"arguments\":");
            }
            write_str(arguments, out);
            out.extend_from_slice(b",\"name\":");
            write_str(name, out);
            out.extend_from_slice(b"},\"id\":");
            write_str(call_id, out);
            out.extend_from_slice(if custom {
                b",\"type\":\"custom\"}"
            } else {
                b",\"type\":\"function\"}"
            });
        }
        out.push(b']');
    }
    out.push(b'}');
}

/// A comma before every element but the first of the array `out` holds.
pub(super) fn next(out: &mut Vec<u8>) {
    if out.last() != Some(&b'[') {
        out.push(b',');
    }
}

/// A result's text as a string, beginning [`ERROR_MARK`] for an error
/// (OpenAI has no error flag: the status leads the text).
pub(super) fn output(out: &mut Vec<u8>, content: &str, is_error: bool) {
    if is_error {
        write_str(&format!("{ERROR_MARK}{content}"), out);
    } else {
        write_str(content, out);
    }
}

/// `{"content": text, "role": role}`.
pub(super) fn simple(out: &mut Vec<u8>, text: &str, role: &str) {
    next(out);
    out.extend_from_slice(b"{\"content\":");
    write_str(text, out);
    out.extend_from_slice(b",\"role\":\"");
    out.extend_from_slice(role.as_bytes());
    out.extend_from_slice(b"\"}");
}

/// Bytes of the parts' text, to size the output once.
fn parts_len(parts: &[Part]) -> usize {
    parts
        .iter()
        .map(|p| match p {
            Part::Text { text } => text.len(),
            Part::ToolCall {
                name, arguments, ..
            } => name.len() + arguments.len() + 80,
            Part::ToolResult { content, .. } => content.len() + 60,
            Part::ApprovalRequest { .. }
            | Part::ApprovalResponse { .. }
            | Part::Reasoning { .. } => 0,
        })
        .sum()
}

fn anthropic(messages: &[Outgoing<'_>]) -> Value {
    let mut system: Vec<String> = Vec::new();
    let mut out: Vec<(String, Vec<Value>)> = Vec::new();
    for m in messages {
        if is_system(m.role) {
            system.push(texts(&m.parts));
            continue;
        }
        let role = if m.role == Role::Assistant {
            "assistant"
        } else {
            "user"
        };
        let mut blocks = Vec::new();
        for p in m.parts.iter() {
            match p {
                // Anthropic refuses a text block of whitespace alone
                // ("text content blocks must contain non-whitespace text"),
                // and a model answers "\n\n" now and then.
                Part::Text { text } if !text.trim().is_empty() => {
                    blocks.push(json!({"type": "text", "text": text}))
                }
                Part::Text { .. }
                | Part::ApprovalRequest { .. }
                | Part::ApprovalResponse { .. } => {}
                Part::Reasoning { data, .. } => blocks.push(data.clone()),
                Part::ToolCall {
                    call_id,
                    name,
                    arguments,
                    ..
                } => blocks.push(json!({
                    "type": "tool_use", "id": call_id, "name": name, "input": input_of(arguments),
                })),
                Part::ToolResult {
                    call_id,
                    content,
                    is_error,
                    ..
                } => {
                    let mut b =
                        json!({"type": "tool_result", "tool_use_id": call_id, "content": content});
                    if *is_error {
                        b["is_error"] = json!(true);
                    }
                    blocks.push(b);
                }
            }
        }
        if blocks.is_empty() {
            continue;
        }
        // Anthropic requires alternating roles: merge consecutive same-role turns.
        match out.last_mut() {
            Some((r, b)) if r == role => b.extend(blocks),
            _ => out.push((role.to_owned(), blocks)),
        }
    }
    // Anthropic refuses messages that begin with the assistant ("first
    // message must use the user role"): a chat that opens with a greeting,
    // or a tail that begins with an answer and no summary before it.
    if out.first().is_some_and(|(role, _)| role == "assistant") {
        out.insert(
            0,
            (
                "user".to_owned(),
                vec![json!({"type": "text", "text": OPENING})],
            ),
        );
    }
    let messages: Vec<Value> = out
        .into_iter()
        .map(|(role, content)| json!({"role": role, "content": content}))
        .collect();
    // Anthropic refuses an empty system prompt ("system: text content
    // blocks must be non-empty"): a context without system text has none.
    let system = system.join("\n\n");
    match system.trim().is_empty() {
        true => json!({ "messages": messages }),
        false => json!({ "system": system, "messages": messages }),
    }
}

fn ai_sdk(m: &Outgoing<'_>) -> Option<Value> {
    if is_system(m.role) {
        return Some(json!({"role": "system", "content": texts(&m.parts)}));
    }
    let role = match m.role {
        Role::Assistant => "assistant",
        Role::Tool => "tool",
        _ => "user",
    };
    let content: Vec<Value> = m
        .parts
        .iter()
        .filter_map(|p| match p {
            // Whitespace alone says nothing, and the SDK's Anthropic
            // provider would send it as a block Anthropic refuses.
            Part::Text { text } if m.role != Role::Tool && !text.trim().is_empty() => {
                Some(json!({"type": "text", "text": text}))
            }
            Part::Text { .. } => None,
            Part::Reasoning { data, .. } => Some(data.clone()),
            Part::ToolCall {
                call_id,
                name,
                arguments,
                custom,
                provider_options,
            } => {
                let mut v = json!({
                    "type": "tool-call", "toolCallId": call_id, "toolName": name,
                    "input": if *custom { json!(arguments) } else { input_of(arguments) },
                });
                if !provider_options.is_null() {
                    v["providerOptions"] = provider_options.clone();
                }
                Some(v)
            }
            Part::ApprovalRequest {
                approval_id,
                call_id,
            } => Some(json!({
                "type": "tool-approval-request", "approvalId": approval_id, "toolCallId": call_id,
            })),
            Part::ApprovalResponse {
                approval_id,
                approved,
                reason,
            } => {
                let mut v = json!({
                    "type": "tool-approval-response", "approvalId": approval_id, "approved": approved,
                });
                if !reason.is_empty() {
                    v["reason"] = json!(reason);
                }
                Some(v)
            }
            Part::ToolResult {
                call_id,
                name,
                content,
                is_error,
            } => Some(json!({
                "type": "tool-result",
                "toolCallId": call_id,
                "toolName": name,
                "output": {"type": if *is_error { "error-text" } else { "text" }, "value": content},
            })),
        })
        .collect();
    if content.is_empty() {
        return None;
    }
    Some(json!({"role": role, "content": content}))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The OpenAI shape as JSON values, written by the canonical writer: what
    /// `openai` writes directly must be these bytes.
    fn reference(messages: &[Outgoing<'_>]) -> Vec<u8> {
        let mut all = Vec::new();
        for m in messages {
            let role = if is_system(m.role) {
                Role::System
            } else {
                m.role
            };
            match role {
                Role::System => all.push(json!({"role": "system", "content": texts(&m.parts)})),
                Role::Assistant => {
                    let calls: Vec<Value> = m
                        .parts
                        .iter()
                        .filter_map(|p| match p {
                            Part::ToolCall {
                                call_id,
                                name,
                                arguments,
                                custom: false,
                                ..
                            } => Some(json!({
                                "id": call_id, "type": "function",
                                "function": {"name": name, "arguments": arguments},
                            })),
                            Part::ToolCall {
                                call_id,
                                name,
                                arguments,
                                custom: true,
                                ..
                            } => Some(json!({
                                "id": call_id, "type": "custom",
                                "custom": {"name": name, "input": arguments},
                            })),
                            _ => None,
                        })
                        .collect();
                    let text = texts(&m.parts);
                    let mut o = json!({"role": "assistant", "content": text});
                    if !calls.is_empty() {
                        if text.is_empty() {
                            o["content"] = Value::Null;
                        }
                        o["tool_calls"] = Value::Array(calls);
                    }
                    all.push(o);
                }
                Role::Tool => {
                    for p in m.parts.iter() {
                        match p {
                            Part::ToolResult {
                                call_id,
                                content,
                                is_error,
                                ..
                            } => all.push(json!({
                                "role": "tool", "tool_call_id": call_id,
                                "content": if *is_error { format!("{ERROR_MARK}{content}") } else { content.clone() },
                            })),
                            Part::Text { text } => all.push(json!({"role": "user", "content": text})),
                            _ => {}
                        }
                    }
                }
                _ => all.push(json!({"role": "user", "content": texts(&m.parts)})),
            }
        }
        let mut out = Vec::new();
        Value::Array(all).encode(&mut out);
        out
    }

    fn msg(role: Role, parts: Vec<Part>) -> ContextMessage {
        ContextMessage {
            kind: Kind::Turn,
            role,
            turn_id: None,
            parts,
        }
    }

    #[test]
    fn openai_is_written_as_the_canonical_writer_writes_its_values() {
        let text = |t: &str| Part::Text { text: t.into() };
        let call = |id: &str| Part::ToolCall {
            call_id: id.into(),
            name: "run \"x\"".into(),
            arguments: "{\"a\":1}\n".into(),
            custom: false,
            provider_options: serde_json::Value::Null,
        };
        let result = |id: &str| Part::ToolResult {
            call_id: id.into(),
            name: "run".into(),
            content: "out\u{1}\\put é😀".into(),
            is_error: false,
        };
        let cases = vec![
            vec![],
            vec![msg(Role::System, vec![text("be brief"), text("and kind")])],
            vec![
                msg(Role::Developer, vec![text("dev")]),
                msg(Role::User, vec![text("hi \"there\"")]),
            ],
            vec![msg(Role::Assistant, vec![call("c1"), call("c2")])],
            vec![msg(Role::Assistant, vec![text("let me"), call("c1")])],
            vec![
                msg(Role::Assistant, vec![]),
                msg(Role::Assistant, vec![text("")]),
            ],
            vec![msg(
                Role::Tool,
                vec![result("c1"), text("note"), call("x"), result("c2")],
            )],
            vec![msg(Role::Tool, vec![])],
            vec![
                msg(
                    Role::Assistant,
                    vec![
                        Part::ToolCall {
                            call_id: "k1".into(),
                            name: "grep".into(),
                            arguments: "free \"form\"".into(),
                            custom: true,
                            provider_options: serde_json::Value::Null,
                        },
                        call("c1"),
                        Part::ApprovalRequest {
                            approval_id: "a1".into(),
                            call_id: "c1".into(),
                        },
                    ],
                ),
                msg(
                    Role::Tool,
                    vec![
                        Part::ApprovalResponse {
                            approval_id: "a1".into(),
                            approved: false,
                            reason: "no".into(),
                        },
                        Part::ToolResult {
                            call_id: "c1".into(),
                            name: "run".into(),
                            content: "denied".into(),
                            is_error: true,
                        },
                    ],
                ),
            ],
            vec![
                msg(Role::User, vec![text("a"), call("ignored"), text("b")]),
                msg(Role::Assistant, vec![text("c")]),
                msg(Role::Tool, vec![result("c9")]),
            ],
        ];
        for (i, c) in cases.iter().enumerate() {
            let c: Vec<Outgoing<'_>> = c.iter().map(Outgoing::of).collect();
            let ours = openai(&c);
            assert_eq!(
                String::from_utf8(ours).unwrap(),
                String::from_utf8(reference(&c)).unwrap(),
                "case {i}"
            );
        }
    }
}
