//! The rules of reconstruction and `plan` (docs/rules.md lists each with its tests).
mod common;

use common::*;
use foldline_core::amend::{Amendment, AmendmentEntry, EntryKind};
use foldline_core::boundary::ChainHead;
use foldline_core::declaration::{
    Budget, CompactionMode, Declaration, InstructionMode, Instructions,
};
use foldline_core::event::Event;
use foldline_core::plan::{plan, PauseReason, PlanOutcome, Trigger};
use foldline_core::reconstruct::reconstruct;
use foldline_core::turn::Role;

fn compact_packet(o: PlanOutcome) -> foldline_core::packet::Packet {
    match o {
        PlanOutcome::Compact { packet, .. } => *packet,
        other => panic!("expected compact, got {other:?}"),
    }
}

// ---- Reconstruction ----------------------------------------------------

#[test]
fn reconstruction_is_independent_of_arrival_order() {
    let mut events = turns(1, 20, 50);
    events.push(correction("t3", 1, "fixed"));
    events.push(correction("t3", 2, "fixed again"));
    let a = reconstruct(&events).unwrap().turns;
    events.reverse();
    let b = reconstruct(&events).unwrap().turns;
    assert_eq!(a, b);
    let t3 = a.iter().find(|t| t.turn_id == "t3").unwrap();
    assert_eq!(
        t3.parts,
        text("fixed again"),
        "the highest correction sequence wins"
    );
    assert!(t3.corrected);
}

#[test]
fn repeated_event_is_idempotent_but_conflicting_one_fails_closed() {
    let mut events = turns(1, 3, 10);
    events.push(events[0].clone());
    assert_eq!(reconstruct(&events).unwrap().turns.len(), 3);
    events.push(msg(1, "t1", Role::User, "different"));
    assert_eq!(
        reconstruct(&events).unwrap_err().code.as_str(),
        "conflicting_turn"
    );
}

#[test]
fn late_delivery_takes_its_place_by_source_sequence() {
    let mut events = turns(1, 5, 10);
    events.push(Event::LateDelivery(message(
        2,
        1,
        "late",
        Role::User,
        text("late"),
    )));
    let turns = reconstruct(&events).unwrap().turns;
    let ids: Vec<_> = turns.iter().map(|t| t.turn_id.as_str()).collect();
    assert_eq!(ids, ["t1", "t2", "late", "t3", "t4", "t5"]);
    assert!(turns[2].late);
}

// ---- Activation --------------------------------------------------------

#[test]
fn new_conversation_activates_at_its_first_turn() {
    let d = chars_decl(10_000, 5_000);
    let f = activate(&d, turns(1, 3, 100));
    assert_eq!(f.start_seq, 1);
    assert!(!f.established);
    assert_eq!(f.activating_turn_id, "t3");
    assert_eq!(f.declaration_fingerprint, d.fingerprint());
    assert!(f.id_is_intact());
}

#[test]
fn established_conversation_keeps_only_newest_groups_reaching_the_trigger() {
    let d = chars_decl(10_000, 5_000);
    let f = activate(&d, turns(1, 100, 1_000));
    // Ten newest turns of 1,000 chars reach the 10,000 trigger: 91..=100.
    assert_eq!(f.start_seq, 91);
    assert!(f.established);
}

#[test]
fn no_eligible_turn_skips_without_activating() {
    let d = chars_decl(10_000, 5_000);
    let o = plan(&request(&d, vec![msg(0, "sys", Role::System, "be kind")]));
    assert!(matches!(o, PlanOutcome::Skip { .. }), "{o:?}");
}

#[test]
fn frontier_of_another_epoch_is_replaced_by_a_new_activation() {
    let d = chars_decl(10_000, 5_000);
    let f = activate(&d, turns(1, 3, 100));
    let mut d2 = d.clone();
    d2.summary.max_chars = Some(600); // a policy change: new fingerprint, new epoch
    let mut r = request(&d2, turns(1, 3, 100));
    r.frontier = Some(f.clone());
    match plan(&r) {
        PlanOutcome::Activate { frontier } => assert_ne!(frontier.id, f.id),
        o => panic!("{o:?}"),
    }
}

// ---- Skip --------------------------------------------------------------

#[test]
fn below_trigger_skips_content_dark() {
    let d = chars_decl(10_000, 5_000);
    let events = turns(1, 5, 100);
    let f = activate(&d, events.clone());
    let mut r = request(&d, events);
    r.frontier = Some(f);
    let o = plan(&r);
    let json = serde_json::to_string(&o).unwrap();
    match o {
        PlanOutcome::Skip { record } => {
            assert_eq!(record.total, 500);
            assert_eq!(record.eligible_turns, 5);
        }
        o => panic!("{o:?}"),
    }
    assert!(
        !json.contains("xxx") && !json.contains("t1:"),
        "skip record carries text: {json}"
    );
}

// ---- Compact -----------------------------------------------------------

