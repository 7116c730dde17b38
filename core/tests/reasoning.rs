//! Reasoning parts (`core/src/render/reasoning.rs`): sent back only in the
//! format they came in, only in an assistant turn of the open tool cycle;
//! never counted, summarized or written as text; kept in foldline's form.

use foldline_core::api;
use foldline_core::declaration::{Budget, Declaration};
use foldline_core::event::Event;
use foldline_core::format::{render, ContextMessage, Format};
use foldline_core::plan::PlanOutcome;
use foldline_core::turn::{content_hash, parts_chars, render_parts, Part, Role};
use proptest::prelude::*;
use serde_json::{json, Value};

mod common;
use common::{call_part, context_message as m, message, result_part, text_part as text, Sim};

fn reasoning(format: &str, data: Value) -> Part {
    serde_json::from_value(json!({"type": "reasoning", "format": format, "data": data})).unwrap()
}

fn thinking() -> Part {
    reasoning(
        "anthropic",
        json!({"type": "thinking", "thinking": "Porto first.", "signature": "sig"}),
    )
}

fn sdk() -> Part {
    reasoning(
        "aiSdk",
        json!({"type": "reasoning", "text": "Porto first.", "providerOptions": {"anthropic": {"signature": "sig"}}}),
    )
}

fn call() -> Part {
    call_part("c1", "search", "{\"q\":\"porto\"}")
}

fn result() -> Part {
    result_part("c1", "search", "3 hotels")
}

fn item_data(p: &Part) -> Value {
    match p {
        Part::Reasoning { data, .. } => data.clone(),
        _ => unreachable!("a reasoning part"),
    }
}

fn rendered(format: Format, messages: &[ContextMessage]) -> Value {
    render(format, messages.to_vec()).to_value()
}

/// Every block or part of type `kind` in a rendering.
fn count(v: &Value, kind: &str) -> usize {
    match v {
        Value::Object(o) => {
            usize::from(o.get("type") == Some(&json!(kind)))
                + o.values().map(|x| count(x, kind)).sum::<usize>()
        }
        Value::Array(a) => a.iter().map(|x| count(x, kind)).sum(),
        _ => 0,
    }
}

#[test]
fn a_multi_step_tool_cycle_sends_every_step_its_reasoning() {
    let messages = vec![
        m(Role::User, vec![text("Find a hotel.")]),
        m(Role::Assistant, vec![thinking(), sdk(), call()]),
        m(Role::Tool, vec![result()]),
        m(
            Role::Assistant,
            vec![
                reasoning(
                    "anthropic",
                    json!({"type": "redacted_thinking", "data": "opaque"}),
                ),
                text("Booked."),
            ],
        ),
    ];
    let a = rendered(Format::Anthropic, &messages);
    assert_eq!(count(&a, "thinking"), 1);
    assert_eq!(count(&a, "redacted_thinking"), 1);
    // In place: first in the assistant's message, before the tool use.
    assert_eq!(a["messages"][1]["content"][0]["type"], "thinking");
    assert_eq!(a["messages"][1]["content"][0]["signature"], "sig");
    assert_eq!(a["messages"][3]["content"][0]["type"], "redacted_thinking");
    let s = rendered(Format::AiSdk, &messages);
    assert_eq!(count(&s, "reasoning"), 1);
    assert_eq!(
        s[1]["content"][0]["providerOptions"]["anthropic"]["signature"],
        "sig"
    );
}

#[test]
fn no_reasoning_goes_back_after_the_member_writes() {
    let messages = vec![
        m(Role::User, vec![text("Find a hotel.")]),
        m(Role::Assistant, vec![thinking(), sdk(), call()]),
        m(Role::Tool, vec![result()]),
        m(Role::Assistant, vec![thinking(), text("Booked.")]),
        m(Role::User, vec![text("Thanks.")]),
    ];
    for f in [Format::Anthropic, Format::AiSdk] {
        let v = rendered(f, &messages);
        assert_eq!(
            count(&v, "thinking") + count(&v, "reasoning"),
            0,
            "{f:?}: {v}"
        );
    }
}

