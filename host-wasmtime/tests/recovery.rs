//! Compaction that always recovers, through the Rust driver: after a
//! provider outage of any length, and after a race that leaves the
//! activation frontier behind a long history, the backlog is folded oldest
//! first in bounded steps (at most `MAX_FOLDS_PER_RUN` per message) until
//! the exact tail is reached, and from then on no turn after the last
//! summary is left out of the model's context for lack of room.

mod support;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use foldline_core::declaration::Budget;
use foldline_core::event::Event;
use foldline_core::packet::Packet;
use foldline_core::run::MAX_FOLDS_PER_RUN;
use foldline_core::select::OmitReason;
use foldline_core::stream::FailureKind;
use foldline_core::turn::Role;
use foldline_wasmtime::driver::{ContextOptions, Driver, Outcome};
use foldline_wasmtime::journal::{Journal, SqliteJournal};
use foldline_wasmtime::model::{Extractive, Model, ModelError, ModelResult, StreamChunk};
use foldline_wasmtime::runtime::Foldline;
use support::fixtures::budget_decl;
use support::intercept::{Intercept, Write};

/// The offline summarizer behind a provider that refuses every call while
/// `down` is set.
struct Outage {
    down: Arc<AtomicBool>,
    calls: Arc<std::sync::atomic::AtomicU64>,
}

impl Outage {
    fn refused(&self) -> Result<(), ModelError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        if self.down.load(Ordering::SeqCst) {
            return Err(ModelError::new(
                FailureKind::ProviderRefusal,
                "the provider is unavailable",
            ));
        }
        Ok(())
    }
}

impl Model for Outage {
    fn stream(&self, p: &Packet, sink: &mut dyn FnMut(StreamChunk)) -> Result<(), ModelError> {
        self.refused()?;
        Extractive.stream(p, sink)
    }
    fn complete(&self, p: &Packet) -> Result<ModelResult, ModelError> {
        self.refused()?;
        Extractive.complete(p)
    }
}

/// A user question (~200 characters) or an answer of ordinary length
/// (~1,200 characters), at source `s`.
fn turn(s: u64) -> Event {
    let user = s % 2 == 1;
    let size = if user { 200 } else { 1_200 };
    let text: String = format!(
        "{} {s}: the plan for week {} keeps the budget at {} and the review on day {}. ",
        if user { "Question" } else { "Answer" },
        s % 9,
        s * 17 % 1000,
        s % 28
    )
    .chars()
    .cycle()
    .take(size)
    .collect();
    let role = if user { Role::User } else { Role::Assistant };
    support::fixtures::text_message("c", s, role, text)
}

/// Turns after the last summary that the model's context leaves out for
/// lack of room, and whether the newest turn is in it.
fn budget_omissions<J: Journal, M: Model>(d: &Driver<J, M>, newest: u64) -> usize {
    let sel = d.context("c", ContextOptions::default()).expect("context");
    assert!(sel.manifest.sizes.total <= sel.manifest.limit, "fits");
    assert_eq!(
        sel.manifest.included.last().map(String::as_str),
        Some(format!("t{newest}").as_str()),
        "the newest turn is in the context"
    );
    sel.manifest
        .omitted
        .iter()
        .filter(|o| o.reason == OmitReason::Budget)
        .count()
}

/// Every turn folded at most once, in order, and the chain verifies.
fn chain_is_whole<J: Journal, M: Model>(d: &Driver<J, M>) {
    let r = d.resolve("c").expect("the chain verifies");
    let mut last = 0;
    for e in d.journal().read_events("c", 0).unwrap() {
        if let Event::Boundary(b) = e.event {
            for t in &b.input.turns {
                assert!(
                    t.source_seq > last,
                    "{} folded twice or out of order",
                    t.turn_id
                );
                last = t.source_seq;
            }
        }
    }
    assert!(r.head.is_some());
}

/// `warm` exchanges, then `outage` exchanges with the provider refusing,
/// then recovery: returns the message (counted from recovery) after which
/// no context left a turn out for lack of room.
/// A driver behind the provider of [`Outage`], down from the start when
/// `down`; the switch and the call counter.
#[allow(clippy::type_complexity)]
fn outage_driver(
    budget: Budget,
    down: bool,
) -> (
    Driver<SqliteJournal, Outage>,
    Arc<AtomicBool>,
    Arc<std::sync::atomic::AtomicU64>,
) {
    let down = Arc::new(AtomicBool::new(down));
    let calls = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let d = Driver::new(
        Foldline::embedded().unwrap(),
        SqliteJournal::in_memory().unwrap(),
        Outage {
            down: down.clone(),
            calls: calls.clone(),
        },
        budget_decl(budget),
    );
    (d, down, calls)
}

fn live_through(budget: Budget, warm: u64, outage: u64) -> u64 {
    let (d, down, calls) = outage_driver(budget, false);
    let mut s = 0;
    let mut say = |d: &Driver<SqliteJournal, Outage>| {
        s += 1;
        d.journal().append("c", &[turn(s)]).unwrap();
        let before = calls.load(Ordering::SeqCst);
        let o = d.on_message("c").unwrap();
        let made = calls.load(Ordering::SeqCst) - before;
        assert!(
            made <= MAX_FOLDS_PER_RUN,
            "message {s}: {made} model calls, over the bound"
        );
        if let Outcome::Refused(e) = &o {
            panic!("message {s}: refused {e:?}");
        }
        (s, o)
    };
    for _ in 0..warm * 2 {
        say(&d);
    }
    down.store(true, Ordering::SeqCst);
    for _ in 0..outage * 2 {
        let (_, o) = say(&d);
        assert!(!matches!(o, Outcome::Compacted(_)), "the provider is down");
    }
    down.store(false, Ordering::SeqCst);
    let mut clean_since = None;
    let mut first_compaction = None;
    for n in 1..=60u64 {
        let (newest, o) = say(&d);
        if matches!(o, Outcome::Compacted(_)) && first_compaction.is_none() {
            first_compaction = Some(n);
        }
        match (budget_omissions(&d, newest), clean_since) {
            (0, None) => clean_since = Some(n),
            (0, Some(_)) => {}
            (k, Some(since)) => {
                panic!("message {n} after recovery left {k} turns out, clean since {since}")
            }
            (_, None) => {}
        }
    }
    chain_is_whole(&d);
    let first = first_compaction.expect("compaction resumed");
    assert_eq!(
        first, 1,
        "compaction resumes with the first message after recovery"
    );
    clean_since.expect("the context recovered")
}

