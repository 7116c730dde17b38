//! OpenAI Responses API input items (`client.responses.create({ input })`):
//! the context as the flat list of items that API takes instead of chat
//! messages, written straight to their canonical bytes as the chat shape is.
//!
//! - pinned system, developer and document turns: `{"role": "system"}`
//!   messages where they were written; turns and envelopes: `user` and
//!   `assistant` messages with string content;
//! - an assistant turn of the open tool cycle: its stored `reasoning` items
//!   first, as they came less their id (render/reasoning.rs);
//! - an assistant turn's calls: one `function_call` (or `custom_tool_call`,
//!   free-form `input`) item each, after the turn's text;
//! - a result: a `function_call_output` item (`custom_tool_call_output` for a
//!   custom call's), its text beginning `[error] ` for an error (the API has
//!   no error flag); approvals are not items of this API (the call and its
//!   result carry the exchange), as in the chat shape.
//!
//! Each object's keys in byte order, as the canonical writer orders a JSON
//! value's: a function call's `arguments`, `call_id`, `name`, `type`; a custom
//! call's `call_id`, `input`, `name`, `type`; a result's `call_id`, `output`,
//! `type`; a message's `content`, `role`.

use super::format::{next, openai_walk, output, simple, texts, Item, Outgoing};
use crate::canonical::{write_str, Encode};
use crate::records::turn::Part;

/// The items of `messages`, as one JSON array.
pub(crate) fn openai_responses(messages: &[Outgoing<'_>]) -> Vec<u8> {
    // Custom calls rendered so far: their results are custom outputs.
    let mut custom_calls: Vec<&str> = Vec::new();
    openai_walk(messages, |out, item| match item {
        Item::Assistant(parts) => {
            // Reasoning left here is the open cycle's, to go back
            // (reasoning.rs): each its own item, before the turn's output.
            for p in parts {
                if let Part::Reasoning { data, .. } = p {
                    next(out);
                    data.encode(out);
                }
            }
            let text = texts(parts);
            let calls = parts.iter().filter(|p| matches!(p, Part::ToolCall { .. }));
            if !text.is_empty() || calls.clone().next().is_none() {
                simple(out, &text, "assistant");
            }
            for p in calls {
                if let Part::ToolCall {
                    call_id,
                    name,
                    arguments,
                    custom,
                    ..
                } = p
                {
                    if *custom {
                        custom_calls.push(call_id);
                    }
                    call(out, (call_id, name, arguments), *custom);
                }
            }
        }
        Item::Result(call_id, content, is_error) => {
            next(out);
            out.extend_from_slice(b"{\"call_id\":");
            write_str(call_id, out);
            out.extend_from_slice(b",\"output\":");
            output(out, content, is_error);
            out.extend_from_slice(if custom_calls.contains(&call_id) {
                b",\"type\":\"custom_tool_call_output\"}"
            } else {
                b",\"type\":\"function_call_output\"}"
            });
        }
    })
}

/// A `function_call` item, or a `custom_tool_call` (free-form `input`).
fn call(out: &mut Vec<u8>, (call_id, name, arguments): (&str, &str, &str), custom: bool) {
    next(out);
    if custom {
        out.extend_from_slice(b"{\"call_id\":");
        write_str(call_id, out);
        out.extend_from_slice(b",\"input\":");
        write_str(arguments, out);
    } else {
        out.extend_from_slice(b"{\"arguments\":");
        write_str(arguments, out);
        out.extend_from_slice(b",\"call_id\":");
        write_str(call_id, out);
    }
    out.extend_from_slice(b",\"name\":");
    write_str(name, out);
    out.extend_from_slice(if custom {
        b",\"type\":\"custom_tool_call\"}"
    } else {
        b",\"type\":\"function_call\"}"
    });
}

#[cfg(test)]
mod tests {
    use serde_json::{json, Value};

    use super::*;
    use crate::canonical::Encode;
    use crate::records::turn::Role;
    use crate::render::format::{ContextMessage, Kind};

    fn msg(role: Role, parts: Vec<Part>) -> ContextMessage {
        ContextMessage {
            kind: Kind::Turn,
            role,
            turn_id: None,
            parts,
        }
    }

    fn items(messages: &[ContextMessage]) -> Value {
        let outgoing: Vec<Outgoing<'_>> = messages
            .iter()
            .map(|m| Outgoing {
                kind: m.kind,
                role: m.role,
                turn_id: None,
                parts: std::borrow::Cow::Borrowed(&m.parts),
            })
            .collect();
        let bytes = openai_responses(&outgoing);
        let v: Value = serde_json::from_slice(&bytes).unwrap();
        // Written in canonical form: the canonical writer writes the same bytes.
        let mut again = Vec::new();
        v.encode(&mut again);
        assert_eq!(
            String::from_utf8(again).unwrap(),
            String::from_utf8(bytes).unwrap()
        );
        v
    }

    #[test]
    fn each_part_becomes_the_item_the_responses_api_takes() {
        let text = |t: &str| Part::Text { text: t.into() };
        let call = |id: &str, custom: bool| Part::ToolCall {
            call_id: id.into(),
            name: "grep".into(),
            arguments: if custom {
                "free \"form\"".into()
            } else {
                "{\"q\":1}".into()
            },
            custom,
            provider_options: serde_json::Value::Null,
        };
        let result = |id: &str, is_error: bool| Part::ToolResult {
            call_id: id.into(),
            name: "grep".into(),
            content: "out é".into(),
            is_error,
        };
        let got = items(&[
            msg(Role::System, vec![text("be brief")]),
            msg(Role::User, vec![text("find it")]),
            msg(
                Role::Assistant,
                vec![
                    text("looking"),
                    call("c1", false),
                    call("k1", true),
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
                        approved: true,
                        reason: String::new(),
                    },
                    result("c1", false),
                    result("k1", true),
                    text("a note"),
                ],
            ),
            msg(Role::Developer, vec![text("now in French")]),
            msg(Role::Assistant, vec![call("c2", false)]),
            msg(Role::Tool, vec![result("c2", true)]),
            msg(Role::Assistant, vec![]),
        ]);
        assert_eq!(
            got,
            json!([
                {"role": "system", "content": "be brief"},
                {"role": "user", "content": "find it"},
                {"role": "assistant", "content": "looking"},
                {"type": "function_call", "call_id": "c1", "name": "grep", "arguments": "{\"q\":1}"},
                {"type": "custom_tool_call", "call_id": "k1", "name": "grep", "input": "free \"form\""},
                {"type": "function_call_output", "call_id": "c1", "output": "out é"},
                {"type": "custom_tool_call_output", "call_id": "k1", "output": "[error] out é"},
                {"role": "user", "content": "a note"},
                {"role": "system", "content": "now in French"},
                {"type": "function_call", "call_id": "c2", "name": "grep", "arguments": "{\"q\":1}"},
                {"type": "function_call_output", "call_id": "c2", "output": "[error] out é"},
                {"role": "assistant", "content": ""},
            ])
        );
        assert_eq!(items(&[]), json!([]));
    }
}
