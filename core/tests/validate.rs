//! The rules of settle, resolve, amend, declarations and streaming (docs/rules.md lists each with its tests).
mod common;

use common::*;
use foldline_core::boundary::Boundary;
use foldline_core::declaration::{Declaration, DeclarationRole};
use foldline_core::event::Event;
use foldline_core::packet::Packet;
use foldline_core::plan::PlanOutcome;
use foldline_core::settle::{settle, SettleRequest};
use foldline_core::stream::{FailureInput, FailureKind, StreamDecision, StreamEnd, StreamReport};
use foldline_core::validate::{validate, DeclarationPair, ValidateRequest, ValidateResponse};
use serde_json::Value;

fn packet_of(s: &Sim) -> Packet {
    let mut sim = Sim::new(s.decl.clone());
    sim.say(30, 1_000);
    loop {
        let r = sim.resolve().unwrap();
        let mut req = request(&sim.decl, sim.events.clone());
        req.frontier = r.frontier;
        match foldline_core::plan(&req) {
            PlanOutcome::Activate { frontier } => sim.events.push(Event::Frontier(*frontier)),
            PlanOutcome::Compact { packet, .. } => return *packet,
            o => panic!("{o:?}"),
        }
    }
}

fn err_code(r: foldline_core::Result<impl std::fmt::Debug>) -> &'static str {
    r.expect_err("expected an error").code.as_str()
}

// ---- settle ------------------------------------------------------------

#[test]
fn settle_binds_every_field_from_packet_and_run() {
    let s = Sim::new(chars_decl(20_000, 10_000));
    let p = packet_of(&s);
    let b = settle_ok(&p, "run-1", "Alice asked about trains; Bob booked Friday.");
    assert!(b.sensitive);
    assert_eq!(b.output_contract, "foldline.compaction@1");
    assert_eq!(b.packet_id, p.id);
    assert_eq!(b.route, route());
    assert_eq!(b.target_id, "agent");
    assert_eq!(b.compactor_id, "agent-compactor");
    assert_eq!(b.frontier, p.frontier);
    assert_eq!(b.covered_through_seq, p.covered_through_seq);
    assert_eq!(b.input, p.input);
    assert_eq!(b.declaration_fingerprint, s.decl.fingerprint());
    assert_eq!(b.run.run_id, "run-1");
    assert_eq!(b.run.model_id, "test-model");
    assert_eq!(b.stats.before, p.stats.before);
    assert!(b.stats.after.chars < b.stats.before.chars);
    assert_eq!(b.preview, "Alice asked about trains; Bob booked Friday.");
    assert_eq!(b.hash, b.compute_hash());
    // Same packet and run: same boundary, byte for byte.
    assert_eq!(
        b,
        settle_ok(&p, "run-1", "Alice asked about trains; Bob booked Friday.")
    );
}

#[test]
fn settle_rejects_never_trims() {
    let s = Sim::new(chars_decl(20_000, 10_000));
    let p = packet_of(&s);
    let mut req = SettleRequest {
        packet: p.clone(),
        output: output_for(&p, "r", "ok"),
        expected_run_id: None,
    };
    let try_with = |f: &dyn Fn(&mut SettleRequest)| {
        let mut r = req.clone();
        f(&mut r);
        settle(&r).map(|_| ()).map_err(|e| e.code.as_str())
    };
    assert_eq!(
        try_with(&|r| r.output.summary = " \n\t ".into()),
        Err("empty_summary")
    );
    assert_eq!(
        try_with(&|r| r.output.summary = "x".repeat(501)),
        Err("summary_too_long")
    );
    assert_eq!(try_with(&|r| r.output.summary = "x".repeat(500)), Ok(()));
    assert_eq!(
        try_with(&|r| r.output.usage.output_tokens = 2_001),
        Err("summary_too_long")
    );
    assert_eq!(
        try_with(&|r| r.output.summary = "bell\u{7}".into()),
        Err("summary_not_text")
    );
    assert_eq!(
        try_with(&|r| r.output.summary = "cr\r\n".into()),
        Err("summary_not_text")
    );
    assert_eq!(
        try_with(&|r| r.output.summary = "lines\n\tand tabs".into()),
        Ok(())
    );
    assert_eq!(
        try_with(&|r| r.output.finish_reason = "length".into()),
        Err("summary_truncated")
    );
    assert_eq!(
        try_with(&|r| r.output.packet_id = "sha256:other".into()),
        Err("run_mismatch")
    );
    assert_eq!(
        try_with(&|r| r.output.run_id = "".into()),
        Err("run_mismatch")
    );
    assert_eq!(
        try_with(&|r| r.expected_run_id = Some("other".into())),
        Err("run_mismatch")
    );
    assert_eq!(
        try_with(&|r| r.packet.covered_through_seq += 1),
        Err("divergent_hash")
    );
    req.expected_run_id = Some("r".into());
    assert!(settle(&req).is_ok());
}