fn tokens() -> Budget {
    Budget::default_tokens()
}

#[test]
fn compaction_resumes_after_an_outage_of_any_length_at_the_token_defaults() {
    for outage in [20, 100, 300] {
        let clean = live_through(tokens(), 20, outage);
        assert!(clean <= 10, "outage {outage}: clean from message {clean}");
        eprintln!(
            "tokens, outage of {outage} exchanges: no omission from message {clean} after recovery"
        );
    }
}

#[test]
fn compaction_resumes_after_an_outage_of_any_length_at_the_character_defaults() {
    for outage in [20, 100, 300] {
        let clean = live_through(Budget::default(), 40, outage);
        assert!(clean <= 10, "outage {outage}: clean from message {clean}");
        eprintln!(
            "chars, outage of {outage} exchanges: no omission from message {clean} after recovery"
        );
    }
}

/// Another writer appends 150 messages between the driver's first read and
/// its compare-and-append of the activation frontier: the frontier lands at
/// source 1 with all of them behind it, and the backlog folds in steps.
#[test]
fn a_frontier_that_lands_behind_a_long_history_recovers() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("j.db");
    let raced = Arc::new(AtomicBool::new(false));
    let (path, flag) = (db.clone(), raced.clone());
    let journal = Intercept {
        crash: Box::new(move |w| {
            if let Write::Append(batch) = w {
                let frontier = batch.iter().any(|e| matches!(e, Event::Frontier(_)));
                if frontier && !flag.swap(true, Ordering::SeqCst) {
                    let other = SqliteJournal::open(&path).unwrap();
                    let burst: Vec<Event> = (2..=151).map(turn).collect();
                    other.append("c", &burst).unwrap();
                }
            }
            false
        }),
        ..Intercept::counting(SqliteJournal::open(&db).unwrap())
    };
    let d = Driver::new(
        Foldline::embedded().unwrap(),
        journal,
        Outage {
            down: Arc::new(AtomicBool::new(false)),
            calls: Arc::new(std::sync::atomic::AtomicU64::new(0)),
        },
        budget_decl(tokens()),
    );
    d.journal().append("c", &[turn(1)]).unwrap();
    d.on_message("c").unwrap();
    assert!(raced.load(Ordering::SeqCst), "the race happened");
    let r = d.resolve("c").unwrap();
    assert_eq!(r.frontier.as_ref().map(|f| f.start_seq), Some(1));
    let mut clean = None;
    for s in 152..=170 {
        d.journal().append("c", &[turn(s)]).unwrap();
        match d.on_message("c").unwrap() {
            Outcome::Refused(e) => panic!("message {s}: refused {e:?}"),
            Outcome::Failed(f) => panic!("message {s}: failed {f:?}"),
            _ => {}
        }
        if budget_omissions(&d, s) == 0 && clean.is_none() {
            clean = Some(s);
        }
        if let Some(c) = clean {
            assert_eq!(budget_omissions(&d, s), 0, "clean since {c}");
        }
    }
    assert!(clean.is_some_and(|c| c <= 160), "{clean:?}");
    chain_is_whole(&d);
}

#[test]
fn the_circuit_breaker_through_the_driver_pauses_eager_compaction_never_safety() {
    use foldline_core::plan::{PauseReason, PlanOutcome};
    let (d, down, calls) = outage_driver(tokens(), true);
    let mut outcomes = Vec::new();
    for s in 1..=400 {
        d.journal().append("c", &[turn(s)]).unwrap();
        outcomes.push(d.on_message("c").unwrap());
    }
    let failed = |o: &Outcome| matches!(o, Outcome::Failed(_));
    let open = |o: &Outcome| {
        matches!(
            o,
            Outcome::Paused(PlanOutcome::Paused {
                reason: PauseReason::CircuitOpen,
                ..
            })
        )
    };
    // Three failed attempts open the breaker: the next eager check pauses
    // without a model call.
    let first_pause = outcomes.iter().position(open).expect("the breaker opened");
    let before: Vec<&Outcome> = outcomes[..first_pause]
        .iter()
        .filter(|o| failed(o))
        .collect();
    assert_eq!(
        before.len(),
        3,
        "three consecutive failures before it opens"
    );
    // Past the hard limit every message attempts safety compaction: the
    // outage's last messages all failed (one model call each), none paused.
    let tail = &outcomes[outcomes.len() - 20..];
    assert!(tail.iter().all(failed), "safety compaction is never paused");
    // One model call per failed attempt (a refusal is not replayed), none
    // for a pause: at most one call per message through the whole outage.
    let attempts = outcomes.iter().filter(|o| failed(o)).count() as u64;
    assert_eq!(calls.load(Ordering::SeqCst), attempts);
    // The provider comes back: the next message compacts.
    down.store(false, Ordering::SeqCst);
    d.journal().append("c", &[turn(401)]).unwrap();
    assert!(matches!(d.on_message("c").unwrap(), Outcome::Compacted(_)));
}
