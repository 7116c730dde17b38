//! Property tests over plan, the chain, select and the JSON contract.
mod common;

use common::*;
use foldline_core::api;
use foldline_core::event::Event;
use foldline_core::format::Format;
use foldline_core::plan::{plan, PlanOutcome};
use foldline_core::reconstruct::reconstruct;
use foldline_core::select::{select, SelectRequest};
use foldline_core::turn::{Part, Role};
use proptest::prelude::*;

/// A conversation shape: (kind, size). Kinds: 0 user, 1 assistant, 2 tool
/// call + result pair, 3 pinned system turn.
fn shape() -> impl Strategy<Value = Vec<(u8, usize)>> {
    prop::collection::vec((0u8..4, 1usize..3_000), 1..60)
}

fn build(shape: &[(u8, usize)]) -> Vec<Event> {
    let mut events = Vec::new();
    let mut seq = 1u64;
    for (i, (kind, size)) in shape.iter().enumerate() {
        let body = "x".repeat(*size);
        match kind {
            0 => events.push(msg(seq, &format!("u{i}"), Role::User, &body)),
            1 => events.push(msg(seq, &format!("a{i}"), Role::Assistant, &body)),
            2 => {
                let call = format!("c{i}");
                events.push(Event::Message(message(
                    seq,
                    0,
                    &format!("call{i}"),
                    Role::Assistant,
                    vec![Part::ToolCall {
                        call_id: call.clone(),
                        name: "run_code".into(),
                        arguments: "{}".into(),
                        custom: false,
                        provider_options: serde_json::Value::Null,
                    }],
                )));
                seq += 1;
                events.push(Event::Message(message(
                    seq,
                    0,
                    &format!("res{i}"),
                    Role::Tool,
                    vec![Part::ToolResult {
                        call_id: call,
                        name: "run_code".into(),
                        content: body,
                        is_error: false,
                    }],
                )));
            }
            _ => events.push(msg(
                seq,
                &format!("p{i}"),
                Role::System,
                &body[..body.len().min(50)],
            )),
        }
        seq += 1;
    }
    events
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    #[test]
    fn frozen_plus_tail_plus_pinned_is_every_eligible_turn(shape in shape(), retain in 1_024u64..20_000, extra in 700u64..30_000, prompt in 0usize..30_000) {
        let d = chars_decl(retain + extra, retain);
        let mut events = build(&shape);
        // A system prompt of any size, up to one that eats the headroom.
        if prompt > 0 {
            events.push(msg(100_000, "pbig", Role::System, &"s".repeat(prompt)));
        }
        let first = events.iter().find_map(|e| match e { Event::Message(m) if m.role != Role::System => Some(m.source_seq), _ => None });
        prop_assume!(first.is_some());
        let f = activate(&d, events.iter().filter(|e| matches!(e, Event::Message(m) if m.source_seq == first.unwrap())).cloned().collect());
        let mut r = request(&d, events.clone());
        r.frontier = Some(f);
        let turns = reconstruct(&events).unwrap().turns;
        let eligible: Vec<&str> = turns.iter().filter(|t| !t.pinned).map(|t| t.turn_id.as_str()).collect();
        let outcome = plan(&r);
        match &outcome {
            PlanOutcome::Compact { packet, .. } => {
                let frozen: Vec<&str> = packet.input.turns.iter().map(|t| t.turn_id.as_str()).collect();
                prop_assert!(eligible.starts_with(&frozen));
                let tail = &eligible[frozen.len()..];
                prop_assert_eq!(packet.stats.retained_tail_turns as usize, tail.len());
                // Within retain, or one long newest unit kept whole within
                // the trigger beside its (tighter) summary.
                prop_assert!(packet.stats.retained_tail.chars <= retain || packet.stats.oversized_tail);
                // What the compaction keeps fits the hard limit, pinned turns
                // however large (the tail shrinks to what they leave), unless
                // a backlog is left for the next compaction to fold.
                prop_assert!(packet.stats.after.chars <= retain + extra || packet.stats.backlog.is_some(), "{:?}", packet.stats);
                // And, a long newest turn aside, it leaves at least half the
                // room between retain + the summary's reserve and the trigger
                // before the next compaction.
                let half = (extra - packet.stats.summary.chars.min(extra)) / 2;
                prop_assert!(packet.stats.oversized_tail || packet.stats.backlog.is_some() || packet.stats.after.chars + half <= retain + extra, "{:?}", packet.stats);
                prop_assert!(!tail.is_empty());
                // The tail never starts with a tool result and no pair is split.
                let tail_first = turns.iter().find(|t| t.turn_id == tail[0]).unwrap();
                prop_assert!(!tail_first.starts_with_tool_result());
                for t in turns.iter().filter(|t| !t.pinned) {
                    if let Some(Part::ToolResult { call_id, .. }) = t.parts.first() {
                        let call = turns.iter().find(|c| c.call_ids().any(|id| id == call_id)).unwrap();
                        prop_assert_eq!(frozen.contains(&t.turn_id.as_str()), frozen.contains(&call.turn_id.as_str()));
                    }
                }
                prop_assert!(frozen.iter().all(|id| !id.starts_with('p')));
                // Retry-stable, order-independent id.
                let mut again = r.clone();
                again.events.reverse();
                match plan(&again) {
                    PlanOutcome::Compact { packet: p2, .. } => prop_assert_eq!(&p2.id, &packet.id),
                    o => prop_assert!(false, "reordered events changed the outcome: {:?}", o),
                }
            }
            PlanOutcome::Skip { record } => prop_assert!(record.total < d_trigger(&d)),
            PlanOutcome::Refuse { error, .. } => prop_assert!(
                ["tail_turn_too_large", "nothing_to_fold", "not_smaller", "prefix_over_bounds"].contains(&error.code.as_str()),
                "unexpected refusal {:?}", error
            ),
            o => prop_assert!(false, "unexpected outcome {:?}", o),
        }
    }

    #[test]
    fn a_chain_built_by_plan_and_settle_always_resolves_and_advances(sizes in prop::collection::vec(100usize..2_500, 5..40)) {
        let mut s = Sim::new(chars_decl(20_000, 10_000));
        let mut last = None;
        for size in sizes {
            s.say(3, size);
            let o = s.step();
            let r = s.resolve();
            prop_assert!(r.is_ok(), "{:?}", r);
            let head = r.unwrap().head;
            if let PlanOutcome::Compact { .. } = o {
                let h = head.clone().unwrap();
                if let Some(prev) = last {
                    prop_assert!(h.covered_through_seq > prev);
                }
                last = Some(h.covered_through_seq);
            }
        }
    }

    #[test]
    fn selection_never_exceeds_its_budget_and_loses_nothing(shape in shape(), limit in 200u64..40_000) {
        let d = chars_decl(100_000, 50_000);
        let events = build(&shape);
        let turns = reconstruct(&events).unwrap().turns;
        let req = SelectRequest {
            declaration: d, route: route(), frontier: None, head: None, amendment: None,
            events, prompt: None, prompt_sender: None, format: Format::Openai, limit: Some(limit), render: true, member: None, carried: None,
        };
        match select(&req) {
            Ok(sel) => {
                let m = sel.manifest;
                prop_assert!(m.sizes.total <= limit);
                let mut all: Vec<String> = m.omitted.iter().map(|o| o.turn_id.clone()).collect();
                all.extend(m.included.iter().cloned());
                let expected: Vec<String> = turns.iter().filter(|t| !t.pinned).map(|t| t.turn_id.clone()).collect();
                prop_assert_eq!(all, expected);
                for t in &turns {
                    if let Some(Part::ToolResult { call_id, .. }) = t.parts.first() {
                        let call = turns.iter().find(|c| c.call_ids().any(|id| id == call_id)).unwrap();
                        prop_assert_eq!(m.included.contains(&t.turn_id), m.included.contains(&call.turn_id));
                    }
                }
                if let Some(first) = m.included.first() {
                    let t = turns.iter().find(|t| &t.turn_id == first).unwrap();
                    prop_assert!(!t.starts_with_tool_result());
                }
            }
            // Fail closed rather than drop the newest turn: only when it does not fit.
            Err(e) if e.code.as_str() == "tail_turn_too_large" => {
                // It names the newest unit, and that unit really does not fit
                // the room the pinned turns leave.
                let newest = turns.iter().rfind(|t| !t.pinned).unwrap();
                let pinned: u64 = turns.iter().filter(|t| t.pinned).map(|t| t.chars).sum();
                let named: u64 = turns.iter().filter(|t| e.ids.contains(&t.turn_id)).map(|t| t.chars).sum();
                prop_assert!(e.ids.contains(&newest.turn_id), "{:?}", e);
                prop_assert!(named + pinned > limit, "{:?}", e);
            }
            Err(e) => prop_assert_eq!(e.code.as_str(), "over_budget"),
        }
    }

}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    /// Defaults are a contract: whatever declaration validation accepts
    /// admits ordinary turns (of up to 1,024 characters) and can compact a
    /// long conversation of them, with summaries as long
    /// as the bounds allow, and the context then fits with the newest turn.
    #[test]
    fn every_accepted_declaration_compacts_ordinary_turns(d in declaration(), sizes in prop::collection::vec(100usize..400, 1..8)) {
        prop_assume!(d.violations().is_empty());
        let th = foldline_core::budget::Thresholds::of(&d);
        let bounds = d.summary_bounds();
        let mut s = Sim::new(d.clone());
        let mut compactions = 0;
        // Ordinary turns until the second compaction (a summary folded into a
        // summary), or far past the trigger.
        let mut i = 0usize;
        let mut total_chars = 0u64;
        let trigger_chars = match d.budget {
            foldline_core::declaration::Budget::Chars { .. } => th.trigger,
            foldline_core::declaration::Budget::Tokens { .. } => th.trigger.saturating_mul(4),
        };
        // Turns grow with the budget (a few hundred per trigger at most), and
        // stay under the least tail either metric guarantees (1,024 chars).
        let scale = (trigger_chars / 40_000).max(1) as usize;
        while compactions < 2 && total_chars < 8 * trigger_chars.max(1) {
            let size = (sizes[i % sizes.len()] * scale).min(1_000);
            s.say(1, size);
            // Hashed once, as a journal does when the turn arrives.
            if let Some(Event::Message(m)) = s.events.last_mut() {
                m.content_hash = Some(foldline_core::turn::content_hash(&m.parts));
            }
            // Admitted, as a driver's append or a server admits it.
            let admitted = foldline_core::validate::check_events(&foldline_core::validate::EventsCheck {
                route: route(),
                events: s.events[s.events.len() - 1..].to_vec(),
                declaration: Some(d.clone()),
                pinned: Vec::new(),
            });
            prop_assert!(admitted.is_ok(), "turn {}: {:?} under {:?}", i, admitted, d);
            total_chars += size as u64;
            i += 1;
            match full_summary_step(&mut s, bounds.max_chars as usize) {
                PlanOutcome::Compact { .. } => compactions += 1,
                PlanOutcome::Skip { .. } | PlanOutcome::Warm { .. } => {}
                o => prop_assert!(false, "turn {}: {:?} under {:?}", i, o, d.budget),
            }
        }
        prop_assert!(compactions == 2, "no compaction in {} turns under {:?}", i, d.budget);
        let r = s.resolve().unwrap();
        let sel = select(&SelectRequest {
            declaration: d.clone(), route: route(), frontier: r.frontier, head: r.head, amendment: r.amendment,
            events: s.events.clone(), prompt: None, prompt_sender: None, format: Format::Foldline, limit: None, render: true, member: None, carried: None,
        }).unwrap();
        prop_assert!(sel.manifest.sizes.total <= th.limit);
        prop_assert_eq!(sel.manifest.included.last().cloned(), Some(format!("t{}", s.next_seq - 1)));
        prop_assert!(sel.manifest.omitted.is_empty(), "omitted {:?}", sel.manifest.omitted);
    }

}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    /// A declaration refused because one compaction could not take an
    /// ordinary turn names the fix: the largest amendment bound under which
    /// it is accepted (one character more is refused again), or says that
    /// none is.
    #[test]
    fn a_refusal_for_no_turn_names_the_largest_amendment_that_fits(d in crowded_declaration()) {
        let turn_rule = |d: &foldline_core::declaration::Declaration| {
            d.violations().into_iter().find(|e| e.message.starts_with("one compaction can take a turn"))
        };
        let Some(refusal) = turn_rule(&d) else { return Ok(()) };
        prop_assume!(d.violations().len() == 1);
        let with = |amendment: u64| foldline_core::declaration::Declaration { amendment_max_chars: amendment, ..d.clone() };
        match refusal.message.split_once("declare amendmentMaxChars of at most ") {
            Some((_, rest)) => {
                let fits: u64 = rest.split_once(',').unwrap().0.parse().unwrap();
                prop_assert!(fits < d.amendment_max_chars);
                prop_assert!(with(fits).violations().is_empty(), "{} under {:?}", fits, with(fits).violations());
                prop_assert!(turn_rule(&with(fits + 1)).is_some(), "{} is not the largest", fits);
            }
            None => {
                prop_assert!(refusal.message.ends_with(&format!("even without amendments; raise {}", refusal.ids[0])), "{}", refusal.message);
                prop_assert!(turn_rule(&with(0)).is_some());
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..512), entry in 0usize..8) {
        let name = ["plan", "validate", "select", "timeline", "trimPrompt", "compressToolResult", "settings", "bogus"][entry];
        let out = api::call(name, &bytes);
        prop_assert!(serde_json::from_slice::<serde_json::Value>(&out).is_ok());
    }

    #[test]
    fn arbitrary_json_never_panics(v in json_value(), entry in 0usize..7) {
        let name = api::ENTRY_POINTS[entry];
        let out = api::call(name, v.to_string().as_bytes());
        prop_assert!(serde_json::from_slice::<serde_json::Value>(&out).is_ok());
    }
}