fn compact_setup(d: &Declaration, n: u64, size: usize) -> foldline_core::plan::PlanRequest {
    let f = activate(d, turns(1, 1, size));
    let mut r = request(d, turns(1, n, size));
    r.frontier = Some(f);
    r
}

#[test]
fn compact_freezes_oldest_groups_and_keeps_tail_within_retain() {
    let d = chars_decl(20_000, 10_000);
    let p = compact_packet(plan(&compact_setup(&d, 30, 1_000)));
    // Tail: the newest 10 turns (10,000 ≤ retain); frozen: 1..=20.
    assert_eq!(p.input.turn_count, 20);
    assert_eq!(p.covered_through_seq, 20);
    assert_eq!(p.covered_through_turn_id, "t20");
    assert_eq!(p.stats.retained_tail.chars, 10_000);
    assert_eq!(p.stats.retained_tail_turns, 10);
    assert!(p.stats.after.chars < p.stats.before.chars);
    assert_eq!(p.input.source_count, 20);
    assert_eq!(
        p.messages[0].role,
        foldline_core::packet::CompactorRole::System
    );
    assert!(p
        .messages
        .last()
        .unwrap()
        .content
        .contains("[source 20 · assistant] t20:"));
    assert!(p.id_is_intact());
}

#[test]
fn packet_id_is_content_addressed_and_retry_stable() {
    let d = chars_decl(20_000, 10_000);
    let mut r = compact_setup(&d, 30, 1_000);
    let a = compact_packet(plan(&r));
    r.events.reverse();
    let b = compact_packet(plan(&r));
    assert_eq!(a.id, b.id);
    assert_eq!(a, b);
    r.events.push(correction("t5", 1, "changed"));
    let c = compact_packet(plan(&r));
    assert_ne!(
        a.id, c.id,
        "different frozen content must give a different id"
    );
}

#[test]
fn compactor_input_is_previous_boundary_plus_amendment_plus_new_turns() {
    let d = chars_decl(20_000, 10_000);
    let mut r = compact_setup(&d, 30, 1_000);
    let f = r.frontier.clone().unwrap();
    r.head = Some(ChainHead {
        boundary_id: "b1".into(),
        boundary_hash: "sha256:aa".into(),
        covered_through_seq: 5,
        covered_through_turn_id: "t5".into(),
        frontier_id: f.id.clone(),
        summary: "EARLIER SUMMARY".into(),
        length: 1,
    });
    r.amendment = Some(
        Amendment::build(
            vec![AmendmentEntry {
                turn_id: "t2".into(),
                source_seq: 2,
                kind: EntryKind::Corrected,
                role: Role::Assistant,
                old_hash: Some("sha256:old".into()),
                new_hash: "sha256:new".into(),
                parts: text("CORRECTED TEXT"),
            }],
            8_000,
        )
        .unwrap(),
    );
    // An amendment whose size was altered (the hash does not cover it) is refused.
    let mut lying = r.clone();
    if let Some(a) = lying.amendment.as_mut() {
        a.chars -= 1;
    }
    assert_eq!(code_of(&plan(&lying)), Some("divergent_hash"));
    let p = compact_packet(plan(&r));
    assert_eq!(p.previous.as_ref().unwrap().boundary_id, "b1");
    assert!(p.messages[1].content.contains("EARLIER SUMMARY"));
    assert!(p.messages[2].content.contains("CORRECTED TEXT"));
    assert!(p.messages[2].content.contains("untrusted-history-summary"));
    assert_eq!(
        p.input.turns.first().unwrap().turn_id,
        "t6",
        "covered turns are not frozen again"
    );
    assert!(p.amendment.is_some());
}

#[test]
fn head_of_another_frontier_is_rejected() {
    let d = chars_decl(20_000, 10_000);
    let mut r = compact_setup(&d, 30, 1_000);
    r.head = Some(ChainHead {
        boundary_id: "b1".into(),
        boundary_hash: "sha256:aa".into(),
        covered_through_seq: 5,
        covered_through_turn_id: "t5".into(),
        frontier_id: "sha256:other".into(),
        summary: "s".into(),
        length: 1,
    });
    assert_eq!(code_of(&plan(&r)), Some("frontier_mismatch"));
}

#[test]
fn tool_call_and_result_are_never_separated() {
    let d = chars_decl(4_000, 2_000);
    // seq 9: assistant calls a tool; seq 10: the result (1,500 chars); seq 11: answer.
    let events = tool_pair_at_the_tail_edge();
    let f = activate(&d, turns(1, 1, 400));
    let mut r = request(&d, events);
    r.frontier = Some(f);
    let p = compact_packet(plan(&r));
    let frozen: Vec<_> = p.input.turns.iter().map(|t| t.turn_id.as_str()).collect();
    // The result alone would fit the tail with the answer; the pair must move
    // together, so both are frozen or both retained, and the tail never starts
    // with the result.
    assert_eq!(
        frozen.contains(&"call"),
        frozen.contains(&"result"),
        "{frozen:?}"
    );
    assert_ne!(frozen.last(), Some(&"call"));
}