// ---- resolve: the chain ------------------------------------------------

#[test]
fn chain_resolves_to_its_latest_boundary() {
    let s = three_links();
    let r = s.resolve().unwrap();
    let bs = s.boundaries();
    let head = r.head.unwrap();
    assert_eq!(head.length, 3);
    assert_eq!(head.boundary_id, bs[2].id);
    assert!(r.amendment.is_none());
    assert!(r.retired_boundaries.is_empty());
}

#[test]
fn out_of_order_events_resolve_identically() {
    let mut s = three_links();
    let a = s.resolve().unwrap();
    s.events.reverse();
    s.packets.reverse();
    assert_eq!(a, s.resolve().unwrap());
}

#[test]
fn missing_link_fails_closed() {
    let s = with_boundaries(&three_links(), |bs| {
        bs.remove(1);
    });
    assert_eq!(err_code(s.resolve()), "missing_link");
}

#[test]
fn fork_fails_closed() {
    let s = three_links();
    // A second run settles the last packet again: two boundaries extend one link.
    let last = s.packets.last().unwrap().clone();
    let twin = settle_ok(&last, "run-other", "another summary");
    let mut t = with_boundaries(&s, |_| {});
    t.events.push(Event::Boundary(Box::new(twin)));
    assert_eq!(err_code(t.resolve()), "fork");
}

#[test]
fn non_advancing_coverage_fails_closed() {
    let s = with_boundaries(&three_links(), |bs| {
        let prev = bs[1].covered_through_seq;
        bs[2].covered_through_seq = prev;
        rehash(&mut bs[2]);
    });
    assert_eq!(err_code(s.resolve()), "non_advancing");
}

#[test]
fn fabricated_run_fails_closed() {
    let s = three_links();
    // The packet is not among the persisted ones.
    let mut t = with_boundaries(&s, |_| {});
    t.packets.pop();
    assert_eq!(err_code(t.resolve()), "fabricated_run");
    // The boundary claims a bound field the packet does not give.
    let t = with_boundaries(&s, |bs| {
        bs[2].stats.before.chars += 1;
        rehash(&mut bs[2]);
    });
    assert_eq!(err_code(t.resolve()), "fabricated_run");
}

#[test]
fn wrong_route_and_stale_declaration_fail_closed() {
    let s = with_boundaries(&three_links(), |bs| {
        bs[2].route.chat = "elsewhere".into();
        rehash(&mut bs[2]);
    });
    assert_eq!(err_code(s.resolve()), "wrong_route");
    let s = with_boundaries(&three_links(), |bs| {
        bs[0].compactor_id = "impostor".into();
        rehash(&mut bs[0]);
    });
    assert_eq!(err_code(s.resolve()), "stale_declaration");
    // A registered compactor that disagrees with the target.
    let s = three_links();
    let mut c = s.decl.clone();
    c.role = DeclarationRole::Compactor;
    c.model_profile.model = "other".into();
    let r = foldline_core::resolve::resolve(&foldline_core::resolve::ResolveRequest {
        declaration: s.decl.clone(),
        compactor: Some(c),
        route: route(),
        events: s.events.clone(),
        packets: s.packets.clone(),
        trusted: Vec::new(),
        verified: None,
    });
    let e = r.unwrap_err();
    assert_eq!(e.code.as_str(), "stale_declaration");
    assert_eq!(e.ids, ["modelProfile"]);
}