/// One driver pass whose model writes a summary of `max` characters, the
/// longest the bounds allow.
fn full_summary_step(s: &mut Sim, max: usize) -> PlanOutcome {
    s.step_with(|runs, _| {
        format!("summary {runs} ")
            .chars()
            .chain(std::iter::repeat('s'))
            .take(max)
            .collect()
    })
}

/// Declarations across both metrics, with and without declared summary limits.
fn declaration() -> impl Strategy<Value = foldline_core::declaration::Declaration> {
    use foldline_core::declaration::{Budget, CompactionMode, Declaration};
    let chars = (1_000u64..100_000, 1_000u64..60_000)
        .prop_map(|(trigger, retain)| Budget::Chars { trigger, retain });
    let tokens = (
        2_000u64..160_000,
        0u64..4_000,
        0u64..1_000,
        0u64..900,
        100u64..1000,
        100u64..1000,
        50u64..1000,
        any::<bool>(),
    )
        .prop_map(
            |(
                window,
                reserved_output,
                safety_margin,
                retrieval_share,
                soft,
                eager,
                target,
                lazy,
            )| Budget::Tokens {
                window,
                reserved_output,
                safety_margin,
                retrieval_share,
                soft,
                eager,
                target,
                mode: if lazy {
                    CompactionMode::Lazy
                } else {
                    CompactionMode::Eager
                },
            },
        );
    (
        prop_oneof![chars, tokens],
        prop::option::of(100u64..10_000),
        prop::option::of(50u64..3_000),
        prop::option::of(100u64..40_000),
        prop::option::of(5_000u64..400_000),
    )
        .prop_map(|(budget, max_chars, max_tokens, amendment, prefix)| {
            let mut d = Declaration::new("agent", "agent-compactor");
            d.budget = budget;
            d.summary.max_chars = max_chars;
            d.summary.max_tokens = max_tokens;
            if let Some(a) = amendment {
                d.amendment_max_chars = a;
            }
            if let Some(p) = prefix {
                d.prefix_bounds.max_chars = p;
            }
            d
        })
}