#[test]
fn pinned_turns_are_never_frozen() {
    let d = chars_decl(20_000, 10_000);
    let mut r = compact_setup(&d, 30, 1_000);
    r.events.push(msg(0, "sys", Role::System, "system prompt"));
    r.events
        .push(msg(3, "doc", Role::Developer, "instructions"));
    let mut pinned_user = message(4, 1, "pin", Role::User, text("keep me"));
    pinned_user.pinned = true;
    r.events.push(Event::Message(pinned_user));
    let p = compact_packet(plan(&r));
    assert!(p
        .input
        .turns
        .iter()
        .all(|t| !["sys", "doc", "pin"].contains(&t.turn_id.as_str())));
    assert_eq!(p.stats.pinned.chars, 13 + 12 + 7);
}

#[test]
fn instructions_append_to_or_replace_the_builtin_prompt() {
    let mut d = chars_decl(20_000, 10_000);
    d.instructions = Some(Instructions {
        mode: InstructionMode::Append,
        text: "Keep dates.".into(),
    });
    let p = compact_packet(plan(&compact_setup(&d, 30, 1_000)));
    assert!(p.messages[0].content.starts_with("You are a compactor."));
    assert!(p.messages[0].content.ends_with("Keep dates."));
    d.instructions = Some(Instructions {
        mode: InstructionMode::Replace,
        text: "Only dates.".into(),
    });
    let q = compact_packet(plan(&compact_setup(&d, 30, 1_000)));
    assert_eq!(q.messages[0].content, "Only dates.");
    assert_ne!(p.input.prompt_hash, q.input.prompt_hash);
}

#[test]
fn turns_outside_admission_are_not_eligible() {
    let mut d = chars_decl(20_000, 10_000);
    d.history_agents = vec!["agent".into()];
    let mut r = compact_setup(&d, 30, 1_000);
    let mut foreign = message(31, 0, "foreign", Role::Assistant, text(&"f".repeat(5_000)));
    foreign.author_agent = Some("other-agent".into());
    r.events.push(Event::Message(foreign));
    let mut secret = message(32, 0, "secret", Role::User, text("s"));
    secret.sensitive = true;
    r.events.push(Event::Message(secret));
    let p = compact_packet(plan(&r));
    assert_eq!(p.stats.before.chars, 30_000);
}

#[test]
fn message_on_another_route_is_refused() {
    let d = chars_decl(20_000, 10_000);
    let mut r = compact_setup(&d, 3, 10);
    let mut m = message(4, 0, "x", Role::User, text("x"));
    m.chat = "other".into();
    r.events.push(Event::Message(m));
    assert_eq!(code_of(&plan(&r)), Some("wrong_route"));
}

// ---- Refusals ----------------------------------------------------------

#[test]
fn a_latest_turn_over_the_tail_target_is_kept_whole_and_one_that_cannot_fit_refused() {
    let d = chars_decl(20_000, 10_000);
    // Over retain, within the trigger beside a (shorter) summary: kept whole
    // as the tail, everything before it folded.
    let mut r = compact_setup(&d, 10, 1_000);
    // It leaves room for a summary of 300 characters, not the declared 500.
    let long = 20_000 - foldline_core::envelope::summary_overhead_chars() - 300;
    r.events
        .push(msg(11, "long", Role::User, &"h".repeat(long as usize)));
    let p = compact_packet(plan(&r));
    assert_eq!(
        (p.stats.retained_tail_turns, p.stats.oversized_tail),
        (1, true)
    );
    assert_eq!(p.input.turn_count, 10);
    assert_eq!(p.bounds.max_chars, 300, "a tighter summary");
    assert!(
        p.messages[0].content.contains("at most 300 characters"),
        "the prompt asks for it"
    );
    assert!(p.stats.after.chars <= 20_000, "{}", p.stats.after.chars);
    // Not even the shortest summary fits beside it: refused, never split.
    let mut r = compact_setup(&d, 10, 1_000);
    r.events
        .push(msg(11, "huge", Role::User, &"h".repeat(19_900)));
    let o = plan(&r);
    assert_eq!(code_of(&o), Some("tail_turn_too_large"));
    if let PlanOutcome::Refuse { error, .. } = o {
        assert_eq!(error.ids, vec!["huge".to_owned()]);
    }
}

