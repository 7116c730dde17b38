//! The journal contract (docs/journal.md) as a suite any [`Journal`] can be
//! run against: a custom journal's test calls [`check`] with an empty one.
//! SQLite and PostgreSQL pass it in this crate's tests; the embedding
//! example's in-memory journal passes it in CI.
//!
//! It checks, in order: the append check (a forged content hash, a wrong
//! route, nothing written), turn claims (a reused turn id with other content
//! refused, an identical repeat accepted), compare-and-append, hashing at
//! entry, pages of a read, appenders racing on one conversation (and on its first position),
//! the fenced writer lease, one boundary per chain slot (through a
//! real compaction by a [`Driver`]), packets by id, a chain that verifies,
//! the progress watermark when the journal keeps one (the trait's
//! default keeps none), and its watch of writes when it keeps one.

#![allow(clippy::missing_panics_doc, clippy::unwrap_used)]

use foldline_core::declaration::{Budget, Declaration};
use foldline_core::event::Event;

use super::Journal;
use crate::driver::{Driver, Outcome};
use crate::model::Extractive;
use crate::runtime::Foldline;

/// The suite's declaration: a small character budget, so a few hundred
/// turns compact.
pub fn declaration() -> Declaration {
    let mut d = Declaration::new("assistant", "assistant-compactor");
    d.budget = Budget::Chars {
        trigger: 20_000,
        retain: 8_000,
    };
    d.summary.max_chars = Some(1_500);
    d
}

/// `turns` turns of the demo conversation (`foldline demo`'s) in
/// `conversation`, as journal events.
pub fn demo_events(conversation: &str, turns: usize) -> Vec<Event> {
    let text: String = crate::import::demo_conversation(turns)
        .iter()
        .map(|m| format!("{m}\n"))
        .collect();
    let route = foldline_core::turn::Route {
        conversation: conversation.into(),
        chat: String::new(),
        sender: String::new(),
    };
    crate::import::parse(&text, &route, 0).expect("the demo conversation parses")
}

/// Check `journal` against the journal contract; panics, naming the rule,
/// at the first one it breaks. Give it an empty journal: it writes the
/// conversations `c`, `t` and `p`, and leaves them there.
///
/// # Panics
/// When the journal breaks a rule of the contract.
pub fn check<J: Journal>(journal: J) {
    let d = Driver::new(
        Foldline::embedded().expect("the embedded core loads"),
        journal,
        Extractive,
        declaration(),
    );
    let j = &d.journal;
    refuses_what_fails_the_append_check(j);
    appends_compare_and_append(j);
    keeps_one_message_per_turn_id(j);
    orders_racing_appenders(j);
    fences_the_writer_lease(j);
    keeps_one_boundary_per_head(&d);
    stores_packets_by_id(j);
    d.resolve("c").expect("the chain verifies");
    check_progress(j, false);
    check_watch(j, false);
}

/// Rule 1: checked at append — a forged content hash or another route is refused, nothing written.
fn refuses_what_fails_the_append_check<J: Journal + ?Sized>(j: &J) {
    let mut bad = demo_events("c", 2);
    if let Event::Message(m) = &mut bad[1] {
        m.content_hash = Some("sha256:forged".into());
    }
    let e = j.append("c", &bad).unwrap_err();
    assert_eq!(e.code(), "invalid_request", "{e}");
    assert!(e.to_string().contains("events[1]"), "{e}");
    assert_eq!(
        j.append("c", &demo_events("elsewhere", 1))
            .unwrap_err()
            .code(),
        "wrong_route"
    );
    assert!(j.read_events("c", 0).unwrap().is_empty());
}

/// Rule 2: compare-and-append; turns are hashed once, when they enter.
fn appends_compare_and_append<J: Journal + ?Sized>(j: &J) {
    let events = demo_events("c", 120);
    assert_eq!(j.append("c", &events[..1]).unwrap(), 1);
    assert_eq!(
        j.append_at("c", &events[1..2], 0, None).unwrap_err().code(),
        "conflict"
    );
    assert_eq!(
        j.append_at("c", &events[1..], 1, None).unwrap(),
        events.len() as u64
    );
    let read = j.read_events("c", 0).unwrap();
    assert_eq!(read.len(), events.len());
    assert!(read.iter().zip(1..).all(|(s, i)| s.seq == i));
    assert_eq!(
        j.read_events("c", 5).unwrap().first().map(|s| s.seq),
        Some(6)
    );
    // Turns are hashed once, when they enter.
    assert!(matches!(&read[0].event, Event::Message(m) if m.content_hash.is_some()));
    // A page is the first `limit` of what a read from the same position reads.
    for (since, limit) in [(0, 7), (5, 1), (110, 50), (500, 3)] {
        let all = j.read_events("c", since).unwrap();
        let page = j.read_events_page("c", since, limit).unwrap();
        assert_eq!(page, all[..limit.min(all.len())], "from {since}, {limit}");
    }
}