#[test]
fn reasoning_goes_only_to_its_own_format_and_only_as_that_format_s_reasoning() {
    let open = |parts: Vec<Part>| {
        vec![
            m(Role::User, vec![text("Find a hotel.")]),
            m(Role::Assistant, parts),
        ]
    };
    // OpenAI's shapes never get another format's: the bytes are those
    // without it.
    for f in [Format::Openai, Format::OpenaiResponses] {
        assert_eq!(
            rendered(f, &open(vec![thinking(), sdk(), call()])),
            rendered(f, &open(vec![call()])),
        );
    }
    assert_eq!(
        count(
            &rendered(Format::AiSdk, &open(vec![thinking(), text("x")])),
            "thinking"
        ),
        0
    );
    assert_eq!(
        count(
            &rendered(Format::Anthropic, &open(vec![sdk(), text("x")])),
            "reasoning"
        ),
        0
    );
    // A Responses reasoning item goes back to the Responses API alone, as
    // its own item before the turn's calls, wherever it stood in the turn.
    let item = reasoning(
        "openaiResponses",
        json!({"type": "reasoning", "encrypted_content": "gAAAAB", "summary": []}),
    );
    let answered = |parts: Vec<Part>| {
        let mut c = open(parts);
        c.push(m(Role::Tool, vec![result()]));
        c
    };
    let items = rendered(
        Format::OpenaiResponses,
        &answered(vec![call(), item.clone()]),
    );
    let kinds: Vec<&str> = (items.as_array().unwrap().iter())
        .map(|i| i["type"].as_str().unwrap_or("message"))
        .collect();
    assert_eq!(
        kinds,
        [
            "message",
            "reasoning",
            "function_call",
            "function_call_output"
        ]
    );
    assert_eq!(items[1], item_data(&item));
    for f in [Format::Openai, Format::AiSdk, Format::Anthropic] {
        assert_eq!(
            rendered(f, &answered(vec![item.clone(), call()])),
            rendered(f, &answered(vec![call()])),
        );
    }
    // A block of another type, even under the right format, is never sent.
    let odd = reasoning("anthropic", json!({"type": "tool_use", "id": "x"}));
    assert_eq!(
        rendered(Format::Anthropic, &open(vec![odd, text("x")])),
        rendered(Format::Anthropic, &open(vec![text("x")])),
    );
    // Nor from a turn that is not the assistant's.
    let tool = vec![
        m(Role::User, vec![text("Find a hotel.")]),
        m(Role::Assistant, vec![call()]),
        m(Role::Tool, vec![thinking(), result()]),
    ];
    assert_eq!(count(&rendered(Format::Anthropic, &tool), "thinking"), 0);
    // foldline's own form keeps every part.
    let own = rendered(Format::Foldline, &open(vec![thinking(), sdk(), call()]));
    assert_eq!(own[1]["parts"].as_array().unwrap().len(), 3);
}

#[test]
fn reasoning_is_content_but_never_counted_or_written_as_text() {
    let with = vec![thinking(), text("Booked.")];
    let without = vec![text("Booked.")];
    assert_eq!(parts_chars(&with), parts_chars(&without));
    assert_eq!(render_parts(&with), "Booked.");
    assert_ne!(content_hash(&with), content_hash(&without));
}

/// The request of the vector `select/reasoning-open-cycle-anthropic`: a
/// member's question, an assistant turn with an Anthropic thinking block, an
/// AI SDK reasoning part and a signed call, and the call's result.
fn open_cycle_request() -> Value {
    let vectors: Value =
        serde_json::from_str(include_str!("../../tests/vectors/select.json")).unwrap();
    (vectors.as_array().unwrap().iter())
        .find(|v| v["name"] == "select/reasoning-open-cycle-anthropic")
        .unwrap()["request"]
        .clone()
}

