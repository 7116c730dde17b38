//! Tool exchanges in the provider formats: whatever the journal holds, the
//! rendered context is one the provider takes (every call answered right
//! after it, every result after its call, no id twice), and nothing is
//! dropped (`core/src/render/exchange.rs`).

use foldline_core::format::{render, ContextMessage, Format};
use foldline_core::turn::{Part, Role};
use proptest::prelude::*;
use serde_json::{json, Value};
use std::collections::BTreeSet;

mod common;
use common::{context_message as m, text_part as text};

fn call(id: &str) -> Part {
    Part::ToolCall {
        call_id: id.into(),
        name: "search".into(),
        arguments: format!("{{\"q\":\"{id}\"}}"),
        custom: false,
        provider_options: serde_json::Value::Null,
    }
}

fn result(id: &str) -> Part {
    Part::ToolResult {
        call_id: id.into(),
        name: "search".into(),
        content: format!("hotels for {id}"),
        is_error: false,
    }
}

fn ask(approval: &str, id: &str) -> Part {
    Part::ApprovalRequest {
        approval_id: approval.into(),
        call_id: id.into(),
    }
}

fn answer(approval: &str, approved: bool) -> Part {
    Part::ApprovalResponse {
        approval_id: approval.into(),
        approved,
        reason: if approved { "" } else { "not now" }.into(),
    }
}

fn openai(messages: &[ContextMessage]) -> Value {
    render(Format::Openai, messages.to_vec()).to_value()
}

/// What OpenAI chat completions refuses: a tool message that does not
/// answer a call of the assistant message right before (tool messages
/// between), a call left unanswered when another message (or the end)
/// comes, an id used twice.
fn openai_refuses(messages: &Value) -> Option<String> {
    let mut waiting: BTreeSet<String> = BTreeSet::new();
    let mut ids = BTreeSet::new();
    for (i, msg) in messages.as_array()?.iter().enumerate() {
        if msg["role"] == "tool" {
            let id = msg["tool_call_id"].as_str().unwrap_or_default();
            if !waiting.remove(id) {
                return Some(format!(
                    "message {i}: tool message for {id} answers no call"
                ));
            }
            continue;
        }
        if !waiting.is_empty() {
            return Some(format!("message {i}: calls {waiting:?} unanswered"));
        }
        for c in msg["tool_calls"].as_array().into_iter().flatten() {
            let id = c["id"].as_str().unwrap_or_default().to_owned();
            if !ids.insert(id.clone()) {
                return Some(format!("message {i}: call id {id} used twice"));
            }
            waiting.insert(id);
        }
    }
    (!waiting.is_empty()).then(|| format!("calls {waiting:?} unanswered at the end"))
}