/// Rule 2 (turn ids): a turn id names one message — reused with other content
/// (alone, or within one batch) it is refused, nothing written; said again
/// the same it is accepted (the core reads a repeat as one turn).
fn keeps_one_message_per_turn_id<J: Journal + ?Sized>(j: &J) {
    let t = demo_events("t", 2);
    j.append("t", &t).unwrap();
    let mut other = t[1].clone();
    if let Event::Message(m) = &mut other {
        m.parts = vec![foldline_core::turn::Part::Text {
            text: "something else".into(),
        }];
        m.content_hash = None;
    }
    let e = j.append("t", &[t[0].clone(), other.clone()]).unwrap_err();
    assert_eq!(e.code(), "conflicting_turn", "{e}");
    assert_eq!(
        j.read_events("t", 0).unwrap().len(),
        t.len(),
        "nothing written"
    );
    let fresh = demo_events("t2", 1).remove(0);
    let mut fresh = match fresh {
        Event::Message(mut m) => {
            m.conversation = "t".into();
            m.turn_id = "t-new".into();
            m
        }
        _ => unreachable!(),
    };
    let first = Event::Message(fresh.clone());
    fresh.parts = vec![foldline_core::turn::Part::Text { text: "two".into() }];
    assert_eq!(
        j.append("t", &[first, Event::Message(fresh)])
            .unwrap_err()
            .code(),
        "conflicting_turn"
    );
    assert_eq!(
        j.read_events("t", 0).unwrap().len(),
        t.len(),
        "nothing written"
    );
    assert_eq!(
        j.append("t", &t[1..2]).unwrap(),
        t.len() as u64 + 1,
        "an identical repeat"
    );
}