/// [`declaration`]s crowded toward the turn rule: amendment bounds up to
/// 400,000 characters, prefix bounds from 1,000, token windows of at most
/// ~9,000.
fn crowded_declaration() -> impl Strategy<Value = foldline_core::declaration::Declaration> {
    use foldline_core::declaration::Budget;
    let crowd = (
        1_000u64..400_000,
        prop::option::of(1_000u64..60_000),
        2_000u64..9_000,
    );
    (declaration(), crowd).prop_map(|(mut d, (amendment, prefix, small))| {
        d.amendment_max_chars = amendment;
        if let Some(p) = prefix {
            d.prefix_bounds.max_chars = p;
        }
        if let Budget::Tokens { window, .. } = &mut d.budget {
            *window = small;
        }
        d
    })
}

fn d_trigger(d: &foldline_core::declaration::Declaration) -> u64 {
    foldline_core::budget::Thresholds::of(d).trigger
}

fn json_value() -> impl Strategy<Value = serde_json::Value> {
    use serde_json::Value;
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<u64>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        "[a-zA-Z]{0,8}".prop_map(Value::String),
        prop_oneof![
            Just("message"),
            Just("boundary"),
            Just("settle"),
            Just("resolve"),
            Just("chars"),
            Just("tokens")
        ]
        .prop_map(|s| Value::String(s.into())),
    ];
    leaf.prop_recursive(4, 64, 8, |inner| {
        let keys = prop_oneof![
            Just("kind"),
            Just("type"),
            Just("declaration"),
            Just("route"),
            Just("events"),
            Just("targetId"),
            Just("compactorId"),
            Just("budget"),
            Just("trigger"),
            Just("retain"),
            Just("sourceSeq"),
            Just("turnId"),
            Just("role"),
            Just("parts"),
            Just("text"),
            Just("conversation"),
            Just("packet"),
            Just("output"),
        ];
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(serde_json::Value::Array),
            prop::collection::btree_map(keys.prop_map(String::from), inner, 0..6)
                .prop_map(|m| serde_json::Value::Object(m.into_iter().collect())),
        ]
    })
}
