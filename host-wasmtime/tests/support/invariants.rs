//! The seeds' outcomes, checked after every step of a journey or a fuzz case:
//!
//! - the journal is never edited: each step's journal extends the last one;
//! - the chain verifies, and no head has two boundaries;
//! - the context fits its limit, or a typed refusal says why;
//! - the exact tail is a suffix of the conversation, in order;
//! - the summary appears once per head, as the user-role
//!   `untrusted-history-summary` envelope;
//! - a tool result never reaches the model without its call;
//! - the timeline draws only boundaries the chain accepts;
//! - the driver's context is the stateless select of the whole journal.

use std::collections::BTreeSet;

use foldline_core::event::Event;
use foldline_core::timeline::{DividerState, TimelineItem};
use foldline_core::turn::Role;
use foldline_wasmtime::driver::{ContextOptions, Driver};
use foldline_wasmtime::journal::Journal;
use foldline_wasmtime::model::Model;

/// Every seed outcome, checked against the journal as it is now.
pub fn check<J: Journal, M: Model>(
    d: &Driver<J, M>,
    conv: &str,
    before: &[String],
    step: usize,
) -> Vec<String> {
    let stored = d.journal().read_events(conv, 0).unwrap();
    let now: Vec<String> = stored
        .iter()
        .map(|s| serde_json::to_string(&s.event).unwrap())
        .collect();
    assert!(
        now.len() >= before.len() && now[..before.len()] == *before,
        "step {step}: the journal was edited"
    );
    // The chain verifies; no head has two boundaries.
    let r = d
        .resolve(conv)
        .unwrap_or_else(|e| panic!("step {step}: chain: {e}"));
    let mut heads = BTreeSet::new();
    for s in &stored {
        if let Event::Boundary(b) = &s.event {
            let head = b
                .previous
                .as_ref()
                .map_or(b.frontier.id.clone(), |p| p.boundary_id.clone());
            assert!(
                heads.insert(head),
                "step {step}: two boundaries on one head"
            );
        }
    }
    // What the driver keeps between calls (its cache, the events held in the
    // core's instance) changes nothing: its context, or its refusal, is the
    // stateless select's of the whole journal with the chain's resolution.
    let whole = foldline_core::select(&foldline_core::SelectRequest {
        declaration: d.declaration().clone(),
        route: d.route(conv),
        frontier: r.frontier.clone(),
        head: r.head.clone(),
        amendment: r.amendment.clone(),
        events: stored.iter().map(|s| s.event.clone()).collect(),
        prompt: None,
        prompt_sender: None,
        format: Default::default(),
        limit: None,
        render: true,
        member: None,
        carried: r.carried.clone(),
    });
    // The context fits, or a typed refusal says why: one turn over the whole
    // budget, or an amendment (corrections of frozen turns, kept until a
    // compaction absorbs them) that leaves the budget no room — it fails
    // closed, never truncated (seed 000).
    let ctx = match d.context(conv, ContextOptions::default()) {
        Ok(c) => c,
        Err(e) => {
            assert!(
                e.code() == "tail_turn_too_large"
                    || (e.code() == "over_budget" && r.amendment.is_some()),
                "step {step}: {e}"
            );
            assert_eq!(
                whole.as_ref().err().map(|w| w.code.as_str()),
                Some(e.code()),
                "step {step}: the driver refused, the stateless select answered otherwise"
            );
            return now;
        }
    };
    let whole =
        whole.unwrap_or_else(|e| panic!("step {step}: the stateless select refused: {e:?}"));
    assert!(
        foldline_core::canonical::encode(&ctx) == foldline_core::canonical::encode(&whole),
        "step {step}: the driver's context differs from the stateless select"
    );
    let m = &ctx.manifest;
    assert!(
        m.sizes.total <= m.limit,
        "step {step}: {} > {}",
        m.sizes.total,
        m.limit
    );
    let messages = ctx.messages.map(|m| m.to_value()).unwrap_or_default();
    let messages = messages.as_array().cloned().unwrap_or_default();
    let kind = |m: &serde_json::Value, k: &str| m["kind"] == k;
    // At most one summary, as the user-role envelope.
    let summaries: Vec<_> = messages.iter().filter(|m| kind(m, "summary")).collect();
    assert!(
        summaries.len() <= 1,
        "step {step}: {} summaries",
        summaries.len()
    );
    for s in &summaries {
        assert_eq!(s["role"], "user", "step {step}");
        assert!(
            s["parts"][0]["text"]
                .as_str()
                .is_some_and(|t| t.starts_with("[untrusted-history-summary")),
            "step {step}: {s}"
        );
    }
    // A head has its summary (after an upgrade, until the new epoch's first
    // boundary, the one it carried over).
    let in_force = r.head.as_ref().or(r.carried.as_ref());
    assert_eq!(
        summaries.len(),
        usize::from(in_force.is_some()),
        "step {step}: a head has its summary"
    );
    assert_eq!(
        m.boundary_id,
        in_force.map(|h| h.boundary_id.clone()),
        "step {step}: the summary in force"
    );
    // The exact tail is a suffix of the conversation.
    // (Late deliveries take their place by source sequence.)
    let mut turns: Vec<(u64, String)> = stored
        .iter()
        .filter_map(|s| match &s.event {
            Event::Message(m) | Event::LateDelivery(m) if m.role != Role::System => {
                Some((m.source_seq, m.turn_id.clone()))
            }
            _ => None,
        })
        .collect();
    turns.sort_by_key(|t| t.0);
    let turns: Vec<String> = turns.into_iter().map(|t| t.1).collect();
    let tail: Vec<String> = messages
        .iter()
        .filter(|m| kind(m, "turn"))
        .filter_map(|m| m["turnId"].as_str().map(str::to_owned))
        .collect();
    assert!(
        !tail.is_empty() || turns.is_empty(),
        "step {step}: an empty tail"
    );
    assert_eq!(
        tail[..],
        turns[turns.len() - tail.len()..],
        "step {step}: the tail is not an exact suffix"
    );
    // No tool result without its call.
    let parts: Vec<&serde_json::Value> = messages
        .iter()
        .filter_map(|m| m["parts"].as_array())
        .flatten()
        .collect();
    let calls: BTreeSet<&str> = parts
        .iter()
        .filter(|p| p["type"] == "toolCall")
        .filter_map(|p| p["callId"].as_str())
        .collect();
    for p in parts.iter().filter(|p| p["type"] == "toolResult") {
        let id = p["callId"].as_str().unwrap_or("");
        assert!(
            calls.contains(id),
            "step {step}: result {id} without its call"
        );
    }
    // The timeline draws only accepted boundaries as completed, and a
    // retired epoch's as retired (an upgrade keeps its dividers).
    for item in d.timeline(conv).unwrap().items {
        if let TimelineItem::Divider {
            state: DividerState::Completed,
            boundary_id: Some(b),
            retired,
            ..
        } = item
        {
            let listed = if retired {
                &r.retired_boundaries
            } else {
                &r.accepted
            };
            assert!(
                listed.contains(&b),
                "step {step}: {b} drawn but not {}",
                if retired { "retired" } else { "accepted" }
            );
        }
    }
    now
}