/// Rule 2 (order): appenders racing on one conversation, from its first
/// append on, each get their own positions, one after another with no gap;
/// racing compare-and-appends at one position: one is written, the others
/// are told the head moved.
fn orders_racing_appenders<J: Journal + ?Sized>(j: &J) {
    const WRITERS: usize = 4;
    let events = demo_events("r", 40);
    let per = events.len() / WRITERS;
    std::thread::scope(|s| {
        for chunk in events.chunks(per) {
            s.spawn(move || {
                for e in chunk {
                    j.append("r", std::slice::from_ref(e)).unwrap();
                }
            });
        }
    });
    let read = j.read_events("r", 0).unwrap();
    assert!(read.iter().zip(1..).all(|(s, i)| s.seq == i), "no gap");
    let mut ids: Vec<_> = read.iter().filter_map(|s| s.event.turn_seq()).collect();
    ids.sort_unstable();
    let mut want: Vec<_> = events.iter().filter_map(Event::turn_seq).collect();
    want.sort_unstable();
    assert_eq!(ids, want, "each event written once");
    let firsts = demo_events("q", WRITERS * 3);
    let results: Vec<_> = std::thread::scope(|s| {
        let racing: Vec<_> = firsts[..WRITERS]
            .iter()
            .map(|e| s.spawn(move || j.append_at("q", std::slice::from_ref(e), 0, None)))
            .collect();
        racing.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert_eq!(
        results.iter().filter(|r| r.is_ok()).count(),
        1,
        "one writer wins"
    );
    assert!(results
        .iter()
        .filter_map(|r| r.as_ref().err())
        .all(|e| e.code() == "conflict"));
}

/// Rule 3: the fenced lease.
fn fences_the_writer_lease<J: Journal + ?Sized>(j: &J) {
    let a = j.acquire_lease("c", "a", 1_000, 100).unwrap().unwrap();
    assert_eq!(j.acquire_lease("c", "b", 1_050, 100).unwrap(), None);
    assert_eq!(j.acquire_lease("c", "a", 1_060, 100).unwrap(), Some(a));
    let b = j.acquire_lease("c", "b", 1_200, 100).unwrap().unwrap();
    assert!(b > a);
    let head = j.read_events("c", 0).unwrap().len() as u64;
    let more = demo_events("c", 122);
    let e = j
        .append_at("c", &more[120..121], head, Some(a))
        .unwrap_err();
    assert_eq!(e.code(), "lease_lost");
    j.release_lease("c", "b").unwrap();
    assert!(j.acquire_lease("c", "a", 1_300, 100).unwrap().unwrap() > b);
    j.release_lease("c", "a").unwrap();
}

/// Rule 4: one boundary per head — the driver compacts; the same boundary
/// again is a fork.
fn keeps_one_boundary_per_head<J: Journal, M: crate::model::Model>(d: &Driver<J, M>) {
    let j = &d.journal;
    assert!(matches!(d.on_message("c").unwrap(), Outcome::Compacted(_)));
    let boundary = j
        .read_events("c", 0)
        .unwrap()
        .into_iter()
        .find(|s| matches!(s.event, Event::Boundary(_)))
        .unwrap();
    let before = j.read_events("c", 0).unwrap().len();
    assert_eq!(j.append("c", &[boundary.event]).unwrap_err().code(), "fork");
    assert_eq!(
        j.read_events("c", 0).unwrap().len(),
        before,
        "nothing written"
    );
}

/// Rule 5: packets by id, idempotent.
fn stores_packets_by_id<J: Journal + ?Sized>(j: &J) {
    let packets = j.list_packets("c").unwrap();
    assert_eq!(packets.len(), 1);
    j.put_packet("c", &packets[0]).unwrap();
    assert_eq!(j.list_packets("c").unwrap().len(), 1);
    assert_eq!(
        j.get_packet("c", &packets[0].id).unwrap().as_ref(),
        Some(&packets[0])
    );
    assert_eq!(j.get_packet("c", "sha256:none").unwrap(), None);
}

/// A skipped run's record that checked through `seq` (the sizes made up):
/// what the progress checks note.
pub fn skip_record(seq: u64) -> foldline_core::plan::SkipRecord {
    foldline_core::plan::SkipRecord {
        metric: foldline_core::declaration::Metric::Chars,
        total: 10,
        trigger: 100,
        warm_at: None,
        pinned: 0,
        envelopes: 0,
        eligible_turns: 1,
        warm_refused: None,
        checked_through_seq: seq,
    }
}

/// The progress watermark on conversation `p` of `journal`: one row, the
/// count grown, the record of the furthest check kept (a late, shorter
/// check does not move it back), never an event. `required`: the journal
/// must keep it (SQLite and PostgreSQL do; the trait's default keeps none).
///
/// # Panics
/// When the journal breaks the rule.
pub fn check_progress<J: Journal + ?Sized>(j: &J, required: bool) {
    let rec = skip_record;
    assert_eq!(j.progress("p").unwrap(), None);
    for seq in [5, 7, 6] {
        j.note_skipped("p", &rec(seq)).unwrap();
    }
    match j.progress("p").unwrap() {
        Some(p) => assert_eq!((p.skipped_runs, p.last.checked_through_seq), (3, 7)),
        None => assert!(!required, "the progress watermark is not kept"),
    }
    assert_eq!(j.read_events("p", 0).unwrap(), Vec::new());
}

/// A watch, when the journal keeps one, names each conversation written
/// after it was made, once the write is committed, and nothing when
/// nothing more was written (`required`: the journal must keep one).
pub fn check_watch<J: Journal + ?Sized>(j: &J, required: bool) {
    use std::time::{Duration, Instant};
    let Some(mut w) = j.watch().unwrap() else {
        assert!(!required, "the journal keeps no watch");
        return;
    };
    j.append("watched-b", &demo_events("watched-b", 1)).unwrap();
    j.append("watched-a", &demo_events("watched-a", 1)).unwrap();
    let mut heard = std::collections::BTreeSet::new();
    let until = Instant::now() + Duration::from_secs(10);
    while heard.len() < 2 && Instant::now() < until {
        match w.next(Duration::from_millis(100)).unwrap() {
            super::Written::These(c) => heard.extend(c),
            super::Written::Unknown => panic!("the watch could not place a write"),
        }
    }
    assert_eq!(
        heard.into_iter().collect::<Vec<_>>(),
        ["watched-a", "watched-b"],
        "the watch names what was written"
    );
    assert_eq!(
        w.next(Duration::from_millis(100)).unwrap(),
        super::Written::These(Vec::new()),
        "nothing more written, nothing more heard"
    );
}