#[test]
fn a_backlog_over_the_prefix_bounds_folds_its_oldest_units_first() {
    // 20 turns before the 10-turn tail; at most 5 per compaction.
    let mut d = chars_decl(20_000, 10_000);
    d.prefix_bounds.max_turns = 5;
    let p = compact_packet(plan(&compact_setup(&d, 30, 1_000)));
    assert_eq!(p.input.turn_count, 5);
    assert_eq!(p.covered_through_seq, 5);
    let backlog = p.stats.backlog.expect("a backlog is left");
    assert_eq!(backlog.turns, 15);
    assert_eq!(backlog.size.chars, 15_000);
    assert_eq!(p.stats.retained_tail_turns, 10);
    assert_eq!(
        p.stats.after.chars,
        p.stats.summary.chars + 15_000 + 10_000,
        "after counts the backlog"
    );
    // 15,000 rendered characters: as many whole turns as render within it
    // (amendments of at most 1,000 characters, so a turn of 1,024 still fits
    // beside the largest one, as a declaration must allow).
    let mut d = chars_decl(20_000, 10_000);
    d.prefix_bounds.max_chars = 15_000;
    d.amendment_max_chars = 1_000;
    let p = compact_packet(plan(&compact_setup(&d, 30, 1_000)));
    assert!(p.input.rendered_chars <= 15_000);
    assert!(p.input.turn_count >= 9, "{}", p.input.turn_count);
    assert_eq!(
        p.input.turn_count + p.stats.backlog.unwrap().turns,
        20,
        "frozen + backlog = everything before the tail"
    );
    // One more turn would not have fitted: the fold is as large as it may be.
    let mut one_more = d.clone();
    one_more.prefix_bounds.max_chars = p.input.rendered_chars + 100;
    assert_eq!(
        compact_packet(plan(&compact_setup(&one_more, 30, 1_000)))
            .input
            .turn_count,
        p.input.turn_count
    );
    // What fits in one compaction is still folded whole, without a backlog.
    let p = compact_packet(plan(&compact_setup(&chars_decl(20_000, 10_000), 30, 1_000)));
    assert_eq!((p.input.turn_count, p.stats.backlog), (20, None));
}

#[test]
fn a_backlog_folds_in_steps_until_the_tail_each_turn_once() {
    let mut d = chars_decl(20_000, 10_000);
    d.prefix_bounds.max_turns = 10;
    let mut s = Sim::new(d);
    s.say(1, 1_000);
    assert!(matches!(s.step(), PlanOutcome::Skip { .. }));
    s.say(39, 1_000); // 30 before the 10-turn tail: 3x the bound
    for _ in 0..3 {
        assert!(matches!(s.step(), PlanOutcome::Compact { .. }));
    }
    assert!(matches!(s.step(), PlanOutcome::Skip { .. }));
    let bs = s.boundaries();
    let folded: Vec<u64> = bs
        .iter()
        .flat_map(|b| b.input.turns.iter().map(|t| t.source_seq))
        .collect();
    assert_eq!(
        folded,
        (1..=30).collect::<Vec<_>>(),
        "no turn twice, none skipped"
    );
    assert!(bs[0].stats.backlog.is_some() && bs[1].stats.backlog.is_some());
    assert_eq!(bs[2].stats.backlog, None);
    assert!(s.resolve().is_ok(), "the chain verifies");
}

#[test]
fn a_single_unit_over_the_prefix_bounds_is_refused_naming_it() {
    let mut d = chars_decl(20_000, 10_000);
    d.prefix_bounds.max_chars = 15_000;
    let mut events = turns(1, 1, 16_000);
    events.extend(turns(2, 29, 1_000));
    let mut r = request(&d, events);
    r.frontier = Some(activate(&d, turns(1, 1, 16_000)));
    let o = plan(&r);
    assert_eq!(code_of(&o), Some("prefix_over_bounds"));
    if let PlanOutcome::Refuse { error, .. } = o {
        assert_eq!(error.ids, vec!["t1".to_owned()]);
    }
}

#[test]
fn pinned_turns_that_eat_the_headroom_shrink_the_tail_and_leave_half_the_room() {
    // 9,500 pinned + 21 turns of 500 reach the 20,000 trigger. Keeping the
    // 10,000 retain would leave 9,500 + 691 (the summary's reserve) +
    // 10,000 over the limit, so the context would leave kept turns out
    // unsummarized; shrinking the tail only to what the limit leaves would
    // compact again on the next message. Pinned turns are free up to half
    // the room between retain + reserve and the trigger (4,654); past it,
    // each of their characters shrinks the tail by one: a target of 5,154,
    // a tail of 10 turns, and 4,809 of room before the next compaction.
    let d = chars_decl(20_000, 10_000);
    let mut r = compact_setup(&d, 21, 500);
    r.events
        .push(msg(100, "sys", Role::System, &"s".repeat(9_500)));
    let p = compact_packet(plan(&r));
    assert_eq!(p.stats.retained_tail_turns, 10);
    assert_eq!(p.stats.after.chars, 9_500 + 691 + 5_000);
    assert!(p.stats.after.chars + 4_654 <= 20_000);
    // A small system prompt (under the half) leaves the tail at retain.
    let mut r = compact_setup(&d, 41, 500);
    r.events
        .push(msg(100, "sys", Role::System, &"s".repeat(4_000)));
    assert_eq!(compact_packet(plan(&r)).stats.retained_tail.chars, 10_000);
}