#[test]
fn trusted_boundaries_are_not_re_settled_but_their_links_still_hold() {
    use foldline_core::resolve::{resolve, ResolveRequest};
    let s = three_links();
    let full = s.resolve().unwrap();
    let req = |trusted: Vec<String>, packets| ResolveRequest {
        declaration: s.decl.clone(),
        compactor: None,
        route: route(),
        events: s.events.clone(),
        packets,
        trusted,
        verified: None,
    };
    // Without packets, untrusted boundaries cannot show their run evidence.
    assert_eq!(
        err_code(resolve(&req(Vec::new(), Vec::new()))),
        "fabricated_run"
    );
    // Trusting the first two, only the third needs its packet.
    let third: Vec<_> = s.packets[2..].to_vec();
    let r = resolve(&req(full.accepted[..2].to_vec(), third)).unwrap();
    assert_eq!(r, full);
    // Trust never covers a broken link: a fork still fails closed.
    let mut forked_events = s.events.clone();
    let twin = settle_ok(s.packets.last().unwrap(), "run-other", "another summary");
    forked_events.push(Event::Boundary(Box::new(twin)));
    let r = resolve(&ResolveRequest {
        events: forked_events,
        ..req(full.accepted.clone(), s.packets.clone())
    });
    assert_eq!(err_code(r), "fork");
}

#[test]
fn a_verified_head_resolves_as_the_whole_chain_does_from_only_what_follows_it() {
    use foldline_core::resolve::resolve;
    let mut s = three_links();
    let bs = s.boundaries();
    // A correction of a turn the first boundary froze: the amendment needs
    // the verified prefix's snapshot of it.
    s.events.push(correction(
        &bs[0].input.turns[2].turn_id,
        1,
        "CORRECTED FACT",
    ));
    let full = s.resolve().unwrap();
    assert!(full.amendment.is_some());
    for k in 1..=3 {
        let r = resolve(&from_verified(&s, k)).unwrap();
        assert_eq!(r.head, full.head, "from link {k}");
        assert_eq!(r.amendment, full.amendment, "from link {k}");
        assert_eq!(r.frontier, full.frontier);
        assert_eq!(r.accepted, full.accepted[k - 1..], "from link {k}");
    }
    // The prefix's snapshot is what a correction is compared with: without
    // it, the correction of a turn the prefix covers finds nothing to amend
    // (so a host must send it; docs/journal.md says how).
    let mut bare = from_verified(&s, 2);
    bare.verified.as_mut().unwrap().turns.clear();
    assert_eq!(resolve(&bare).unwrap().amendment, None);
}

#[test]
fn from_a_verified_head_a_broken_link_a_fork_or_another_epoch_fails_closed() {
    use foldline_core::resolve::resolve;
    let s = three_links();
    let bs = s.boundaries();
    // The third boundary names the second, which is neither verified nor sent.
    let mut skip = from_verified(&s, 1);
    skip.events
        .retain(|e| !matches!(e, Event::Boundary(b) if b.id == bs[1].id));
    assert_eq!(err_code(resolve(&skip)), "missing_link");
    // A second boundary on the verified head is a fork.
    let mut forked = from_verified(&s, 2);
    let twin = settle_ok(&s.packets[2], "run-other", "another summary");
    forked.events.push(Event::Boundary(Box::new(twin)));
    forked.packets = s.packets.clone();
    assert_eq!(err_code(resolve(&forked)), "fork");
    // A verified head of another epoch is not a place to resolve from.
    let mut upgraded = from_verified(&s, 2);
    upgraded.declaration.summary.max_chars = Some(600);
    assert_eq!(err_code(resolve(&upgraded)), "stale_declaration");
    // Its packet's run is not re-settled (it is trusted), but a later
    // boundary is: a tampered third boundary still fails.
    let t = with_boundaries(&s, |bs| {
        bs[2].stats.before.chars += 1;
        rehash(&mut bs[2]);
    });
    assert_eq!(err_code(resolve(&from_verified(&t, 2))), "fabricated_run");
}

#[test]
fn retired_epoch_is_listed_and_an_upgrade_starts_a_new_frontier() {
    let mut s = three_links();
    let old = s.resolve().unwrap();
    s.decl.summary.max_chars = Some(600); // a policy upgrade: new fingerprint
    let r = s.resolve().unwrap();
    assert!(r.head.is_none() && r.frontier.is_none());
    assert_eq!(r.retired_boundaries.len(), 3);
    assert_eq!(r.retired_frontiers, [old.frontier.unwrap().id]);
    // The driver activates a new frontier (carrying the retired summary, so
    // the epoch starts right after what it covered) and compacts again once
    // the trigger is reached; old boundaries stay.
    assert_eq!(
        r.carried.map(|c| c.boundary_id),
        old.head.map(|h| h.boundary_id)
    );
    s.say(15, 1_000);
    assert!(matches!(s.step(), PlanOutcome::Compact { .. }));
    let r = s.resolve().unwrap();
    assert_eq!(r.head.unwrap().length, 1);
    assert_eq!(r.retired_boundaries.len(), 3);
    assert_eq!(s.boundaries().len(), 4);
}

