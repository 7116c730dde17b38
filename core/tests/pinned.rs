//! Admission of pinned turns (system and developer messages, documents,
//! turns marked pinned): never folded, so together they must leave every
//! context room for a summary, an amendment and an ordinary turn.
mod common;

use common::*;
use foldline_core::budget::{admissible_pinned, MIN_TAIL_CHARS};
use foldline_core::declaration::Declaration;
use foldline_core::event::Event;
use foldline_core::plan::PlanOutcome;
use foldline_core::select::select;
use foldline_core::turn::Role;
use foldline_core::validate::{check_events, EventsCheck};

/// A pinned turn of `role` at source `s`, exactly `size` characters.
fn pinned(s: u64, role: Role, size: usize) -> Event {
    msg(s, &format!("t{s}"), role, &"p".repeat(size))
}

fn check(decl: &Declaration, held: &[Event], events: &[Event]) -> foldline_core::Result<()> {
    check_events(&EventsCheck {
        route: route(),
        events: events.to_vec(),
        declaration: Some(decl.clone()),
        pinned: held.to_vec(),
    })
    .map(|_| ())
}

/// Up to the bound the batch's pinned turns are taken beside those held;
/// one character past it, the turn that crosses is refused by its id;
/// ordinary turns are never refused by the rule, even beside pinned turns
/// written before it held.
#[test]
fn pinned_turns_are_admitted_up_to_what_leaves_a_context_room() {
    let decl = Declaration::new("agent", "agent-compactor");
    let bound = admissible_pinned(&decl) as usize;
    assert_eq!(
        bound, 78_585,
        "seed 000's defaults (the doc comment says it)"
    );
    let held = [pinned(1, Role::System, bound - 100)];
    check(&decl, &held, &[pinned(2, Role::Developer, 100)]).expect("at the bound");
    let err = check(
        &decl,
        &held,
        &[pinned(2, Role::User, 10), pinned(3, Role::Developer, 101)],
    )
    .unwrap_err();
    assert_eq!(err.code.as_str(), "pinned_too_large");
    assert_eq!(err.ids, ["t3"]);
    assert!(
        err.message.starts_with("events[1] brings the pinned turns"),
        "{}",
        err.message
    );
    // A turn marked pinned counts as a system message does.
    let mut marked = pinned(2, Role::User, 101);
    if let Event::Message(m) = &mut marked {
        m.pinned = true;
    }
    assert_eq!(
        check(&decl, &held, &[marked]).unwrap_err().code.as_str(),
        "pinned_too_large"
    );
    // Within one batch, with nothing held.
    let batch = [pinned(1, Role::System, bound), pinned(2, Role::System, 1)];
    assert_eq!(check(&decl, &[], &batch).unwrap_err().ids, ["t2"]);
    // Held pinned turns over the bound (written before the rule) refuse no
    // ordinary turn.
    let over = [pinned(1, Role::System, bound * 2)];
    check(&decl, &over, &turns(2, 3, 500)).expect("ordinary turns");
}

/// Documents also fit their own budget, which every compaction renders
/// them within (`prefix_over_bounds` at every run otherwise).
#[test]
fn documents_are_admitted_within_their_budget() {
    let mut decl = Declaration::new("agent", "agent-compactor");
    decl.documents.budget_chars = 1_000;
    check(
        &decl,
        &[pinned(1, Role::Document, 600)],
        &[pinned(2, Role::Document, 400)],
    )
    .expect("within the budget");
    let err = check(
        &decl,
        &[pinned(1, Role::Document, 600)],
        &[pinned(2, Role::Document, 401)],
    )
    .unwrap_err();
    assert_eq!(
        (err.code.as_str(), err.ids.as_slice()),
        ("pinned_too_large", &["t2".to_owned()][..])
    );
}

/// The context of the conversation so far: never `over_budget`.
fn selects(sim: &Sim) {
    let r = sim.resolve().expect("resolve");
    let mut req = select_request(&sim.decl, sim.events.clone());
    (req.frontier, req.head, req.amendment) = (r.frontier, r.head, r.amendment);
    let chosen = select(&req).expect("a context");
    assert!(chosen.manifest.sizes.total <= chosen.manifest.limit);
}

/// What the rule admits works: a conversation whose pinned turns sit
/// exactly at the bound compacts at every trigger with the longest
/// summaries its packets allow, and every context in between selects
/// (never `over_budget`), across 300 ordinary turns, a correction of
/// covered history as large as an amendment may be among them (absorbed by
/// the compaction after it).
#[test]
fn a_conversation_at_the_bound_compacts_and_selects_for_good() {
    let decl = Declaration::new("agent", "agent-compactor");
    let bound = admissible_pinned(&decl) as usize;
    let system = [
        pinned(1, Role::System, bound / 2),
        pinned(2, Role::Developer, bound - bound / 2),
    ];
    check(&decl, &[], &system).expect("admitted");
    let mut sim = Sim::new(decl.clone());
    sim.events.extend(system);
    sim.next_seq = 3;
    let mut compactions = 0;
    for i in 0..300 {
        sim.say(1, MIN_TAIL_CHARS as usize - 24);
        if i == 150 {
            // Covered by now: its correction is an amendment near its bound.
            sim.events.push(correction("t5", 1, &"c".repeat(7_700)));
        }
        let longest =
            |_: u64, p: &foldline_core::packet::Packet| "s".repeat(p.bounds.max_chars as usize);
        match sim.step_with(longest) {
            PlanOutcome::Compact { .. } => compactions += 1,
            PlanOutcome::Skip { .. } => {}
            other => panic!("{other:?}"),
        }
        selects(&sim);
    }
    assert!(compactions >= 10, "{compactions}");
}