#[test]
fn compaction_that_would_not_shrink_is_refused() {
    // The fold is exactly the summary's reserve: an oldest turn of 691 and
    // a newest of 19,309, over the tail target and kept whole as the tail
    // (all the limit leaves beside the reserve). Folding 691 characters for
    // a 691-character reserve would not shrink anything.
    let d = chars_decl(20_000, 10_000);
    let mut events = turns(1, 1, 691);
    events.extend(turns(2, 1, 19_309));
    let mut r = request(&d, events);
    r.frontier = Some(activate(&d, turns(1, 1, 691)));
    assert_eq!(code_of(&plan(&r)), Some("not_smaller"));
    // A summary limit that leaves no room is refused by validation itself.
    let mut big = chars_decl(20_000, 10_000);
    big.summary.max_chars = Some(19_000);
    assert_eq!(big.violations()[0].ids, vec!["summary.maxChars".to_owned()]);
}

#[test]
fn invalid_declaration_lists_every_violation() {
    let mut d = Declaration::new("same", "same");
    d.budget = Budget::Chars {
        trigger: 100,
        retain: 100,
    };
    d.max_consecutive_failures = 0;
    match plan(&request(&d, turns(1, 3, 10))) {
        PlanOutcome::Refuse { error, errors } => {
            assert_eq!(error.code.as_str(), "invalid_declaration");
            let fields: Vec<_> = errors.iter().map(|e| e.ids[0].as_str()).collect();
            assert_eq!(
                fields,
                ["compactorId", "budget.retain", "maxConsecutiveFailures"]
            );
            assert!(errors
                .iter()
                .all(|e| e.code.as_str() == "invalid_declaration"));
        }
        o => panic!("{o:?}"),
    }
    let mut t = Declaration::new("a", "b");
    t.budget = Budget::Tokens {
        window: 1000,
        reserved_output: 600,
        safety_margin: 400,
        retrieval_share: 1000,
        soft: 900,
        eager: 800,
        target: 800,
        mode: CompactionMode::Eager,
    };
    let fields: Vec<String> = t
        .violations()
        .into_iter()
        .map(|e| e.ids[0].clone())
        .collect();
    assert_eq!(
        fields,
        [
            "budget.reservedOutput",
            "budget.retrievalShare",
            "budget.soft",
            "budget.target",
        ]
    );
}

// ---- Manual ------------------------------------------------------------

#[test]
fn manual_requests_are_checked_for_owner_session_and_content() {
    let d = chars_decl(20_000, 10_000);
    let mut r = compact_setup(&d, 30, 1_000);
    r.trigger = Trigger::Manual {
        actor: "intruder".into(),
        session_busy: false,
    };
    assert_eq!(code_of(&plan(&r)), Some("not_owner"));
    r.trigger = Trigger::Manual {
        actor: "member-1".into(),
        session_busy: true,
    };
    assert_eq!(code_of(&plan(&r)), Some("session_busy"));
    r.trigger = Trigger::Manual {
        actor: "member-1".into(),
        session_busy: false,
    };
    assert!(matches!(plan(&r), PlanOutcome::Compact { .. }));
    // Below the trigger a manual request still compacts what lies beyond the tail...
    let mut small = compact_setup(&d, 15, 1_000);
    small.trigger = r.trigger.clone();
    let p = compact_packet(plan(&small));
    assert_eq!(p.trigger, foldline_core::event::TriggerKind::Manual);
    assert_eq!(p.input.turn_count, 5);
    // ...and refuses when everything fits the tail.
    let mut tiny = compact_setup(&d, 3, 100);
    tiny.trigger = r.trigger.clone();
    assert_eq!(code_of(&plan(&tiny)), Some("nothing_to_fold"));
}

// ---- Circuit breaker and disabled ---------------------------------------

/// A token budget whose eager trigger (7,200) lies well below its hard
/// limit (9,232), with `n` turns of 100 tokens and `failures` failed runs
/// recorded at source `at`.
fn breaker_setup(n: u64, failures: u64, at: u64) -> foldline_core::plan::PlanRequest {
    let mut d = token_decl(CompactionMode::Eager);
    if let Budget::Tokens { window, .. } = &mut d.budget {
        *window = 20_000;
    }
    let th = foldline_core::budget::Thresholds::of(&d);
    assert_eq!((th.trigger, th.limit), (7_200, 9_232));
    let mut r = request(&d, token_turns(n));
    r.frontier = Some(activate(&d, token_turns(1)));
    for i in 0..failures {
        r.events.push(failure_at(&format!("run-{i}"), None, at));
    }
    r
}

#[test]
fn circuit_breaker_pauses_automatic_plans_after_repeated_failures() {
    assert!(
        matches!(plan(&breaker_setup(75, 2, 75)), PlanOutcome::Compact { .. }),
        "two failures < three"
    );
    let r = breaker_setup(75, 3, 75);
    assert_eq!(
        plan(&r),
        PlanOutcome::Paused {
            reason: PauseReason::CircuitOpen,
            consecutive_failures: 3,
            retry_in: Some(10),
        }
    );
    // Failures against another head (an earlier chain state) do not count.
    let mut other = breaker_setup(75, 0, 75);
    for i in 0..3 {
        other
            .events
            .push(failure_at(&format!("old-{i}"), Some("b0"), 75));
    }
    assert!(matches!(plan(&other), PlanOutcome::Compact { .. }));
    // A manual request goes through the open breaker.
    let mut manual = r.clone();
    manual.trigger = Trigger::Manual {
        actor: "member-1".into(),
        session_busy: false,
    };
    assert!(matches!(plan(&manual), PlanOutcome::Compact { .. }));
}

