//! Vercel AI SDK `ModelMessage`s (ai 5, 6 and 7) as turns, by the rules
//! `fromAiSdkMessages` in js/src/convert.ts applies, word for word in its
//! refusals (both held to `tests/import/ai-sdk.json`).
//!
//! Text, tool calls (object or JSON-text input), tool results with their
//! error status (`error-text`, `error-json`, `execution-denied`), approval
//! requests and their answers each keep their kind; an assistant's
//! `reasoning` part is kept as it came (with its `providerOptions`), to go
//! back to the provider while its tool cycle is open, and reasoning files
//! or reasoning elsewhere are not stored; images and files leave a
//! `[file …]` mark.

use foldline_core::turn::{Part, Role};
use serde_json::value::RawValue;
use serde_json::Value;

use super::{file_part, input_text, js_json, opt_str, owned};
use crate::error::{HostError, Result};

/// The turns of `items` (each named by its place and read again from
/// `raws`, the same items as their sender wrote them), one per message.
///
/// # Errors
/// `invalid_input` naming the item (and part) at fault.
pub(super) fn drafts(
    items: &[(String, Value)],
    raws: &[&RawValue],
) -> Result<Vec<(Role, Vec<Part>)>> {
    let mut out = Vec::with_capacity(items.len());
    for ((place, m), raw) in items.iter().zip(raws) {
        let refuse = |why: &str| HostError::Input(format!("{place}: {why}"));
        let role = match m.get("role") {
            Some(Value::String(r)) => match r.as_str() {
                "system" => Role::System,
                "user" => Role::User,
                "assistant" => Role::Assistant,
                "tool" => Role::Tool,
                other => {
                    let other = Value::from(other);
                    return Err(refuse(&format!("unknown role {other}")));
                }
            },
            _ => return Err(refuse("a message needs a role")),
        };
        let list = match (m.get("content"), role) {
            (Some(Value::String(_)), Role::Tool) => {
                return Err(refuse(
                    "a tool message's content is an array of tool results",
                ))
            }
            (Some(Value::String(text)), _) => {
                out.push((role, vec![Part::Text { text: text.clone() }]));
                continue;
            }
            (_, Role::System) => return Err(refuse("a system message's content is a string")),
            (Some(Value::Array(list)), _) => list,
            _ => return Err(refuse("content must be a string or an array of parts")),
        };
        // The parts as written, read once (a message may hold thousands).
        let written = js_json::member(raw, "content").map_or_else(Vec::new, js_json::elements);
        let mut parts = Vec::with_capacity(list.len());
        for (k, p) in list.iter().enumerate() {
            let at = format!("{place}: content[{k}]");
            if !p.is_object() {
                return Err(HostError::Input(format!("{at}: a part is an object")));
            }
            let as_written = written.get(k).copied();
            parts.extend(part(&at, role, p, as_written)?);
        }
        out.push((role, parts));
    }
    Ok(out)
}

/// One part of a message; `None` for reasoning.
fn part(at: &str, role: Role, p: &Value, as_written: Option<&RawValue>) -> Result<Option<Part>> {
    let refuse = |why: &str| HostError::Input(format!("{at}: {why}"));
    let Some(kind) = p.get("type").and_then(Value::as_str) else {
        return Err(refuse("a part's type must be a string"));
    };
    let part = match kind {
        "text" => Part::Text {
            text: opt_str(at, p, "text")?.unwrap_or_default().to_owned(),
        },
        "reasoning" => return reasoning(role, p, as_written),
        "reasoning-file" => return Ok(None),
        "image" => {
            let media = match p.get("mediaType") {
                None | Some(Value::Null) => Some("image"),
                given => given.and_then(Value::as_str),
            };
            file_part(media, None)
        }
        "file" => file_part(
            p.get("mediaType").and_then(Value::as_str),
            p.get("filename").and_then(Value::as_str),
        ),
        "tool-call" => {
            if role != Role::Assistant {
                return Err(refuse("only an assistant message carries tool calls"));
            }
            Part::ToolCall {
                call_id: owned(at, p, "toolCallId")?,
                name: owned(at, p, "toolName")?,
                arguments: input_text(as_written.and_then(|w| js_json::member(w, "input")))?,
                custom: false,
                provider_options: provider_options(p, as_written)?.unwrap_or_default(),
            }
        }
        "tool-result" => {
            let output = as_written.and_then(|w| js_json::member(w, "output"));
            let (content, is_error) = result(at, p.get("output").unwrap_or(&Value::Null), output)?;
            Part::ToolResult {
                call_id: owned(at, p, "toolCallId")?,
                name: opt_str(at, p, "toolName")?.unwrap_or_default().to_owned(),
                content,
                is_error,
            }
        }
        "tool-approval-request" => {
            if role != Role::Assistant {
                return Err(refuse("only an assistant message asks for an approval"));
            }
            Part::ApprovalRequest {
                approval_id: owned(at, p, "approvalId")?,
                call_id: owned(at, p, "toolCallId")?,
            }
        }
        "tool-approval-response" => {
            if role != Role::Tool {
                return Err(refuse("an approval's answer is part of a tool message"));
            }
            let Some(approved) = p.get("approved").and_then(Value::as_bool) else {
                return Err(refuse("approved must be true or false"));
            };
            let reason = opt_str(at, p, "reason")?.unwrap_or_default().to_owned();
            Part::ApprovalResponse {
                approval_id: owned(at, p, "approvalId")?,
                approved,
                reason,
            }
        }
        other => {
            let other = Value::from(other);
            return Err(refuse(&format!("unsupported part {other}")));
        }
    };
    Ok(Some(part))
}