#[test]
fn reasoning_data_of_any_shape_is_kept_and_never_sent() {
    let base = open_cycle_request();
    let select = |req: &Value| -> Value {
        serde_json::from_slice(&api::call("select", req.to_string().as_bytes())).unwrap()
    };
    let ok = select(&base);
    assert_eq!(
        ok["ok"]["messages"]["messages"][1]["content"][0]["type"],
        "thinking"
    );
    for data in [
        json!("text"),
        json!([1]),
        json!(null),
        json!({"thinking": "no type"}),
    ] {
        let mut req = base.clone();
        req["events"][1]["parts"][0]["data"] = data.clone();
        let out = select(&req);
        assert_eq!(
            out["ok"]["messages"]["messages"][1]["content"][0]["type"], "tool_use",
            "{data}: {out}"
        );
        req["format"] = json!("foldline");
        assert_eq!(select(&req)["ok"]["messages"][1]["parts"][0]["data"], data);
    }
    // A part that is not one of the core's is refused with its code.
    let mut req = base.clone();
    req["events"][1]["parts"][0]["format"] = json!("gemini");
    assert_eq!(select(&req)["error"]["code"], "invalid_request");
}

#[test]
fn a_call_s_provider_options_go_back_only_in_the_ai_sdk_s_form_while_its_cycle_is_open() {
    let mut signed = call();
    if let Part::ToolCall {
        provider_options, ..
    } = &mut signed
    {
        *provider_options = json!({"google": {"thoughtSignature": "c2ln"}});
    }
    let open = vec![
        m(Role::User, vec![text("Find a hotel.")]),
        m(Role::Assistant, vec![signed.clone()]),
        m(Role::Tool, vec![result()]),
    ];
    let s = rendered(Format::AiSdk, &open);
    assert_eq!(
        s[1]["content"][0]["providerOptions"]["google"]["thoughtSignature"],
        "c2ln"
    );
    let plain = vec![
        m(Role::User, vec![text("Find a hotel.")]),
        m(Role::Assistant, vec![call()]),
        m(Role::Tool, vec![result()]),
    ];
    for f in [Format::Openai, Format::OpenaiResponses, Format::Anthropic] {
        assert_eq!(rendered(f, &open), rendered(f, &plain), "{f:?}");
    }
    let mut closed = open.clone();
    closed.push(m(Role::User, vec![text("Thanks.")]));
    let mut plain_closed = plain.clone();
    plain_closed.push(m(Role::User, vec![text("Thanks.")]));
    assert_eq!(
        rendered(Format::AiSdk, &closed),
        rendered(Format::AiSdk, &plain_closed)
    );
    // Never counted; part of the content.
    assert_eq!(parts_chars(&[signed.clone()]), parts_chars(&[call()]));
    assert_ne!(content_hash(&[signed]), content_hash(&[call()]));
}

