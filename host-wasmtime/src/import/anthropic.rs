//! Anthropic Messages API messages as turns, by the rules
//! `fromAnthropicMessages` in js/src/convert.ts applies, word for word in
//! its refusals (both held to `tests/import/anthropic.json`).
//!
//! A message's `text` and `tool_use` blocks stay one turn; its
//! `tool_result` blocks (with `is_error`) answer the previous assistant turn
//! and become a tool turn of their own before the rest of the message;
//! an assistant's `thinking` and `redacted_thinking` blocks are kept as
//! reasoning parts, to go back to Anthropic while their tool cycle is open
//! (elsewhere, or lacking their fields, they are not stored); images and
//! documents leave a
//! `[file …]` mark. A response of `messages.create` (`"type": "message"`)
//! is a message too, and a system message in the conversation (`"role":
//! "system"`, text blocks only) a system turn.

use foldline_core::turn::{Part, Role};
use serde_json::value::RawValue;
use serde_json::Value;

use super::{file_part, input_text, js_json, opt_str, owned};
use crate::error::{HostError, Result};

/// The turns of `items` (each named by its place and read again from
/// `raws`, the same items as their sender wrote them), in order.
///
/// # Errors
/// `invalid_input` naming the item (and block) at fault.
pub(super) fn drafts(
    items: &[(String, Value)],
    raws: &[&RawValue],
) -> Result<Vec<(Role, Vec<Part>)>> {
    let mut out = Vec::new();
    for ((place, m), raw) in items.iter().zip(raws) {
        let refuse = |why: &str| HostError::Input(format!("{place}: {why}"));
        let role = match m.get("role").and_then(Value::as_str) {
            Some("user") => Role::User,
            Some("assistant") => Role::Assistant,
            Some("system") => Role::System,
            _ => {
                return Err(refuse(
                    r#"a message is {"role": "user" | "assistant" | "system", "content"}"#,
                ))
            }
        };
        let blocks = match m.get("content") {
            Some(Value::String(text)) => {
                out.push((role, vec![Part::Text { text: text.clone() }]));
                continue;
            }
            Some(Value::Array(blocks)) => blocks,
            _ => return Err(refuse("content must be a string or an array of blocks")),
        };
        // The blocks as written, read once (a message may hold thousands).
        let written = js_json::member(raw, "content").map_or_else(Vec::new, js_json::elements);
        let (mut parts, mut results) = (Vec::new(), Vec::new());
        for (k, b) in blocks.iter().enumerate() {
            let at = format!("{place}: content[{k}]");
            block(
                &at,
                role,
                b,
                written.get(k).copied(),
                &mut parts,
                &mut results,
            )?;
        }
        let answered = !results.is_empty();
        if answered {
            out.push((Role::Tool, results));
        }
        if !parts.is_empty() || !answered {
            out.push((role, parts));
        }
    }
    Ok(out)
}

/// One block of a message: a part of the turn, a tool result, or nothing.
fn block(
    at: &str,
    role: Role,
    b: &Value,
    as_written: Option<&RawValue>,
    parts: &mut Vec<Part>,
    results: &mut Vec<Part>,
) -> Result<()> {
    let refuse = |why: &str| HostError::Input(format!("{at}: {why}"));
    if !b.is_object() {
        return Err(refuse("a block is an object"));
    }
    let Some(kind) = b.get("type").and_then(Value::as_str) else {
        return Err(refuse("a block's type must be a string"));
    };
    if role == Role::System && kind != "text" {
        return Err(refuse("a system message holds text blocks only"));
    }
    match kind {
        "text" => parts.push(Part::Text {
            text: opt_str(at, b, "text")?.unwrap_or_default().to_owned(),
        }),
        "tool_use" => parts.push(Part::ToolCall {
            call_id: owned(at, b, "id")?,
            name: owned(at, b, "name")?,
            arguments: input_text(as_written.and_then(|w| js_json::member(w, "input")))?,
            custom: false,
            provider_options: serde_json::Value::Null,
        }),
        "tool_result" => {
            let content = match b.get("content") {
                None | Some(Value::Null) => String::new(),
                Some(Value::String(s)) => s.clone(),
                Some(Value::Array(inner)) => {
                    inner.iter().map(result_line).collect::<Vec<_>>().join("\n")
                }
                Some(_) => return Err(refuse("content must be a string or an array of blocks")),
            };
            results.push(Part::ToolResult {
                call_id: owned(at, b, "tool_use_id")?,
                name: String::new(),
                content,
                is_error: b.get("is_error") == Some(&Value::Bool(true)),
            });
        }
        "thinking" | "redacted_thinking" => parts.extend(reasoning(role, kind, b)),
        "image" | "document" => {
            let source = b.get("source").filter(|s| s.is_object());
            let media = match source.and_then(|s| s.get("media_type")) {
                None | Some(Value::Null) => b.get("type"),
                given => given,
            };
            parts.push(file_part(
                media.and_then(Value::as_str),
                b.get("title").and_then(Value::as_str),
            ));
        }
        other => {
            let other = Value::from(other);
            return Err(refuse(&format!("unsupported block {other}")));
        }
    }
    Ok(())
}

/// A block of a tool result's content as a line: its text, or the mark of
/// what it is (`[file image]`).
fn result_line(c: &Value) -> String {
    match (c.get("type").and_then(Value::as_str), c.get("text")) {
        (Some("text"), Some(Value::String(text))) => text.clone(),
        (Some(kind), _) => format!("[file {kind}]"),
        (None, _) => "[file block]".to_owned(),
    }
}

/// An assistant's thinking block as the reasoning part that goes back to
/// Anthropic with it (its fields alone); a block without them, or in another
/// role, is not stored.
fn reasoning(role: Role, kind: &str, b: &Value) -> Option<Part> {
    let field = |name: &str| b.get(name).and_then(Value::as_str);
    let data = match (role, kind) {
        (Role::Assistant, "thinking") => serde_json::json!({
            "signature": field("signature")?, "thinking": field("thinking")?, "type": kind,
        }),
        (Role::Assistant, _) => serde_json::json!({"data": field("data")?, "type": kind}),
        _ => return None,
    };
    Some(Part::Reasoning {
        format: foldline_core::format::Format::Anthropic,
        data,
    })
}