/// What Anthropic's messages API refuses: an empty system prompt, a first
/// message that is not the member's, two messages of one role in a row, a
/// message without content, a text block of whitespace alone, a `tool_use`
/// without its `tool_result` in the next message, a message after
/// `tool_use` blocks that does not begin with their `tool_result` blocks
/// ("Messages following `tool_use` blocks must begin with a matching
/// number of `tool_result` blocks"), a `tool_result` whose `tool_use` is
/// not in the message before, an id used twice.
fn anthropic_refuses(rendered: &Value) -> Option<String> {
    if rendered
        .get("system")
        .is_some_and(|s| s.as_str().is_none_or(|s| s.trim().is_empty()))
    {
        return Some("an empty system prompt".into());
    }
    let messages = rendered["messages"].as_array()?;
    let blocks = |i: usize, kind: &str, key: &str| -> Vec<String> {
        messages[i]["content"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|b| b["type"] == kind)
            .map(|b| b[key].as_str().unwrap_or_default().to_owned())
            .collect()
    };
    if messages.first().is_some_and(|m| m["role"] != "user") {
        return Some("the first message is not the member's".into());
    }
    let mut ids = BTreeSet::new();
    for i in 0..messages.len() {
        if i > 0 && messages[i]["role"] == messages[i - 1]["role"] {
            return Some(format!("messages {} and {i} share a role", i - 1));
        }
        let content = messages[i]["content"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        if content.is_empty() {
            return Some(format!("message {i} has no content"));
        }
        if content.iter().any(|b| {
            b["type"] == "text" && b["text"].as_str().unwrap_or_default().trim().is_empty()
        }) {
            return Some(format!("message {i}: a text block of whitespace alone"));
        }
        let uses = blocks(i, "tool_use", "id");
        for id in &uses {
            if !ids.insert(id.clone()) {
                return Some(format!("message {i}: tool_use id {id} used twice"));
            }
        }
        let next: Vec<String> = if i + 1 < messages.len() {
            blocks(i + 1, "tool_result", "tool_use_id")
        } else {
            Vec::new()
        };
        if let Some(id) = uses.iter().find(|id| !next.contains(id)) {
            return Some(format!(
                "message {i}: tool_use {id} without its tool_result"
            ));
        }
        if !uses.is_empty() {
            let opening = messages[i + 1]["content"]
                .as_array()
                .into_iter()
                .flatten()
                .take_while(|b| b["type"] == "tool_result")
                .count();
            if opening < uses.len() {
                return Some(format!(
                    "message {}: does not begin with the {} tool_result block(s) of message {i}",
                    i + 1,
                    uses.len()
                ));
            }
        }
        let before: Vec<String> = if i > 0 {
            blocks(i - 1, "tool_use", "id")
        } else {
            Vec::new()
        };
        if let Some(id) = blocks(i, "tool_result", "tool_use_id")
            .iter()
            .find(|id| !before.contains(id))
        {
            return Some(format!(
                "message {i}: tool_result {id} without its tool_use"
            ));
        }
    }
    None
}

/// What the AI SDK (`MissingToolResultsError`, `collectToolApprovals`) and
/// the providers behind it refuse: a `tool-call` not answered in the tool
/// messages right after it (by a `tool-result`, or by the response to its
/// `tool-approval-request` in the last message, which alone the SDK acts
/// on), a result or an approval answer that answers nothing before it, an
/// id used twice, a first turn that is the assistant's.
fn ai_sdk_refuses(messages: &Value) -> Option<String> {
    let messages = messages.as_array()?;
    // The SDK's Anthropic and Google providers pass the first turn on as it
    // is; both refuse the assistant's first.
    if messages.iter().find(|m| m["role"] != "system")?["role"] == "assistant" {
        return Some("the first turn is the assistant's".into());
    }
    let mut ids = BTreeSet::new();
    // The calls and approval requests (approval id, call) of the last
    // assistant message, and the calls the tool messages since answered.
    let mut calls: BTreeSet<String> = BTreeSet::new();
    let mut asked: Vec<(String, String)> = Vec::new();
    let mut answered: BTreeSet<String> = BTreeSet::new();
    let str_of = |v: &Value, key: &str| v[key].as_str().unwrap_or_default().to_owned();
    for (i, msg) in messages.iter().enumerate() {
        let parts = msg["content"].as_array().cloned().unwrap_or_default();
        if msg["role"] == "tool" {
            for p in parts {
                match p["type"].as_str() {
                    Some("tool-result") if calls.contains(&str_of(&p, "toolCallId")) => {
                        answered.insert(str_of(&p, "toolCallId"));
                    }
                    Some("tool-approval-response") => {
                        let a = str_of(&p, "approvalId");
                        let Some((_, call)) = asked.iter().find(|(x, _)| *x == a) else {
                            return Some(format!("message {i}: response to no approval request"));
                        };
                        // The SDK acts on the responses of the last message only.
                        if i + 1 == messages.len() {
                            answered.insert(call.clone());
                        }
                    }
                    _ => return Some(format!("message {i}: {p} in a tool message")),
                }
            }
            continue;
        }
        if let Some(c) = calls.difference(&answered).next() {
            return Some(format!("message {i}: call {c} unanswered"));
        }
        (calls, asked, answered) = (BTreeSet::new(), Vec::new(), BTreeSet::new());
        if msg["role"] != "assistant" {
            continue;
        }
        for p in &parts {
            if p["type"] == "tool-call" {
                let id = str_of(p, "toolCallId");
                if !ids.insert(id.clone()) {
                    return Some(format!("message {i}: call id {id} used twice"));
                }
                calls.insert(id);
            }
        }
        for p in &parts {
            if p["type"] == "tool-approval-request" {
                let call = str_of(p, "toolCallId");
                if !calls.contains(&call) {
                    return Some(format!("message {i}: approval request for no call"));
                }
                asked.push((str_of(p, "approvalId"), call));
            }
        }
    }
    let open = calls.difference(&answered).next();
    open.map(|c| format!("call {c} unanswered at the end"))
}

#[test]
fn a_call_without_its_result_is_the_assistants_text() {
    // A tool run interrupted (a crash, a member who wrote on).
    let ms = [
        m(Role::User, vec![text("Find a hotel")]),
        m(Role::Assistant, vec![text("Looking."), call("c1")]),
        m(Role::User, vec![text("Never mind, trains?")]),
    ];
    assert_eq!(
        openai(&ms),
        json!([
            {"content": "Find a hotel", "role": "user"},
            {"content": "Looking.\n[tool call search] {\"q\":\"c1\"}", "role": "assistant"},
            {"content": "Never mind, trains?", "role": "user"},
        ])
    );
    let anthropic = render(Format::Anthropic, ms.to_vec()).to_value();
    assert_eq!(
        anthropic["messages"][1]["content"],
        json!([{"text": "Looking.", "type": "text"}, {"text": "[tool call search] {\"q\":\"c1\"}", "type": "text"}])
    );
    let ai = render(Format::AiSdk, ms.to_vec()).to_value();
    assert_eq!(
        ai[1]["content"][1],
        json!({"text": "[tool call search] {\"q\":\"c1\"}", "type": "text"})
    );
    // The newest message an unanswered call: the same.
    assert_eq!(
        openai(&ms[..2])[1],
        json!({"content": "Looking.\n[tool call search] {\"q\":\"c1\"}", "role": "assistant"})
    );
}

#[test]
fn a_message_between_a_call_and_its_result_sends_both_as_text() {
    // A shared room: another member writes while the tool runs.
    let ms = [
        m(Role::Assistant, vec![call("c1")]),
        m(Role::User, vec![text("I'd like a view too")]),
        m(Role::Tool, vec![result("c1")]),
        m(Role::Assistant, vec![text("Here are three.")]),
    ];
    assert_eq!(
        openai(&ms),
        json!([
            {"content": "[tool call search] {\"q\":\"c1\"}", "role": "assistant"},
            {"content": "I'd like a view too", "role": "user"},
            {"content": "[tool result search] hotels for c1", "role": "user"},
            {"content": "Here are three.", "role": "assistant"},
        ])
    );
}

#[test]
fn an_answered_exchange_is_sent_as_calls_and_results() {
    let ms = [
        m(Role::Assistant, vec![call("c1"), call("c2")]),
        m(Role::Tool, vec![result("c2")]),
        m(Role::Tool, vec![result("c1")]),
        m(Role::User, vec![text("thanks")]),
    ];
    let out = openai(&ms);
    assert_eq!(out[0]["tool_calls"].as_array().unwrap().len(), 2);
    assert_eq!(
        out[1],
        json!({"content": "hotels for c2", "role": "tool", "tool_call_id": "c2"})
    );
    assert_eq!(out[2]["tool_call_id"], "c1");
    // Parallel calls, one answered: the other is text, the answered one a call.
    let partial = openai(&ms[..2]);
    assert_eq!(
        partial[0],
        json!({"content": "[tool call search] {\"q\":\"c1\"}", "role": "assistant", "tool_calls": [
            {"function": {"arguments": "{\"q\":\"c2\"}", "name": "search"}, "id": "c2", "type": "function"}]})
    );
}

#[test]
fn a_call_id_used_again_is_sent_as_text_the_second_time() {
    let ms = [
        m(Role::Assistant, vec![call("c1")]),
        m(Role::Tool, vec![result("c1")]),
        m(Role::Assistant, vec![call("c1")]),
        m(Role::Tool, vec![result("c1")]),
    ];
    let out = openai(&ms);
    assert_eq!(out[1]["role"], "tool");
    assert_eq!(out[2]["content"], "[tool call search] {\"q\":\"c1\"}");
    assert_eq!(out[3]["content"], "[tool result search] hotels for c1");
    assert_eq!(openai_refuses(&out), None);
}

#[test]
fn a_result_without_its_call_in_a_run_of_results_comes_after_them() {
    let ms = [
        m(Role::Assistant, vec![call("c1"), call("c2")]),
        m(Role::Tool, vec![result("c1")]),
        m(Role::Tool, vec![result("gone")]),
        m(Role::Tool, vec![result("c2")]),
    ];
    let out = openai(&ms);
    assert_eq!(out[2]["tool_call_id"], "c2");
    assert_eq!(
        out[3],
        json!({"content": "[tool result search] hotels for gone", "role": "user"})
    );
    assert_eq!(openai_refuses(&out), None);
}

/// The response must end the context: when its tool message also holds a
/// part that goes as text after it, the SDK would want the result, so the
/// exchange goes as text (found by the property test).
#[test]
fn an_approvals_answer_followed_by_text_out_of_its_tool_message_is_text() {
    let ms = [
        m(Role::Assistant, vec![call("c2"), ask("a1", "c2")]),
        m(Role::Tool, vec![answer("a1", false), call("c0")]),
    ];
    let ai = render(Format::AiSdk, ms.to_vec()).to_value();
    assert_eq!(ai_sdk_refuses(&ai), None, "{ai}");
    assert_eq!(
        ai[1]["content"][0],
        json!({"text": "[tool call search] {\"q\":\"c2\"}", "type": "text"})
    );
    let last = &ai[ai.as_array().unwrap().len() - 1];
    assert_eq!(last["role"], "user", "{ai}");
}

#[test]
fn an_approvals_answer_as_the_last_message_answers_its_call_in_the_ai_sdk_only() {
    let ms = [
        m(Role::Assistant, vec![call("c1"), ask("a1", "c1")]),
        m(Role::Tool, vec![answer("a1", false)]),
        m(Role::User, vec![text("ok, no booking")]),
    ];
    // Last, the AI SDK runs the approved tool or records the denial itself
    // (after the member's opening line: the assistant spoke first).
    let last = render(Format::AiSdk, ms[..2].to_vec()).to_value();
    assert_eq!(
        last[0]["content"][0]["text"],
        foldline_core::format::OPENING
    );
    assert_eq!(last[1]["content"][0]["type"], "tool-call");
    assert_eq!(last[1]["content"][1]["type"], "tool-approval-request");
    assert_eq!(last[2]["content"][0]["type"], "tool-approval-response");
    assert_eq!(ai_sdk_refuses(&last), None);
    // Further back it wants the result (`MissingToolResultsError`): text.
    let ai = render(Format::AiSdk, ms.to_vec()).to_value();
    assert_eq!(
        ai[1]["content"],
        json!([{"text": "[tool call search] {\"q\":\"c1\"}", "type": "text"}, {"text": "[tool approval requested]", "type": "text"}])
    );
    assert_eq!(
        ai[2],
        json!({"content": [{"text": "[tool denied] not now", "type": "text"}], "role": "user"})
    );
    assert_eq!(ai_sdk_refuses(&ai), None);
    // OpenAI and Anthropic have no approvals: the call has no result, so the
    // exchange (the denial with it) is text.
    assert_eq!(
        openai(&ms),
        json!([
            {"content": "[tool call search] {\"q\":\"c1\"}\n[tool approval requested]", "role": "assistant"},
            {"content": "[tool denied] not now", "role": "user"},
            {"content": "ok, no booking", "role": "user"},
        ])
    );
    // Approved and run: a call and its result everywhere.
    let run = [
        m(Role::Assistant, vec![call("c1"), ask("a1", "c1")]),
        m(Role::Tool, vec![answer("a1", true)]),
        m(Role::Tool, vec![result("c1")]),
    ];
    let out = openai(&run);
    assert_eq!(out[0]["tool_calls"][0]["id"], "c1");
    assert_eq!(out[1]["tool_call_id"], "c1");
    assert_eq!(out.as_array().unwrap().len(), 2);
}

#[test]
fn whitespace_alone_never_reaches_anthropic_or_the_ai_sdk() {
    // A model answers "\n\n" now and then; Anthropic refuses a text block of
    // whitespace alone, in every later request.
    let ms = [
        m(Role::User, vec![text("Hi")]),
        m(Role::Assistant, vec![text("\n\n")]),
        m(Role::User, vec![text("Hello?")]),
        m(Role::Assistant, vec![text(" \n"), text("Here.")]),
    ];
    let a = render(Format::Anthropic, ms.to_vec()).to_value();
    assert_eq!(
        a["messages"],
        json!([
            {"content": [{"text": "Hi", "type": "text"}, {"text": "Hello?", "type": "text"}], "role": "user"},
            {"content": [{"text": "Here.", "type": "text"}], "role": "assistant"},
        ])
    );
    assert_eq!(anthropic_refuses(&a), None);
    let s = render(Format::AiSdk, ms.to_vec()).to_value();
    assert_eq!(s.as_array().unwrap().len(), 3);
    assert_eq!(s[2]["content"], json!([{"text": "Here.", "type": "text"}]));
}

#[test]
fn an_anthropic_context_opens_with_the_member() {
    // A chat that opens with the assistant's greeting, no summary yet.
    let ms = [
        m(Role::System, vec![text("Be brief.")]),
        m(Role::Assistant, vec![text("Hi! How can I help?")]),
        m(Role::User, vec![text("A hotel in Porto.")]),
    ];
    let a = render(Format::Anthropic, ms.to_vec()).to_value();
    assert_eq!(
        a["messages"][0],
        json!({"content": [{"text": foldline_core::format::OPENING, "type": "text"}], "role": "user"})
    );
    assert_eq!(a["messages"][1]["role"], "assistant");
    assert_eq!(anthropic_refuses(&a), None);
    // OpenAI takes an assistant first: nothing added there.
    assert_eq!(
        openai(&ms)[1],
        json!({"content": "Hi! How can I help?", "role": "assistant"})
    );
}

#[test]
fn foldline_form_keeps_every_part_as_it_is() {
    let ms = vec![
        m(Role::Assistant, vec![call("c1")]),
        m(Role::User, vec![text("hi")]),
        m(Role::Tool, vec![result("c1")]),
    ];
    let Some(foldline) = render(Format::Foldline, ms.clone())
        .to_value()
        .as_array()
        .cloned()
    else {
        panic!("an array")
    };
    assert_eq!(foldline.len(), 3);
    assert_eq!(foldline[0]["parts"][0]["type"], "toolCall");
    assert_eq!(foldline[2]["parts"][0]["type"], "toolResult");
}

fn any_part() -> impl Strategy<Value = Part> {
    let id = || prop::sample::select(vec!["c0", "c1", "c2"]);
    let approval = || prop::sample::select(vec!["a0", "a1"]);
    prop_oneof![
        2 => Just(text("words")),
        1 => Just(text("\n \n")),
        3 => id().prop_map(call),
        3 => id().prop_map(result),
        1 => (approval(), id()).prop_map(|(a, c)| ask(a, c)),
        1 => (approval(), any::<bool>()).prop_map(|(a, y)| answer(a, y)),
    ]
}

fn any_message() -> impl Strategy<Value = ContextMessage> {
    (
        prop::sample::select(vec![Role::User, Role::Assistant, Role::Tool, Role::System]),
        prop::collection::vec(any_part(), 0..4),
    )
        .prop_map(|(role, parts)| m(role, parts))
}

/// Every call's arguments and every result's content, each numbered so a
/// dropped one is missed.
fn numbered(messages: Vec<ContextMessage>) -> (Vec<ContextMessage>, Vec<String>) {
    let mut marks = Vec::new();
    let mut n = 0;
    let messages = messages
        .into_iter()
        .map(|mut msg| {
            for p in &mut msg.parts {
                n += 1;
                match p {
                    Part::ToolCall { arguments, .. } => {
                        *arguments = format!("{{\"n\":\"call-{n}\"}}");
                        marks.push(format!("call-{n}"));
                    }
                    Part::ToolResult { content, .. } => {
                        *content = format!("result {n}");
                        marks.push(content.clone());
                    }
                    Part::Text { text } if !text.trim().is_empty() => {
                        *text = format!("words {n}");
                        marks.push(text.clone());
                    }
                    _ => {}
                }
            }
            msg
        })
        .collect();
    (messages, marks)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2_000, ..ProptestConfig::default() })]

    /// Whatever the journal holds, each provider format is one its provider
    /// takes, and every call, result and text is in it.
    #[test]
    fn every_provider_takes_what_is_rendered_and_nothing_is_dropped(
        messages in prop::collection::vec(any_message(), 0..10)
    ) {
        let (messages, marks) = numbered(messages);
        let o = openai(&messages);
        prop_assert_eq!(openai_refuses(&o), None, "{}", o);
        let a = render(Format::Anthropic, messages.clone()).to_value();
        prop_assert_eq!(anthropic_refuses(&a), None, "{}", a);
        let s = render(Format::AiSdk, messages.clone()).to_value();
        prop_assert_eq!(ai_sdk_refuses(&s), None, "{}", s);
        for (name, out) in [("openai", &o), ("anthropic", &a), ("aiSdk", &s)] {
            let text = out.to_string();
            for mark in &marks {
                prop_assert!(text.contains(mark.as_str()), "{name} dropped {mark}: {text}");
            }
        }
    }
}