#[test]
fn two_frontiers_in_one_epoch_are_a_fork() {
    let mut s = three_links();
    let f = s.resolve().unwrap().frontier.unwrap();
    let mut other = f.clone();
    other.start_seq += 1;
    other.id = foldline_core::canonical::hash_without(&other, "id");
    s.events.push(Event::Frontier(other));
    assert_eq!(err_code(s.resolve()), "fork");
}

/// Every leaf of a settled boundary, mutated: without a new hash the chain
/// fails on the hash; with a recomputed hash it still fails, with the code the
/// field's rule names.
#[test]
fn tampering_with_any_bound_field_fails_the_chain() {
    let s = three_links();
    let target = s.boundaries()[1].clone(); // a middle link: its successor names its hash
    let value = serde_json::to_value(&target).unwrap();
    let mut paths = Vec::new();
    leaves(&value, String::new(), &mut paths);
    assert!(
        paths.len() > 40,
        "expected every field, got {}",
        paths.len()
    );
    let mut checked = 0;
    for path in &paths {
        let Some(mutated) = mutate(&value, path) else {
            continue;
        };
        let Ok(mut b) = serde_json::from_value::<Boundary>(mutated) else {
            continue;
        };
        let idx = 1;
        let plain = with_boundaries(&s, |bs| bs[idx] = b.clone());
        let code = err_code(plain.resolve());
        // A boundary whose epoch fields change is another epoch's: retired,
        // so its successor's link has a gap.
        let epoch = path == "/rulesetVersion" || path == "/declarationFingerprint";
        let plain_expected = if epoch {
            "missing_link"
        } else {
            "divergent_hash"
        };
        assert_eq!(code, plain_expected, "{path} without rehash");
        if path == "/hash" {
            continue; // rehashing restores the original
        }
        rehash(&mut b);
        let re = with_boundaries(&s, |bs| bs[idx] = b.clone());
        let code = err_code(re.resolve());
        let expected = expected_code(path);
        assert_eq!(code, expected, "{path} with rehash");
        checked += 1;
    }
    assert!(checked > 40);
}

/// The head has no successor naming its hash, so a rehashed change to any
/// field the core binds is caught by re-settling it from its packet.
#[test]
fn tampering_with_the_head_is_caught_by_resettling_its_packet() {
    let s = three_links();
    let head = s.boundaries()[2].clone();
    let value = serde_json::to_value(&head).unwrap();
    let mut paths = Vec::new();
    leaves(&value, String::new(), &mut paths);
    for path in paths.iter().filter(|p| *p != "/hash") {
        let Some(mutated) = mutate(&value, path) else {
            continue;
        };
        let Ok(mut b) = serde_json::from_value::<Boundary>(mutated) else {
            continue;
        };
        rehash(&mut b);
        let t = with_boundaries(&s, |bs| bs[2] = b.clone());
        let got = t.resolve();
        match expected_head_code(path) {
            Some(code) => assert_eq!(err_code(got), code, "{path}"),
            None if path == "/rulesetVersion" || path == "/declarationFingerprint" => {
                // Claims another epoch: ignored and listed, never the head.
                let r = got.expect(path);
                assert_eq!(r.head.unwrap().length, 2, "{path}");
                assert_eq!(r.retired_boundaries, [b.id.clone()]);
            }
            None => {
                // Run evidence the host reported (model, usage, finish reason)
                // is a claim the core cannot derive; it is bound by the hash
                // and by the successor's link, not by the packet.
                assert!(path.starts_with("/run/") && path != "/run/runId", "{path}");
                assert!(got.is_ok(), "{path}");
            }
        }
    }
}

fn expected_head_code(path: &str) -> Option<&'static str> {
    Some(match path {
        p if p.starts_with("/route") => "wrong_route",
        "/targetId" | "/compactorId" => "stale_declaration",
        p if p.starts_with("/historyAgents") || p.starts_with("/policy") => "stale_declaration",
        p if p.starts_with("/frontier") => "frontier_mismatch",
        "/previous/boundaryId" => "missing_link",
        "/previous/boundaryHash" => "divergent_hash",
        "/previous/coveredThroughSeq" => "missing_link",
        "/rulesetVersion" | "/declarationFingerprint" => return None,
        "/run/modelId" | "/run/finishReason" => return None,
        p if p.starts_with("/run/usage") => return None,
        _ => "fabricated_run",
    })
}

