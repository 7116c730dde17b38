//! OpenAI Responses API items as turns: a request's `input` or a response's
//! `output`, by the rules `fromOpenAiResponses` in js/src/convert.ts applies,
//! word for word in its refusals (both held to `tests/import/openai-responses.json`).
//!
//! Messages (`content` a string or `input_text` / `output_text` / `refusal`
//! parts; images and files leave a mark) are turns; the `function_call` and
//! `custom_tool_call` items after an assistant message are that turn's
//! calls (as one response's output holds them), after anything else a turn
//! of their own; each `…_output` is a tool turn; a `reasoning` item with
//! its `encrypted_content` joins the assistant turn after it (to go back
//! while its tool cycle is open), without it it is not stored. Any other
//! item is refused by its type.

use foldline_core::turn::{Part, Role};
use serde_json::Value;

use super::{content_of, joined, opt_str, required, Incoming};
use crate::error::{HostError, Result};

/// The turns of `items` (each named by its place: `item 3`, `line 3`), in
/// order: a role and its parts.
///
/// # Errors
/// `invalid_input` naming the item (and part) at fault.
pub(super) fn drafts(items: &[(String, Value)]) -> Result<Vec<(Role, Vec<Part>)>> {
    let mut out: Vec<(Role, Vec<Part>)> = Vec::new();
    // Whether the last turn is an assistant message the next calls join.
    let mut answer = false;
    // Whether the last turn holds reasoning alone: the assistant message or
    // calls after it join it; anything else drops it (no output, no turn).
    let mut thought = false;
    let unthought = |out: &mut Vec<(Role, Vec<Part>)>, thought: &mut bool| {
        if std::mem::take(thought) {
            out.pop();
        }
    };
    for (place, v) in items {
        let refuse = |why: &str| HostError::Input(format!("{place}: {why}"));
        if !v.is_object() {
            return Err(refuse("an item is a JSON object"));
        }
        let kind = match v.get("type") {
            None | Some(Value::Null) if v.get("role").is_some() => Some("message"),
            None | Some(Value::Null) => None,
            Some(Value::String(t)) => Some(t.as_str()),
            Some(_) => return Err(refuse("type must be a string")),
        };
        match kind {
            Some("message") => {
                let (role, parts) = message(place, v)?;
                match out.last_mut() {
                    Some((_, joined)) if thought && role == Role::Assistant => {
                        joined.extend(parts);
                        thought = false;
                    }
                    _ => {
                        unthought(&mut out, &mut thought);
                        answer = role == Role::Assistant;
                        out.push((role, parts));
                    }
                }
            }
            Some(kind @ ("function_call" | "custom_tool_call")) => {
                let call = call(place, v, kind == "custom_tool_call")?;
                match out.last_mut() {
                    Some((_, parts)) if answer => parts.push(call),
                    _ => out.push((Role::Assistant, vec![call])),
                }
                (answer, thought) = (true, false);
            }
            Some("function_call_output" | "custom_tool_call_output") => {
                unthought(&mut out, &mut thought);
                out.push((Role::Tool, vec![output(place, v)?]));
                answer = false;
            }
            Some("reasoning") => match (reasoning(v), out.last_mut()) {
                (None, _) => {}
                (Some(r), Some((_, parts))) if answer => parts.push(r),
                (Some(r), _) => {
                    out.push((Role::Assistant, vec![r]));
                    (answer, thought) = (true, true);
                }
            },
            None => return Err(refuse("an item needs a type or a role")),
            Some(kind) => {
                let kind = Value::from(kind);
                return Err(refuse(&format!(
                    "{kind} items are not imported: foldline stores messages, function and custom tool calls and their outputs"
                )));
            }
        }
    }
    unthought(&mut out, &mut thought);
    Ok(out)
}

/// A `reasoning` item as the part that goes back while its tool cycle is
/// open: only with its encrypted content (store: false), less its id — the
/// API looks an id up in its store (`Item with id 'rs_…' not found` when
/// nothing was stored) and refuses a reference whose following items are
/// missing, while it takes the item back without one; of the summary, its
/// texts alone. Without encrypted content there is nothing to send back.
fn reasoning(v: &Value) -> Option<Part> {
    let encrypted = v
        .get("encrypted_content")?
        .as_str()
        .filter(|s| !s.is_empty())?;
    let summary: Vec<Value> = (v.get("summary").and_then(Value::as_array))
        .into_iter()
        .flatten()
        .filter_map(|e| e.get("text")?.as_str())
        .map(|text| serde_json::json!({"text": text, "type": "summary_text"}))
        .collect();
    Some(Part::Reasoning {
        format: foldline_core::format::Format::OpenaiResponses,
        data: serde_json::json!({
            "encrypted_content": encrypted, "summary": summary, "type": "reasoning",
        }),
    })
}

/// A message item: its role and its text (and marks) as parts.
fn message(place: &str, v: &Value) -> Result<(Role, Vec<Part>)> {
    let role = match v.get("role").and_then(Value::as_str) {
        Some("system") => Role::System,
        Some("developer") => Role::Developer,
        Some("user") => Role::User,
        Some("assistant") => Role::Assistant,
        Some(other) => {
            let other = Value::from(other);
            return Err(HostError::Input(format!("{place}: unknown role {other}")));
        }
        None => return Err(HostError::Input(format!("{place}: role must be a string"))),
    };
    let content = v.get("content").unwrap_or(&Value::Null);
    let (text, files) = content_of(place, content, role, Incoming::OpenAiResponses)?;
    Ok((
        role,
        joined(text, files)
            .map(|text| Part::Text { text })
            .collect(),
    ))
}

/// A `function_call` or `custom_tool_call` item as a call part.
fn call(place: &str, v: &Value, custom: bool) -> Result<Part> {
    let call_id = required(place, v, "call_id")?.to_owned();
    let name = required(place, v, "name")?.to_owned();
    let (field, default) = if custom {
        ("input", "")
    } else {
        ("arguments", "{}")
    };
    let arguments = opt_str(place, v, field)?.unwrap_or(default).to_owned();
    Ok(Part::ToolCall {
        call_id,
        name,
        arguments,
        custom,
        provider_options: serde_json::Value::Null,
    })
}

/// A `…_output` item as a result part: its output a string, or text parts
/// (and marks) joined with a newline.
fn output(place: &str, v: &Value) -> Result<Part> {
    let call_id = required(place, v, "call_id")?.to_owned();
    let content = match v.get("output") {
        Some(Value::String(s)) => s.clone(),
        other => {
            let at = format!("{place}: output");
            let output = other.unwrap_or(&Value::Null);
            let (text, files) = content_of(&at, output, Role::Tool, Incoming::OpenAiResponses)?;
            joined(text, files).collect::<Vec<_>>().join("\n")
        }
    };
    let name = v.get("name").and_then(Value::as_str).unwrap_or_default();
    Ok(Part::ToolResult {
        call_id,
        name: name.to_owned(),
        content,
        is_error: false,
    })
}