#[test]
fn the_open_cycle_s_reasoning_is_held_back_from_the_budget_in_the_format_that_sends_it() {
    let base = open_cycle_request();
    let select = |format: &str, limit: Option<u64>, prompt: bool| -> Value {
        let mut req = base.clone();
        req["format"] = json!(format);
        if let Some(l) = limit {
            req["limit"] = json!(l);
        }
        if prompt {
            req["prompt"] = json!([{"type": "text", "text": "And trains?"}]);
        }
        serde_json::from_slice(&api::call("select", req.to_string().as_bytes())).unwrap()
    };
    let thinking = &base["events"][1]["parts"][0]["data"];
    let written = foldline_core::canonical::encode_value(thinking).len() as u64;
    let anthropic = select("anthropic", None, false);
    let sizes = &anthropic["ok"]["manifest"]["sizes"];
    assert_eq!(sizes["reasoning"], json!(written));
    let openai = select("openai", None, false);
    assert_eq!(openai["ok"]["manifest"]["sizes"].get("reasoning"), None);
    assert_eq!(
        sizes["total"].as_u64().unwrap(),
        openai["ok"]["manifest"]["sizes"]["total"].as_u64().unwrap() + written
    );
    // A budget the turns fit without the reasoning: for Anthropic the oldest
    // unit gives way, the tool cycle stays whole; OpenAI keeps every turn.
    let exact = openai["ok"]["manifest"]["sizes"]["total"].as_u64().unwrap();
    let tight = select("anthropic", Some(exact + written - 1), false);
    assert_eq!(
        tight["ok"]["manifest"]["included"],
        json!(["a1", "r1"]),
        "{tight}"
    );
    let kept = select("openai", Some(exact + written - 1), false);
    assert_eq!(
        kept["ok"]["manifest"]["included"],
        json!(["u1", "a1", "r1"])
    );
    // Reasoning alone over the budget is named in the refusal.
    let over = select("anthropic", Some(written - 1), false);
    assert_eq!(over["error"]["code"], "over_budget");
    assert!(
        over["error"]["message"]
            .as_str()
            .unwrap()
            .contains("reasoning"),
        "{over}"
    );
    // A prompt closes the cycle: nothing is held back.
    let prompted = select("anthropic", None, true);
    assert_eq!(prompted["ok"]["manifest"]["sizes"].get("reasoning"), None);
}

/// A long thinking tool loop, one driver pass after every turn: what a
/// provider requires of the open cycle's reasoning (the last step's) counts
/// in the compaction plan as it does in `select` (and in character mode the
/// exact tail gives it room), so older turns are folded into the summary
/// rather than left out of the model's view unsummarized; the earlier
/// steps' go when they fit, else the manifest counts them. `words`: a turn's
/// words (about five characters each); `think`: a step's thinking, in
/// words. Returns how many selections left earlier steps' thinking out.
fn thinking_loop(d: Declaration, words: usize, think: usize) -> usize {
    let mut s = Sim::new(d);
    let next = |s: &mut Sim, role: Role, parts: Vec<Part>| {
        let seq = s.next_seq;
        s.events.push(Event::Message(message(
            seq,
            0,
            &format!("t{seq}"),
            role,
            parts,
        )));
        s.next_seq += 1;
        s.step()
    };
    let say = |n: usize, w: &str| vec![w; n].join(" ");
    // Earlier conversation: eight exchanges.
    for i in 0..8 {
        next(
            &mut s,
            Role::User,
            vec![text(&say(words, &format!("ask{i}")))],
        );
        next(
            &mut s,
            Role::Assistant,
            vec![text(&say(words, &format!("say{i}")))],
        );
    }
    // A tool loop: every step thinks (Anthropic counts the open cycle's
    // thinking it is sent), calls a tool and reads its result.
    next(
        &mut s,
        Role::User,
        vec![text("Plan the whole trip, step by step.")],
    );
    let (mut compactions, mut left_out) = (0, 0);
    let mut step_ids = Vec::new();
    for step in 0..5 {
        step_ids.push(format!("t{}", s.next_seq));
        let think = reasoning(
            "anthropic",
            json!({"type": "thinking", "thinking": say(think, &format!("hmm{step}")), "signature": "s".repeat(800)}),
        );
        let call = call_part(&format!("c{step}"), "search", "{}");
        let result = result_part(&format!("c{step}"), "search", &say(words / 2, "found"));
        for (role, parts) in [
            (Role::Assistant, vec![think, call]),
            (Role::Tool, vec![result]),
        ] {
            if matches!(next(&mut s, role, parts), PlanOutcome::Compact { .. }) {
                compactions += 1;
            }
            let r = s.resolve().unwrap();
            let mut req = common::select_request(&s.decl, s.events.clone());
            req.frontier = r.frontier;
            req.head = r.head;
            req.amendment = r.amendment;
            req.format = Format::Anthropic;
            let sel = foldline_core::select(&req).unwrap();
            let m = &sel.manifest;
            assert!(m.sizes.reasoning > 0, "the cycle's thinking is held back");
            assert_eq!(
                m.uncovered_omitted, 0,
                "step {step}: turns no summary covers were left out: {:?}",
                m.omitted
            );
            // The steps' thinking sent: always the last step's, first in
            // the final assistant message (Anthropic refuses it otherwise);
            // every other step in the context's unless the manifest counts
            // it as left out.
            let out = sel.messages.unwrap().to_value();
            let sent: Vec<String> = (out["messages"].as_array().unwrap().iter())
                .filter(|m| m["role"] == "assistant")
                .filter_map(|m| m["content"][0]["thinking"].as_str())
                .filter_map(|t| t.split(' ').next()?.strip_prefix("hmm")?.parse().ok())
                .map(|i: usize| step_ids[i].clone())
                .collect();
            let in_context: Vec<&String> = (step_ids.iter())
                .filter(|id| m.included.contains(id))
                .collect();
            assert_eq!(
                sent.last(),
                step_ids.last(),
                "step {step}: its thinking is not sent"
            );
            assert!(sent.iter().all(|id| in_context.contains(&id)));
            assert_eq!(
                sent.len() as u64 + m.reasoning_left_out,
                in_context.len() as u64,
                "step {step}: sent {sent:?}, {} counted as left out, in the context {in_context:?}",
                m.reasoning_left_out
            );
            left_out += usize::from(m.reasoning_left_out > 0);
        }
    }
    assert!(compactions > 0, "the loop's thinking made room by folding");
    left_out
}