/// A tool result's `output` (`{"type", "value"}`, every line's kinds) as
/// content and error status; `written` is the output as its sender wrote
/// it, whose JSON value is stored as JavaScript writes it.
fn result(at: &str, output: &Value, written: Option<&RawValue>) -> Result<(String, bool)> {
    let refuse = |why: &str| HostError::Input(format!("{at}: {why}"));
    let Some(kind) = output.get("type").and_then(Value::as_str) else {
        return Err(refuse(r#"output must be {"type", "value"}"#));
    };
    let value = || js_json::text_or(written.and_then(|w| js_json::member(w, "value")), "null");
    Ok(match kind {
        "text" | "json" => (value()?, false),
        "error-text" | "error-json" => (value()?, true),
        "execution-denied" => {
            let content = match output.get("reason").and_then(Value::as_str) {
                Some(reason) if !reason.is_empty() => format!("execution denied: {reason}"),
                _ => "execution denied".to_owned(),
            };
            (content, true)
        }
        "content" => {
            let Some(Value::Array(items)) = output.get("value") else {
                return Err(refuse("a content output's value is an array"));
            };
            let lines: Vec<String> = items.iter().map(content_line).collect();
            (lines.join("\n"), false)
        }
        other => {
            let other = Value::from(other);
            return Err(refuse(&format!("unsupported output {other}")));
        }
    })
}

/// An item of a `content` output as a line: its text, or the mark of its
/// media type.
fn content_line(c: &Value) -> String {
    match (c.get("type").and_then(Value::as_str), c.get("text")) {
        (Some("text"), Some(Value::String(text))) => text.clone(),
        _ => {
            let media = c
                .get("mediaType")
                .and_then(Value::as_str)
                .unwrap_or("media");
            format!("[file {media}]")
        }
    }
}

/// The AI SDK's OpenAI providers' `providerOptions` names (`@ai-sdk/openai`,
/// `@ai-sdk/azure`).
const OPENAI_OPTIONS: [&str; 2] = ["openai", "azure"];

/// An assistant's reasoning part as it came: its text and its
/// [`provider_options`]. Reasoning elsewhere, or without its text, is not
/// stored.
fn reasoning(role: Role, p: &Value, as_written: Option<&RawValue>) -> Result<Option<Part>> {
    let Some(text) = p.get("text").and_then(Value::as_str) else {
        return Ok(None);
    };
    if role != Role::Assistant {
        return Ok(None);
    }
    let mut data = serde_json::json!({"text": text, "type": "reasoning"});
    if let Some(options) = provider_options(p, as_written)? {
        data["providerOptions"] = options;
    }
    Ok(Some(Part::Reasoning {
        format: foldline_core::format::Format::AiSdk,
        data,
    }))
}

/// An assistant part's `providerOptions` as JavaScript writes them, kept
/// for the provider that wrote them (an Anthropic signature, Gemini's
/// `thoughtSignature`, OpenAI's encrypted reasoning), less an OpenAI item
/// id: `@ai-sdk/openai` sends a part with one as a reference to the stored
/// item, which the Responses API refuses without the items around it,
/// whose ids a journal does not keep. A provider's entry left empty is
/// dropped; `None` when none is left (or they are not an object).
fn provider_options(p: &Value, as_written: Option<&RawValue>) -> Result<Option<Value>> {
    if !p.get("providerOptions").is_some_and(Value::is_object) {
        return Ok(None);
    }
    let Some(written) = as_written.and_then(|w| js_json::member(w, "providerOptions")) else {
        return Ok(None);
    };
    let written = js_json::stringify(written)?;
    let Ok(Value::Object(mut options)) = serde_json::from_str::<Value>(&written) else {
        return Ok(None);
    };
    for name in OPENAI_OPTIONS {
        if let Some(Value::Object(entry)) = options.get_mut(name) {
            entry.remove("itemId");
            if entry.is_empty() {
                options.remove(name);
            }
        }
    }
    Ok((!options.is_empty()).then_some(Value::Object(options)))
}