fn expected_code(path: &str) -> &'static str {
    match path {
        "/id" => "missing_link", // its successor now names an absent predecessor
        p if p.starts_with("/route") => "wrong_route",
        "/targetId" | "/compactorId" => "stale_declaration",
        p if p.starts_with("/historyAgents") || p.starts_with("/policy") => "stale_declaration",
        p if p.starts_with("/frontier") => "frontier_mismatch",
        "/previous/boundaryId" => "missing_link",
        "/previous/boundaryHash" => "divergent_hash",
        "/previous/coveredThroughSeq" => "missing_link",
        "/rulesetVersion" | "/declarationFingerprint" => "missing_link", // leaves the epoch: a gap
        "/sensitive" => "fabricated_run",
        // Everything else (the model's own summary aside) the core binds from the packet;
        // a successor names this boundary by hash, so a rehash breaks that link first.
        _ => "divergent_hash",
    }
}

fn leaves(v: &Value, at: String, out: &mut Vec<String>) {
    match v {
        Value::Object(m) => m
            .iter()
            .for_each(|(k, v)| leaves(v, format!("{at}/{k}"), out)),
        Value::Array(a) if !a.is_empty() => a
            .iter()
            .enumerate()
            .for_each(|(i, v)| leaves(v, format!("{at}/{i}"), out)),
        _ => out.push(at),
    }
}

fn mutate(v: &Value, path: &str) -> Option<Value> {
    let mut v = v.clone();
    let leaf = v.pointer_mut(path)?;
    *leaf = match leaf.take() {
        Value::String(s) if s == "automatic" => Value::String("manual".into()),
        Value::String(s) if s == "chars" => Value::String("tokens".into()),
        Value::String(s) if s == "user" => Value::String("assistant".into()),
        Value::String(s) if s == "assistant" => Value::String("user".into()),
        Value::String(s) => Value::String(format!("{s}x")),
        Value::Number(n) => Value::from(n.as_u64()? + 1),
        Value::Bool(b) => Value::Bool(!b),
        Value::Null => return None,
        Value::Array(_) => Value::Array(vec![Value::String("extra".into())]),
        other => other,
    };
    Some(v)
}

// ---- amendments --------------------------------------------------------

#[test]
fn late_correction_yields_an_amendment_the_next_packet_carries_and_then_absorbs() {
    let mut s = three_links();
    let bs = s.boundaries();
    let covered = &bs[0].input.turns[2];
    s.events
        .push(correction(&covered.turn_id, 1, "CORRECTED FACT"));
    let r = s.resolve().unwrap();
    let a = r.amendment.clone().expect("amendment");
    assert_eq!(a.entries.len(), 1);
    assert_eq!(a.entries[0].turn_id, covered.turn_id);
    assert_eq!(
        a.entries[0].old_hash.as_deref(),
        Some(covered.content_hash.as_str())
    );
    // The boundaries are untouched.
    assert_eq!(s.boundaries(), bs);
    // The next compaction carries it...
    s.say(20, 1_000);
    let p = match s.step() {
        PlanOutcome::Compact { packet, .. } => packet,
        o => panic!("{o:?}"),
    };
    assert_eq!(p.amendment.as_ref().unwrap().hash, a.hash);
    assert!(p
        .messages
        .iter()
        .any(|m| m.content.contains("CORRECTED FACT")));
    // ...and once settled, the chain has absorbed it.
    let r = s.resolve().unwrap();
    assert!(r.amendment.is_none(), "{:?}", r.amendment);
    assert_eq!(r.head.unwrap().length, 4);
}

#[test]
fn late_delivery_into_covered_history_is_amended() {
    let mut s = three_links();
    let mut m = message(
        3,
        5,
        "late-1",
        foldline_core::turn::Role::User,
        text("I forgot to say"),
    );
    m.tokens = None;
    s.events.push(Event::LateDelivery(m));
    let a = s.resolve().unwrap().amendment.unwrap();
    assert_eq!(a.entries[0].kind, foldline_core::amend::EntryKind::Late);
    assert_eq!(a.entries[0].old_hash, None);
}