#[test]
fn no_breaker_stops_safety_compaction_at_the_hard_limit() {
    // Ten failures, no new turn since: past the hard limit it still compacts.
    let at_limit = breaker_setup(93, 10, 93);
    assert!(
        matches!(plan(&at_limit), PlanOutcome::Compact { .. }),
        "{:?}",
        plan(&at_limit)
    );
    assert!(matches!(
        plan(&breaker_setup(92, 10, 92)),
        PlanOutcome::Paused { .. }
    ));
    // In character mode the trigger is the hard limit: no pause at all.
    let d = chars_decl(20_000, 10_000);
    let mut r = compact_setup(&d, 30, 1_000);
    for i in 0..5 {
        r.events.push(failure_at(&format!("run-{i}"), None, 30));
    }
    assert!(matches!(plan(&r), PlanOutcome::Compact { .. }));
}

#[test]
fn an_open_breaker_half_opens_after_new_turns_and_reopens_on_failure() {
    let mut r = breaker_setup(73, 3, 73);
    // Nine new turns: still open, one to go.
    r.events.extend(token_turns(82).split_off(73));
    assert!(matches!(
        plan(&r),
        PlanOutcome::Paused {
            retry_in: Some(1),
            ..
        }
    ));
    // The tenth: half-open, one automatic attempt.
    r.events.extend(token_turns(83).split_off(82));
    assert!(matches!(plan(&r), PlanOutcome::Compact { .. }));
    // That attempt fails: open again for another ten turns.
    r.events.push(failure_at("run-4", None, 83));
    assert!(matches!(
        plan(&r),
        PlanOutcome::Paused {
            reason: PauseReason::CircuitOpen,
            consecutive_failures: 4,
            retry_in: Some(10),
        }
    ));
}

#[test]
fn a_disabled_declaration_defers_to_the_hard_limit_but_never_disables_safety() {
    let mut d = token_decl(CompactionMode::Eager);
    d.enabled = false;
    let f = activate(&d, token_turns(1));
    let th = foldline_core::budget::Thresholds::of(&d);
    // Past the eager trigger, below the conversation budget: paused, no warm.
    let mut r = request(&d, token_turns(th.trigger / 100 + 1));
    r.frontier = Some(f.clone());
    assert!(th.trigger / 100 + 1 < th.limit / 100);
    assert!(matches!(
        plan(&r),
        PlanOutcome::Paused {
            reason: PauseReason::Disabled,
            ..
        }
    ));
    // At the hard limit, safety compaction runs anyway.
    let mut full = request(&d, token_turns(th.limit / 100 + 1));
    full.frontier = Some(f);
    assert!(matches!(plan(&full), PlanOutcome::Compact { .. }));
}

// ---- Token mode and warm candidates -------------------------------------

fn token_decl(mode: CompactionMode) -> Declaration {
    let mut d = Declaration::new("agent", "agent-compactor");
    d.budget = Budget::default_tokens();
    if let Budget::Tokens { mode: m, .. } = &mut d.budget {
        *m = mode;
    }
    d.summary.max_tokens = Some(300);
    d.summary.max_chars = Some(1_200);
    d
}

fn token_plan(d: &Declaration, n: u64) -> PlanOutcome {
    let f = activate(d, token_turns(1));
    let mut r = request(d, token_turns(n));
    r.frontier = Some(f);
    plan(&r)
}

#[test]
fn eager_mode_skips_below_soft_warms_between_and_compacts_at_eager() {
    let d = token_decl(CompactionMode::Eager);
    // C = 3328: soft 1996, eager 2595, target 1664.
    assert!(matches!(token_plan(&d, 19), PlanOutcome::Skip { .. })); // 1900
    assert!(matches!(token_plan(&d, 20), PlanOutcome::Warm { .. })); // 2000
    assert!(matches!(token_plan(&d, 25), PlanOutcome::Warm { .. })); // 2500
    let p = compact_packet(token_plan(&d, 26)); // 2600
                                                // Tail target = 1664 - 0 pinned - (300 + header estimate) reserve.
    assert!(p.stats.retained_tail.tokens <= 1664 - p.stats.summary.tokens);
    assert!(p.stats.after.tokens <= 1664);
    assert_eq!(p.stats.metric, foldline_core::budget::Metric::Tokens);
}

