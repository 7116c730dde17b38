//! A journey: a long conversation through the real Rust driver on a SQLite
//! file — a pinned system prompt, tool calls and results, corrections,
//! manual `/compact` requests, a model that fails or drops its stream now
//! and then, and a restart of the driver in the middle — with the seeds'
//! outcomes (`support/invariants.rs`) asserted after every step, not
//! snapshots — a tool result never reaches the model without its call also
//! after a correction of the turn that made the call — and at three quarters
//! a ruleset upgrade: the driver restarts on an artifact built with the next
//! ruleset version (support/ruleset.rs), the old chain retires and the
//! conversation compacts on in the new epoch.
//!
//! Short profile in CI (600 turns); `FOLDLINE_JOURNEY_TURNS=20000` for a long one.

mod support;

use foldline_core::event::{Correction, Event};
use foldline_core::turn::{Part, Role};
use foldline_wasmtime::driver::{Driver, Outcome};
use foldline_wasmtime::journal::{Journal, SqliteJournal};
use foldline_wasmtime::model::Extractive;
use foldline_wasmtime::runtime::{Foldline, Limits};
use support::fixtures::{demo_events, small_decl};
use support::flaky::Flaky;
use support::invariants::check;
use support::ruleset::{next_ruleset_wasm, NEXT_RULESET};

fn driver(db: &std::path::Path) -> Driver<SqliteJournal, Flaky<Extractive>> {
    on(Foldline::embedded().unwrap(), db)
}

fn on(core: Foldline, db: &std::path::Path) -> Driver<SqliteJournal, Flaky<Extractive>> {
    Driver::builder(
        core,
        SqliteJournal::open(db).unwrap(),
        Flaky::new(Extractive),
    )
    .declaration(small_decl())
    .owner("owner")
    .build()
    .unwrap()
}

#[test]
fn a_long_conversation_keeps_every_seed_outcome_at_every_step() {
    let turns: usize = std::env::var("FOLDLINE_JOURNEY_TURNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(600);
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("journey.db");
    let next = next_ruleset_wasm();
    let mut d = driver(&db);
    let script = demo_events("c", turns);
    let mut before_upgrade = 0;
    let mut journal: Vec<String> = Vec::new();
    let (mut compacted, mut failed, mut manual) = (0, 0, 0);
    let (mut users, mut callers): (Vec<String>, Vec<String>) = (Vec::new(), Vec::new());
    for (step, e) in script.into_iter().enumerate() {
        d.journal().append("c", std::slice::from_ref(&e)).unwrap();
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
            d.journal()
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
        // A ruleset upgrade at three quarters: the driver restarts on a
        // release whose ruleset version is bumped. The old chain retires
        // (listed, never fatal), a new frontier and chain start.
        if step == turns * 3 / 4 {
            before_upgrade = compacted;
            d = on(Foldline::from_file(&next, Limits::default()).unwrap(), &db);
        }
        journal = check(&d, "c", &journal, step);
    }
    let r = d.resolve("c").unwrap();
    assert!(
        compacted > before_upgrade,
        "no compaction under the new ruleset"
    );
    assert!(!r.retired_boundaries.is_empty() && !r.retired_frontiers.is_empty());
    let head = r.head.expect("a chain in the new epoch");
    let boundaries: Vec<_> = d
        .journal()
        .read_events("c", 0)
        .unwrap()
        .into_iter()
        .filter_map(|s| match s.event {
            Event::Boundary(b) => Some(b),
            _ => None,
        })
        .collect();
    let upgraded = boundaries
        .iter()
        .filter(|b| b.ruleset_version == NEXT_RULESET)
        .count();
    assert_eq!(
        head.length as usize, upgraded,
        "the new chain holds exactly the new ruleset's boundaries"
    );
    assert_eq!(
        r.retired_boundaries.len() + upgraded,
        boundaries.len(),
        "every boundary of the old ruleset is retired, none lost"
    );
    assert!(compacted >= turns / 200, "{compacted} compactions");
    assert!(failed >= 1, "the failing model was exercised");
    assert!(manual >= 1);
}