#[test]
fn oversized_amendment_fails_closed() {
    let mut d = chars_decl(20_000, 10_000);
    d.amendment_max_chars = 100_000;
    let mut s = three_links_with(d);
    let t = s.boundaries()[0].input.turns[0].clone();
    s.events
        .push(correction(&t.turn_id, 1, &"y".repeat(99_000)));
    assert!(s.resolve().unwrap().amendment.is_some());
    s.events
        .push(correction(&t.turn_id, 2, &"y".repeat(100_001)));
    assert_eq!(err_code(s.resolve()), "amendment_too_large");
}

// ---- declarations and streaming ----------------------------------------

#[test]
fn declarations_report_every_disagreeing_field() {
    let t = Declaration::new("agent", "agent-compactor");
    let mut c = t.clone();
    c.role = DeclarationRole::Compactor;
    let ok = validate(&ValidateRequest::Declarations(Box::new(DeclarationPair {
        target: t.clone(),
        compactor: c.clone(),
    })));
    assert_eq!(
        serde_json::to_value(ok.unwrap()).unwrap(),
        serde_json::json!({"kind": "declarations", "agree": true, "disagreements": []})
    );
    c.enabled = false;
    c.sources = vec!["telegram:*".into()];
    c.privacy.admit_sensitive = true;
    c.history_agents = vec!["x".into()];
    c.documents.budget_chars = 5;
    c.model_profile.provider = "p".into();
    c.target_id = "other".into();
    c.compactor_id = "other-c".into();
    match validate(&ValidateRequest::Declarations(Box::new(DeclarationPair {
        target: t,
        compactor: c,
    })))
    .unwrap()
    {
        ValidateResponse::Declarations(a) => {
            assert!(!a.agree);
            assert_eq!(
                a.disagreements,
                [
                    "targetId",
                    "compactorId",
                    "enabled",
                    "modelProfile",
                    "sources",
                    "privacy",
                    "historyAgents",
                    "documents"
                ]
            );
        }
        o => panic!("{o:?}"),
    }
}

#[test]
fn stream_replays_once_before_content_never_after() {
    let d = |content_received, ended, replays_used| {
        foldline_core::stream::decide(&StreamReport {
            content_received,
            ended,
            replays_used,
        })
    };
    assert_eq!(d(true, StreamEnd::Complete, 0), StreamDecision::Settle);
    assert_eq!(
        d(false, StreamEnd::Dropped, 0),
        StreamDecision::ReplayBuffered
    );
    assert_eq!(
        d(false, StreamEnd::Error, 0),
        StreamDecision::ReplayBuffered
    );
    assert!(matches!(
        d(false, StreamEnd::Dropped, 1),
        StreamDecision::Fail { .. }
    ));
    assert!(matches!(
        d(true, StreamEnd::Dropped, 0),
        StreamDecision::Fail { .. }
    ));
    assert!(matches!(
        d(false, StreamEnd::Complete, 0),
        StreamDecision::Fail { .. }
    ));
}

#[test]
fn failures_get_one_generic_notice_and_a_specific_audit_reason() {
    let kinds = [
        (FailureKind::ProviderRefusal, "provider_refusal"),
        (FailureKind::Timeout, "timeout"),
        (FailureKind::BudgetStop, "budget_stop"),
        (FailureKind::UnusableSummary, "unusable_summary"),
    ];
    for (kind, name) in kinds {
        let r = match validate(&ValidateRequest::Failure(FailureInput {
            failure: kind,
            detail: "provider said: no".into(),
        }))
        .unwrap()
        {
            ValidateResponse::Failure(r) => r,
            o => panic!("{o:?}"),
        };
        assert_eq!(r.notice, "The chat could not be compacted.");
        assert!(!r.notice.contains("provider said"));
        assert_eq!(r.audit_reason, format!("{name}: provider said: no"));
    }
}

#[test]
fn failure_and_stream_requests_round_trip_through_json() {
    let out = foldline_core::api::call_str(
        "validate",
        r#"{"kind":"failure","failure":"timeout","detail":"60s"}"#,
    );
    assert_eq!(
        out,
        r#"{"ok":{"auditReason":"timeout: 60s","failure":"timeout","kind":"failure","notice":"The chat could not be compacted."}}"#
    );
    let out = foldline_core::api::call_str(
        "validate",
        r#"{"kind":"stream","contentReceived":false,"ended":"dropped"}"#,
    );
    assert_eq!(
        out,
        r#"{"ok":{"decision":{"action":"replayBuffered"},"kind":"stream"}}"#
    );
}