#[test]
fn with_a_candidate_held_no_other_is_built_and_compaction_still_comes_at_eager() {
    let d = token_decl(CompactionMode::Eager);
    let held = |n: u64| {
        let f = activate(&d, token_turns(1));
        let mut r = request(&d, token_turns(n));
        r.frontier = Some(f);
        r.warm_held = true;
        plan(&r)
    };
    assert!(matches!(held(19), PlanOutcome::Skip { .. })); // below soft
    assert_eq!(held(20), PlanOutcome::Warm { packet: None }); // the held one stands
    assert_eq!(held(25), PlanOutcome::Warm { packet: None });
    assert!(matches!(
        token_plan(&d, 25),
        PlanOutcome::Warm { packet: Some(_) }
    ));
    assert_eq!(compact_packet(held(26)), compact_packet(token_plan(&d, 26))); // eager: the same packet
}

#[test]
fn lazy_mode_compacts_only_when_the_budget_is_full() {
    let d = token_decl(CompactionMode::Lazy);
    assert!(matches!(token_plan(&d, 25), PlanOutcome::Skip { .. })); // 2500 < eager 2595
    assert!(matches!(token_plan(&d, 30), PlanOutcome::Warm { .. })); // 3000
    assert!(matches!(token_plan(&d, 34), PlanOutcome::Compact { .. })); // 3400 ≥ 3328
}

#[test]
fn token_mode_reserves_headroom_for_the_summary_output() {
    let mut d = token_decl(CompactionMode::Eager);
    d.budget = Budget::Tokens {
        window: 20_000,
        reserved_output: 1_024,
        safety_margin: 512,
        retrieval_share: 0,
        soft: 900,
        eager: 1000,
        target: 200,
        mode: CompactionMode::Eager,
    };
    // C = 18,464; the frozen prefix is ~17,400 tokens, and with the summary's
    // 1,500 tokens of output headroom and the margin it cannot fit the window.
    // It folds the oldest part that fits, and leaves the rest as a backlog.
    d.summary.max_tokens = Some(1_500);
    let p = compact_packet(token_plan(&d, 195));
    assert!(p.input.tokens + 1_500 + 512 <= 20_000, "{}", p.input.tokens);
    assert!(p.stats.backlog.is_some());
    d.summary.max_tokens = Some(300);
    d.budget = Budget::Tokens {
        window: 40_000,
        reserved_output: 1_024,
        safety_margin: 512,
        retrieval_share: 500,
        soft: 900,
        eager: 1000,
        target: 200,
        mode: CompactionMode::Eager,
    };
    assert!(
        matches!(token_plan(&d, 200), PlanOutcome::Compact { .. }),
        "fits a larger window"
    );
}

#[test]
fn warm_candidate_stays_valid_while_its_prefix_is_history_and_not_after() {
    let d = token_decl(CompactionMode::Eager);
    let warm = match token_plan(&d, 22) {
        PlanOutcome::Warm {
            packet: Some(packet),
        } => *packet,
        o => panic!("{o:?}"),
    };
    let f = activate(&d, token_turns(1));
    let mut r = request(&d, token_turns(27));
    r.frontier = Some(f);
    r.warm = Some(warm.clone());
    match plan(&r) {
        PlanOutcome::Compact { warm: Some(v), .. } => assert!(v.valid, "{v:?}"),
        o => panic!("{o:?}"),
    }
    r.events.push(correction("t2", 1, "edited"));
    match plan(&r) {
        PlanOutcome::Compact { warm: Some(v), .. } => {
            assert!(!v.valid);
            assert_eq!(v.reason, Some(foldline_core::plan::WarmRefusal::Diverged));
        }
        o => panic!("{o:?}"),
    }
}

#[test]
fn a_content_hash_carried_with_the_event_is_used_not_recomputed() {
    let d = chars_decl(20_000, 10_000);
    let mut r = compact_setup(&d, 30, 1_000);
    if let Event::Message(m) = &mut r.events[0] {
        m.content_hash = Some("sha256:hashed-when-it-entered-the-journal".into());
    }
    let p = compact_packet(plan(&r));
    assert_eq!(
        p.input.turns[0].content_hash,
        "sha256:hashed-when-it-entered-the-journal"
    );
    assert_ne!(p.input.turns[1].content_hash, p.input.turns[0].content_hash);
    // A correction replaces the content, so its hash is computed afresh.
    r.events.push(correction("t1", 1, "changed"));
    let q = compact_packet(plan(&r));
    assert_eq!(
        q.input.turns[0].content_hash,
        foldline_core::turn::content_hash(&text("changed"))
    );
}

