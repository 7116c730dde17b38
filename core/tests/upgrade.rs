//! An upgrade (a new declaration or ruleset) keeps what the model knew: the
//! retired chain's last summary is carried into the new epoch, its dividers
//! still draw, and the manifest says what lies before the new frontier.
mod common;

use common::*;
use foldline_core::event::Event;
use foldline_core::format::Rendered;
use foldline_core::plan::{plan, PlanOutcome};
use foldline_core::select::{select, BeforeReason, SelectRequest};
use foldline_core::timeline::{timeline, TimelineItem, TimelineRequest};
use foldline_core::Code;

/// Three boundaries under one declaration, then the declaration changes
/// (a tighter summary bound: another fingerprint, so another epoch).
fn upgraded() -> Sim {
    let mut s = three_links();
    s.decl.summary.max_chars = Some(400);
    s
}

#[test]
fn resolve_offers_the_retired_chains_last_summary() {
    let old = three_links();
    let last = old.boundaries().last().cloned().unwrap();
    let s = upgraded();
    let r = s.resolve().unwrap();
    assert!(r.frontier.is_none() && r.head.is_none());
    assert_eq!(r.retired_boundaries.len(), 3);
    let carried = r.carried.expect("the retired chain's last summary");
    assert_eq!(carried.boundary_id, last.id);
    assert_eq!(carried.summary, last.summary);
}

#[test]
fn the_new_frontier_starts_where_the_carried_summary_ends() {
    let s = upgraded();
    let r = s.resolve().unwrap();
    let carried = r.carried.clone().unwrap();
    let mut req = request(&s.decl, s.events.clone());
    req.carried = r.carried;
    let PlanOutcome::Activate { frontier } = plan(&req) else {
        panic!("activation expected")
    };
    assert_eq!(frontier.start_seq, carried.covered_through_seq + 1);
    assert_eq!(
        frontier.carried.as_ref().unwrap().boundary_id,
        carried.boundary_id
    );
    // Without it, an established conversation keeps only the newest turns
    // and nothing covers the rest: what the upgrade used to cost.
    let mut bare = request(&s.decl, s.events.clone());
    bare.carried = None;
    let PlanOutcome::Activate { frontier: lost } = plan(&bare) else {
        panic!()
    };
    assert!(lost.carried.is_none());
}

#[test]
fn the_context_keeps_the_carried_summary_until_the_new_epoch_folds_it() {
    let mut s = upgraded();
    let old_summary = s.boundaries().last().unwrap().summary.clone();
    // Activation only (the new epoch is below its trigger).
    assert!(matches!(s.step(), PlanOutcome::Skip { .. }));
    let r = s.resolve().unwrap();
    let frontier = r.frontier.clone().unwrap();
    assert!(r.head.is_none());
    let sel = select(&SelectRequest {
        frontier: Some(frontier.clone()),
        carried: r.carried.clone(),
        ..select_request(&s.decl, s.events.clone())
    })
    .unwrap();
    let Some(Rendered::Foldline(messages)) = &sel.messages else {
        panic!()
    };
    let summary = format!("{:?}", messages[0].parts);
    assert!(summary.contains(&old_summary), "{summary}");
    let before = sel.manifest.before_frontier.clone().unwrap();
    assert_eq!(before.reason, BeforeReason::Carried);
    assert_eq!(before.through_seq, frontier.start_seq - 1);
    assert_eq!(
        sel.manifest.boundary_id,
        r.carried.as_ref().map(|c| c.boundary_id.clone())
    );
    // Without the carried summary, select refuses rather than forget.
    let e = select(&SelectRequest {
        frontier: Some(frontier),
        ..select_request(&s.decl, s.events.clone())
    })
    .unwrap_err();
    assert_eq!(e.code, Code::FrontierMismatch);

    // The new epoch's first compaction starts from the carried summary.
    s.say(25, 1_000);
    let PlanOutcome::Compact { packet, .. } = s.step() else {
        panic!("compaction expected")
    };
    assert!(packet.previous.is_none());
    let prior = &packet.messages[1].content;
    assert!(
        prior.starts_with("Summary carried over from an earlier policy"),
        "{prior}"
    );
    assert!(prior.contains(&old_summary));
    let r = s.resolve().unwrap();
    assert_eq!(r.head.as_ref().unwrap().length, 1);
    assert!(r.carried.is_none(), "the new chain's summary took it in");
}

#[test]
fn retired_dividers_still_draw_marked_retired() {
    let mut s = upgraded();
    s.say(25, 1_000);
    s.step();
    s.step();
    let r = s.resolve().unwrap();
    assert_eq!(r.accepted.len(), 1);
    let t = timeline(&TimelineRequest {
        events: s.events.clone(),
        accepted: Some(r.accepted.clone()),
        retired: r.retired_boundaries.clone(),
        limit: None,
        before: None,
    })
    .unwrap();
    let dividers: Vec<bool> = t
        .items
        .iter()
        .filter_map(|i| match i {
            TimelineItem::Divider { retired, .. } => Some(*retired),
            _ => None,
        })
        .collect();
    assert_eq!(dividers, [true, true, true, false]);
    // Without the retired list (as before), the old dividers vanished.
    let bare = timeline(&TimelineRequest {
        events: s.events.clone(),
        accepted: Some(r.accepted),
        retired: Vec::new(),
        limit: None,
        before: None,
    })
    .unwrap();
    assert_eq!(
        bare.items
            .iter()
            .filter(|i| matches!(i, TimelineItem::Divider { .. }))
            .count(),
        1
    );
}

#[test]
fn a_tampered_carried_boundary_is_refused() {
    let mut s = upgraded();
    s.step();
    // Rewrite the carried boundary's summary in the journal.
    let carried = s.resolve().unwrap().frontier.unwrap().carried.unwrap();
    for e in &mut s.events {
        if let Event::Boundary(b) = e {
            if b.id == carried.boundary_id {
                b.summary.push_str(" (edited)");
            }
        }
    }
    let e = s.resolve().unwrap_err();
    assert_eq!(e.code, Code::DivergentHash);
}
