//! Rendering a selected context to the message shapes clients already use:
//! foldline's own form, OpenAI chat messages, Anthropic messages (system
//! apart; `tool_use` / `tool_result` blocks) and Vercel AI SDK model messages.
//!
//! Pinned system, developer and document turns become system text. The
//! summary and amendment envelopes are always user messages.

use foldline_derive::{Decode, Encode};
use serde::Serialize;
use serde_json::{json, Map, Value};

use crate::canonical::Encode;
use crate::decode::{At, Decode};
use crate::turn::{Part, Role};

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

/// An output format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Encode, Decode, Default)]
#[serde(rename_all = "camelCase")]
pub enum Format {
    /// foldline's own [`ContextMessage`] list.
    #[default]
    Foldline,
    /// OpenAI chat-completions `messages`.
    Openai,
    /// Anthropic messages: `{ system, messages }`.
    Anthropic,
    /// Vercel AI SDK `ModelMessage[]`.
    AiSdk,
}

/// Messages rendered in a format. foldline's own form stays typed and is
/// written straight to its canonical bytes; the provider shapes are JSON
/// values. Read back from JSON (by a Rust host), a rendering is `Json`.
#[derive(Debug, Clone, PartialEq)]
pub enum Rendered {
    /// foldline's own messages.
    Foldline(Vec<ContextMessage>),
    /// A provider's shape, or any rendering read back from JSON.
    Json(Value),
}

impl Rendered {
    /// The rendering as a JSON value.
    pub fn to_value(&self) -> Value {
        match self {
            Rendered::Foldline(m) => Value::Array(m.iter().map(message_value).collect()),
            Rendered::Json(v) => v.clone(),
        }
    }
}

fn message_value(m: &ContextMessage) -> Value {
    let mut out = Vec::new();
    m.encode(&mut out);
    // The canonical encoding is JSON by construction.
    crate::decode::parse(&out).unwrap_or(Value::Null)
}

impl Encode for Rendered {
    fn encode(&self, out: &mut Vec<u8>) {
        match self {
            Rendered::Foldline(m) => m.encode(out),
            Rendered::Json(v) => v.encode(out),
        }
    }
}

impl Decode for Rendered {
    fn decode(v: Value, _: &At<'_>) -> crate::decode::Decoded<Self> {
        Ok(Rendered::Json(v))
    }
}

impl Serialize for Rendered {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        match self {
            Rendered::Foldline(m) => m.serialize(s),
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
        Format::Openai => Rendered::Json(Value::Array(messages.iter().flat_map(openai).collect())),
        Format::Anthropic => Rendered::Json(anthropic(&messages)),
        Format::AiSdk => Rendered::Json(Value::Array(messages.iter().filter_map(ai_sdk).collect())),
    }
}

fn is_system(role: Role) -> bool {
    role.always_pinned()
}

fn texts(parts: &[Part]) -> String {
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
    match crate::decode::parse(arguments.as_bytes()) {
        Ok(v @ Value::Object(_)) => v,
        _ => json!({ "arguments": arguments }),
    }
}

fn openai(m: &ContextMessage) -> Vec<Value> {
    if is_system(m.role) {
        return vec![json!({"role": "system", "content": texts(&m.parts)})];
    }
    match m.role {
        Role::Assistant => {
            let calls: Vec<Value> = m
                .parts
                .iter()
                .filter_map(|p| match p {
                    Part::ToolCall {
                        call_id,
                        name,
                        arguments,
                    } => Some(json!({
                        "id": call_id,
                        "type": "function",
                        "function": {"name": name, "arguments": arguments},
                    })),
                    _ => None,
                })
                .collect();
            let text = texts(&m.parts);
            let mut o = Map::new();
            o.insert("role".into(), json!("assistant"));
            o.insert(
                "content".into(),
                if text.is_empty() && !calls.is_empty() {
                    Value::Null
                } else {
                    json!(text)
                },
            );
            if !calls.is_empty() {
                o.insert("tool_calls".into(), Value::Array(calls));
            }
            vec![Value::Object(o)]
        }
        Role::Tool => m
            .parts
            .iter()
            .filter_map(|p| match p {
                Part::ToolResult {
                    call_id, content, ..
                } => Some(json!({"role": "tool", "tool_call_id": call_id, "content": content})),
                Part::Text { text } => Some(json!({"role": "user", "content": text})),
                _ => None,
            })
            .collect(),
        _ => vec![json!({"role": "user", "content": texts(&m.parts)})],
    }
}

fn anthropic(messages: &[ContextMessage]) -> Value {
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
        for p in &m.parts {
            match p {
                Part::Text { text } if !text.is_empty() => {
                    blocks.push(json!({"type": "text", "text": text}))
                }
                Part::Text { .. } => {}
                Part::ToolCall {
                    call_id,
                    name,
                    arguments,
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
    json!({
        "system": system.join("\n\n"),
        "messages": out
            .into_iter()
            .map(|(role, content)| json!({"role": role, "content": content}))
            .collect::<Vec<_>>(),
    })
}

fn ai_sdk(m: &ContextMessage) -> Option<Value> {
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
            Part::Text { text } if m.role != Role::Tool => Some(json!({"type": "text", "text": text})),
            Part::Text { .. } => None,
            Part::ToolCall {
                call_id,
                name,
                arguments,
            } => Some(json!({
                "type": "tool-call", "toolCallId": call_id, "toolName": name, "input": input_of(arguments),
            })),
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