#[test]
fn absurd_sizes_in_the_input_never_panic() {
    let mut d = chars_decl(u64::MAX, u64::MAX - 1);
    d.summary.max_chars = Some(u64::MAX);
    d.summary.max_tokens = Some(u64::MAX);
    d.prefix_bounds.max_chars = u64::MAX;
    d.amendment_max_chars = u64::MAX;
    let mut events = turns(1, 5, 100);
    if let Event::Message(m) = &mut events[0] {
        m.tokens = Some(u64::MAX);
        m.source_seq = u64::MAX;
    }
    let r = request(&d, events.clone());
    let _ = plan(&r);
    let json = serde_json::to_string(&r).unwrap();
    for entry in ["plan", "select", "timeline"] {
        let out = foldline_core::api::call_str(entry, &json);
        assert!(
            out.starts_with("{\"ok\"") || out.starts_with("{\"error\""),
            "{out}"
        );
    }
    let mut t = d.clone();
    t.budget = Budget::Tokens {
        window: u64::MAX,
        reserved_output: u64::MAX - 1,
        safety_margin: 0,
        retrieval_share: 999,
        soft: 1,
        eager: 1000,
        target: 999,
        mode: CompactionMode::Lazy,
    };
    let mut r = request(&t, events);
    let _ = plan(&r);
    r.trigger = Trigger::Manual {
        actor: "member-1".into(),
        session_busy: false,
    };
    let _ = plan(&r);
}

#[test]
fn a_message_admission_accepts_can_always_be_folded() {
    use foldline_core::budget::admissible_turn;
    use foldline_core::validate::{check_events, EventsCheck};
    for budget in [Budget::default_tokens(), Budget::default()] {
        let mut d = Declaration::new("agent", "agent-compactor");
        d.budget = budget;
        let (chars, tokens) = admissible_turn(&d);
        let size = chars.min(tokens.saturating_sub(4).saturating_mul(4)) as usize;
        let big = turns(2, 1, size);
        let check = |events: Vec<Event>| {
            check_events(&EventsCheck {
                route: route(),
                events,
                declaration: Some(d.clone()),
                pinned: Vec::new(),
            })
        };
        assert!(check(big.clone()).is_ok(), "{budget:?}: {size} admitted");
        assert_eq!(
            check(turns(2, 1, size + 8)).unwrap_err().code.as_str(),
            "turn_too_large"
        );
        let mut s = Sim::new(d.clone());
        s.say(1, 100);
        s.step();
        s.events.extend(big);
        s.next_seq = 3;
        let mut covered = 0;
        for _ in 0..200 {
            s.say(1, 400);
            match s.step() {
                PlanOutcome::Refuse { error, .. } => {
                    assert_ne!(
                        error.code.as_str(),
                        "prefix_over_bounds",
                        "{budget:?}: {error:?}"
                    );
                }
                PlanOutcome::Compact { packet, .. } => covered = packet.covered_through_seq,
                _ => {}
            }
            if covered >= 2 {
                break;
            }
        }
        assert!(
            covered >= 2,
            "{budget:?}: the largest admitted message was folded"
        );
    }
}

/// Identity and memory documents reach the compactor within
/// `documents.budgetChars`: under it they are in its system prompt (to
/// interpret names, not to summarize); over it the plan refuses
/// `prefix_over_bounds`, naming the documents, rather than cut them.
#[test]
fn documents_reach_the_compactor_within_their_budget() {
    let doc = |chars: usize| msg(0, "doc", Role::Document, &"D".repeat(chars));
    for (doc_chars, fits) in [(400, true), (600, false)] {
        let mut d = chars_decl(10_000, 4_000);
        d.documents.budget_chars = 500;
        let mut events = vec![doc(doc_chars)];
        events.extend(turns(1, 30, 500));
        let f = activate(&d, events.clone());
        let mut r = request(&d, events);
        r.frontier = Some(f);
        match (plan(&r), fits) {
            (PlanOutcome::Compact { packet, .. }, true) => {
                assert!(packet.messages[0].content.contains(&"D".repeat(400)));
            }
            (PlanOutcome::Refuse { error, .. }, false) => {
                assert_eq!(error.code.as_str(), "prefix_over_bounds");
                assert_eq!(error.ids, vec!["doc".to_owned()]);
            }
            (o, _) => panic!("{doc_chars} characters of documents: {o:?}"),
        }
    }
}

#[test]
fn a_manual_checkpoint_is_keyed_to_the_journal_head() {
    let d = chars_decl(20_000, 10_000);
    let mut r = compact_setup(&d, 30, 1_000);
    let PlanOutcome::Compact { packet: auto, .. } = plan(&r) else {
        panic!("compaction expected")
    };
    assert_eq!(auto.head_seq, None, "an automatic packet names no head");
    r.trigger = Trigger::Manual {
        actor: "member-1".into(),
        session_busy: false,
    };
    let PlanOutcome::Compact { packet, .. } = plan(&r) else {
        panic!("compaction expected")
    };
    let newest = foldline_core::plan::newest_seq(&r.events);
    assert_eq!(packet.head_seq, Some(newest));
    assert!(
        packet.covered_through_seq < newest,
        "the exact tail stays after the covered range"
    );
    let b = settle_ok(&packet, "run-1", "The member asked about trains.");
    assert_eq!(b.head_seq, Some(newest), "the boundary binds the head");
    // The head is part of what the boundary's hash covers.
    let mut moved = b.clone();
    moved.head_seq = Some(newest + 1);
    assert_ne!(moved.compute_hash(), b.hash);
}