#[test]
fn a_long_thinking_tool_loop_folds_older_turns_instead_of_leaving_them_out() {
    // Seed 002's token budget (8,192 tokens): turns of ~200 tokens, steps
    // that think ~700.
    let mut d = Declaration::new("agent", "agent-compactor");
    d.budget = Budget::default_tokens();
    thinking_loop(d, 160, 500);
    // Seed 000's character budget (80,000; retain 40,000): turns of ~4,000
    // characters, steps that think ~10,000 — together 50,000 by the fifth.
    thinking_loop(Declaration::new("agent", "agent-compactor"), 800, 1_900);
}

#[test]
fn a_thinking_loop_longer_than_the_budget_goes_on_with_the_last_step_s_thinking() {
    // Seed 000's 80,000 characters and steps that think ~25,000 each (an
    // Anthropic thinking budget of ~6,500 tokens): from the fourth step the
    // whole cycle's thinking is over the budget by itself. Each context
    // sends the last step's, counts the earlier steps', and leaves no turn
    // out (refused `over_budget` before).
    let named = thinking_loop(Declaration::new("agent", "agent-compactor"), 800, 5_000);
    assert!(
        named >= 6,
        "the earlier steps' thinking was left out {named} times"
    );
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    /// Any open thinking loop under any budget: the last step's thinking
    /// always goes, first in the final assistant message; the earlier
    /// steps' go whole or not at all, and only when every turn fits beside
    /// them; `over_budget` only when the last step's thinking alone leaves
    /// no room. A step may be two assistant turns in a row (thinking and
    /// text, then thinking and a call), which a provider takes as one
    /// message: the step's thinking is both turns'.
    #[test]
    fn the_last_step_s_thinking_always_goes_and_the_rest_only_with_room(
        history in prop::collection::vec(1usize..2_000, 0..6),
        steps in prop::collection::vec((1usize..6_000, prop::option::of(1usize..3_000)), 1..6),
        limit in 500u64..30_000,
    ) {
        let mut events = Vec::new();
        let mut seq = 1;
        let mut push = |id: String, role: Role, parts: Vec<Part>| {
            events.push(Event::Message(message(seq, 0, &id, role, parts)));
            seq += 1;
        };
        for (i, n) in history.iter().enumerate() {
            let role = if i % 2 == 0 { Role::User } else { Role::Assistant };
            push(format!("h{i}"), role, vec![text(&"w".repeat(*n))]);
        }
        push("ask".into(), Role::User, vec![text("Go.")]);
        let block = |name: String, n: usize| json!({"type": "thinking", "thinking": format!("{name} {}", "t".repeat(n)), "signature": "sig"});
        // Each step's thinking blocks, in order, with their turns.
        let mut step_blocks: Vec<Vec<Value>> = Vec::new();
        let mut step_turns: Vec<Vec<String>> = Vec::new();
        for (i, (n, before)) in steps.iter().enumerate() {
            let (mut blocks, mut turns) = (Vec::new(), Vec::new());
            if let Some(m) = before {
                let b = block(format!("p{i}"), *m);
                push(format!("p{i}"), Role::Assistant, vec![reasoning("anthropic", b.clone()), text("Checking.")]);
                blocks.push(b);
                turns.push(format!("p{i}"));
            }
            let b = block(format!("s{i}"), *n);
            let call = call_part(&format!("c{i}"), "search", "{}");
            push(format!("a{i}"), Role::Assistant, vec![reasoning("anthropic", b.clone()), call]);
            blocks.push(b);
            turns.push(format!("a{i}"));
            push(format!("r{i}"), Role::Tool, vec![result_part(&format!("c{i}"), "search", "ok")]);
            step_blocks.push(blocks);
            step_turns.push(turns);
        }
        let mut req = common::select_request(&Declaration::new("agent", "agent-compactor"), events);
        req.format = Format::Anthropic;
        req.limit = Some(limit);
        let written = |bs: &[Value]| bs.iter().map(|b| foldline_core::canonical::encode_value(b).len() as u64).sum::<u64>();
        let last = step_blocks.last().unwrap();
        let all: Vec<Value> = step_blocks.concat();
        match foldline_core::select(&req) {
            Ok(sel) => {
                let m = sel.manifest;
                prop_assert!(m.sizes.total <= limit);
                let out = sel.messages.unwrap().to_value();
                let assistant: Vec<&Value> = (out["messages"].as_array().unwrap().iter())
                    .filter(|x| x["role"] == "assistant")
                    .collect();
                // The last step's turns in the context (its first turn may
                // be left out for room, the call never).
                let kept: Vec<&Value> = (last.iter().zip(step_turns.last().unwrap()))
                    .filter(|(_, id)| m.included.contains(id))
                    .map(|(b, _)| b)
                    .collect();
                prop_assert_eq!(&assistant.last().unwrap()["content"][0], kept[0]);
                let sent = out.to_string().matches("\"type\":\"thinking\"").count();
                let earlier = (all.len() - last.len()) as u64;
                if m.reasoning_left_out == 0 {
                    // The whole cycle's: with every turn, or nothing earlier to leave out.
                    prop_assert!(earlier == 0 || m.uncovered_omitted == 0, "{:?}", m);
                    if earlier > 0 {
                        prop_assert_eq!(sent, all.len());
                    }
                    prop_assert_eq!(m.sizes.reasoning, written(&all));
                } else {
                    prop_assert_eq!(m.reasoning_left_out, earlier);
                    prop_assert_eq!(sent, kept.len());
                    prop_assert_eq!(m.sizes.reasoning, written(last));
                    // Only for lack of room: the whole cycle's and every turn
                    // would be over the budget.
                    prop_assert!(m.uncovered_omitted > 0 || m.sizes.tail + written(&all) > limit, "{:?}", m);
                }
            }
            Err(e) if e.code.as_str() == "over_budget" => prop_assert!(written(last) > limit, "{:?}", e),
            Err(e) => prop_assert_eq!(e.code.as_str(), "tail_turn_too_large"),
        }
    }
}
