//! A journey: a long conversation through the real Rust driver on a SQLite
//! file — a pinned system prompt, tool calls and results, corrections,
//! manual `/compact` requests, a model that fails or drops its stream now
//! and then, and a restart of the driver in the middle — with the seeds'
//! outcomes asserted after every step, not snapshots:
//!
//! - the journal is never edited: each step's journal extends the last one;
//! - the chain verifies, and no head has two boundaries;
//! - the context fits its limit, or a typed refusal says why;
//! - the exact tail is a suffix of the conversation, in order;
//! - the summary appears at most once, as the user-role
//!   `untrusted-history-summary` envelope;
//! - a tool result never reaches the model without its call (also after a
//!   correction of the turn that made the call);
//! - the timeline draws only boundaries the chain accepts.
//!
//! Short profile in CI (600 turns); `FOLDLINE_JOURNEY_TURNS=20000` for a long one.

mod support;

use std::collections::BTreeSet;

use foldline_core::event::{Correction, Event};
use foldline_core::timeline::{DividerState, TimelineItem};
use foldline_core::turn::{Part, Role};
use foldline_wasmtime::driver::{ContextOptions, Driver, Outcome};
use foldline_wasmtime::journal::{Journal, SqliteJournal};
use foldline_wasmtime::model::Extractive;
use foldline_wasmtime::runtime::Foldline;
use support::fixtures::{demo_events, small_decl};
use support::flaky::Flaky;

fn driver(db: &std::path::Path) -> Driver<SqliteJournal, Flaky<Extractive>> {
    let mut d = Driver::new(
        Foldline::embedded().unwrap(),
        SqliteJournal::open(db).unwrap(),
        Flaky::new(Extractive),
        small_decl(),
    );
    d.owner = Some("owner".into());
    d
}

/// Every seed outcome, checked against the journal as it is now.
fn check(
    d: &Driver<SqliteJournal, Flaky<Extractive>>,
    before: &[String],
    step: usize,
) -> Vec<String> {
    let stored = d.journal.read_events("c", 0).unwrap();
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
        .resolve("c")
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
    // The context fits, or a typed refusal says why.
    let ctx = match d.context("c", ContextOptions::default()) {
        Ok(c) => c,
        Err(e) => {
            assert_eq!(e.code(), "tail_turn_too_large", "step {step}: {e}");
            return now;
        }
    };
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
    assert_eq!(
        summaries.len(),
        usize::from(r.head.is_some()),
        "step {step}: a head has its summary"
    );
    // The exact tail is a suffix of the conversation.
    let turns: Vec<String> = stored
        .iter()
        .filter_map(|s| match &s.event {
            Event::Message(m) if m.role != Role::System => Some(m.turn_id.clone()),
            _ => None,
        })
        .collect();
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
    // The timeline draws only accepted boundaries as completed.
    for item in d.timeline("c").unwrap().items {
        if let TimelineItem::Divider {
            state: DividerState::Completed,
            boundary_id: Some(b),
            ..
        } = item
        {
            assert!(
                r.accepted.contains(&b),
                "step {step}: {b} drawn but not accepted"
            );
        }
    }
    now
}

#[test]
fn a_long_conversation_keeps_every_seed_outcome_at_every_step() {
    let turns: usize = std::env::var("FOLDLINE_JOURNEY_TURNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(600);
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("journey.db");
    let mut d = driver(&db);
    let script = demo_events("c", turns);
    let mut journal: Vec<String> = Vec::new();
    let (mut compacted, mut failed, mut manual) = (0, 0, 0);
    let (mut users, mut callers): (Vec<String>, Vec<String>) = (Vec::new(), Vec::new());
    for (step, e) in script.into_iter().enumerate() {
        d.journal.append("c", std::slice::from_ref(&e)).unwrap();
        // Corrections now and then: of a member's recent message, or of an
        // assistant turn that called a tool (its text changes; its call stays).
        if let Event::Message(m) = &e {
            if m.role == Role::User {
                users.push(m.turn_id.clone());
            }
            if m.parts.iter().any(|p| matches!(p, Part::ToolCall { .. })) {
                callers.push(m.turn_id.clone());
            }
        }
        let target = match (step / 97) % 2 {
            0 => users.iter().rev().nth(1),
            _ => callers.last(),
        };
        if let (true, Some(target)) = (step % 97 == 96, target) {
            d.journal
                .append(
                    "c",
                    &[Event::Correction(Correction {
                        turn_id: target.clone(),
                        correction_seq: step as u64,
                        parts: vec![Part::Text {
                            text: format!("corrected at step {step}: the budget is 1,200 euros."),
                        }],
                        tokens: None,
                    })],
                )
                .unwrap();
        }
        let outcome = if step % 150 == 149 {
            manual += 1;
            d.compact_now("c", "owner", false).unwrap()
        } else {
            d.on_message("c").unwrap()
        };
        match outcome {
            Outcome::Compacted(_) => compacted += 1,
            Outcome::Failed(_) => failed += 1,
            _ => {}
        }
        // A restart in the middle: a new driver over the same journal.
        if step == turns / 2 {
            d = driver(&db);
        }
        journal = check(&d, &journal, step);
    }
    assert!(compacted >= turns / 200, "{compacted} compactions");
    assert!(failed >= 1, "the failing model was exercised");
    assert!(manual >= 1);
}
