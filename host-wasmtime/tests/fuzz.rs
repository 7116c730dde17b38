//! Loop-level fuzzing of the Rust driver on a SQLite file, the twin of
//! `js/test/journey/fuzz.mjs`: random interleavings of appends (turns, tool
//! calls and results, late deliveries, corrections), automatic and manual
//! compactions, model failures (refusals, dropped and broken streams),
//! crashes before the boundary or the packet store (the dead writer releases
//! nothing), restarts, and concurrent callers (threads on one driver, two
//! drivers on one file, a member appending while a compaction runs) — with
//! the seeds' outcomes (`support/invariants.rs`) after every step, plus:
//! nothing appended is lost, and every accepted manual task ends once.
//!
//! Each case is a seed; a breach names the seed, the step and the last
//! operations. Short profile here (6 cases of 80 steps); a long one:
//! `FOLDLINE_FUZZ_CASES=200 FOLDLINE_FUZZ_STEPS=300 cargo test -p foldline-wasmtime --test fuzz`;
//! one case again: `FOLDLINE_FUZZ_SEED=<seed>`.

mod support;

use std::collections::BTreeMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use foldline_core::boundary::Usage;
use foldline_core::declaration::{Budget, Declaration};
use foldline_core::event::{Correction, Event, Message};
use foldline_core::packet::Packet;
use foldline_core::stream::FailureKind;
use foldline_core::turn::{Part, Role};
use foldline_wasmtime::driver::{Driver, ManualTask, Outcome};
use foldline_wasmtime::error::Result;
use foldline_wasmtime::journal::{Journal, SqliteJournal, StoredEvent};
use foldline_wasmtime::model::{Evidence, Model, ModelError, ModelResult, StreamChunk};
use foldline_wasmtime::runtime::Foldline;
use support::intercept::{Intercept, Write, CRASH};
use support::invariants::check;

const CONV: &str = "fuzz";

fn declaration() -> Declaration {
    let mut d = Declaration::new("assistant", "assistant-compactor");
    d.budget = Budget::Chars {
        trigger: 6_000,
        retain: 2_400,
    };
    d.summary.max_chars = Some(500);
    d
}

/// splitmix64: the same seed, the same case.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// What the model does next: 0 answers, 1 is refused, 2 drops its stream, 3 breaks mid-stream.
#[derive(Default)]
struct Scripted {
    mode: AtomicU8,
    calls: AtomicUsize,
}

impl Scripted {
    fn answer(p: &Packet) -> ModelResult {
        ModelResult {
            text: format!(
                "Summary of {} turns through {}.",
                p.input.turn_count, p.covered_through_turn_id
            ),
            evidence: Evidence {
                model_id: "fuzz-1".into(),
                usage: Usage {
                    input_tokens: 100,
                    output_tokens: 20,
                },
                finish_reason: "stop".into(),
            },
        }
    }
}

/// The one scripted model, shared by every driver of a case.
struct Shared(Arc<Scripted>);

impl Model for Shared {
    fn stream(
        &self,
        p: &Packet,
        sink: &mut dyn FnMut(StreamChunk),
    ) -> std::result::Result<(), ModelError> {
        self.0.calls.fetch_add(1, Ordering::SeqCst);
        let a = Scripted::answer(p);
        match self.0.mode.load(Ordering::SeqCst) {
            1 => return Err(ModelError::new(FailureKind::ProviderRefusal, "refused")),
            2 => return Err(ModelError::from("connection reset")),
            3 => {
                sink(StreamChunk::Delta(a.text[..10].to_owned()));
                return Err(ModelError::from("stream broke after some text"));
            }
            _ => {}
        }
        sink(StreamChunk::Delta(a.text));
        sink(StreamChunk::Done(a.evidence));
        Ok(())
    }
    fn complete(&self, p: &Packet) -> std::result::Result<ModelResult, ModelError> {
        self.0.calls.fetch_add(1, Ordering::SeqCst);
        match self.0.mode.load(Ordering::SeqCst) {
            1 => Err(ModelError::new(FailureKind::ProviderRefusal, "refused")),
            _ => Ok(Scripted::answer(p)),
        }
    }
}

/// Crashes a case arms: the next boundary append or packet store fails as a
/// crash of the process there would; the dead process releases nothing.
#[derive(Default)]
struct Armed {
    boundary: bool,
    packet: bool,
    dead: bool,
}

/// The SQLite journal with those crashes.
fn crashable(inner: SqliteJournal, armed: Arc<Mutex<Armed>>) -> Intercept<SqliteJournal> {
    Intercept {
        crash: Box::new(move |w| {
            let mut a = armed.lock().unwrap_or_else(|p| p.into_inner());
            let hit = match w {
                Write::Append(events) => {
                    a.boundary && events.iter().any(|e| matches!(e, Event::Boundary(_)))
                }
                Write::Packet => a.packet,
                Write::Release => return std::mem::take(&mut a.dead),
            };
            if hit {
                a.boundary = false;
                a.packet = false;
                a.dead = true;
            }
            hit
        }),
        ..Intercept::counting(inner)
    }
}

type D = Driver<Intercept<SqliteJournal>, Shared>;

struct Case {
    db: std::path::PathBuf,
    model: Arc<Scripted>,
    armed: Arc<Mutex<Armed>>,
    /// The last ordinary turn's number.
    k: u64,
    calls: u64,
    /// Turn ids in journal order, as this case appended them.
    appended: Vec<String>,
    late: Vec<u64>,
    /// Accepted manual tasks.
    tasks: Arc<Mutex<Vec<String>>>,
    counts: BTreeMap<&'static str, usize>,
}

impl Case {
    fn driver(&self, holder: &str) -> D {
        Driver::builder(
            Foldline::embedded().unwrap(),
            crashable(SqliteJournal::open(&self.db).unwrap(), self.armed.clone()),
            Shared(self.model.clone()),
        )
        .declaration(declaration())
        .owner("owner")
        .holder(holder)
        // The first driver keeps one conversation: a call for another lets
        // this case's go, to be read again.
        .conversations_kept(if holder == "fuzz-1" { 1 } else { 1_024 })
        .build()
        .unwrap()
    }

    fn message(&mut self, role: Role, parts: Vec<Part>) -> Event {
        self.k += 1;
        let id = format!("t{}", self.k);
        Event::Message(Message::new(CONV, self.k * 10, &id, role, parts))
    }

    fn text(r: &mut Rng) -> String {
        const WORDS: [&str; 10] = [
            "Lisbon", "Porto", "budget", "visa", "train", "hotel", "Ana", "flight", "ferry",
            "ticket",
        ];
        let n = 8
            * (1 + if r.below(10) == 0 {
                r.below(40)
            } else {
                r.below(8)
            });
        let words: Vec<String> = (0..n)
            .map(|_| match r.below(7) {
                0 => r.below(5000).to_string(),
                _ => WORDS[r.below(WORDS.len())].to_owned(),
            })
            .collect();
        format!("{}.", words.join(" "))
    }

    fn append_turns(&mut self, d: &D, r: &mut Rng) {
        let events = if r.below(5) == 0 {
            let call = format!("call-{}", self.k + 1);
            let a = self.message(
                Role::Assistant,
                vec![
                    Part::Text {
                        text: "Checking.".into(),
                    },
                    Part::ToolCall {
                        call_id: call.clone(),
                        name: "search".into(),
                        arguments: "{\"q\":\"hotel\"}".into(),
                        custom: false,
                        provider_options: serde_json::Value::Null,
                    },
                ],
            );
            let t = self.message(
                Role::Tool,
                vec![Part::ToolResult {
                    call_id: call,
                    name: "search".into(),
                    content: Self::text(r),
                    is_error: false,
                }],
            );
            vec![a, t]
        } else {
            let role = if r.below(2) == 0 {
                Role::User
            } else {
                Role::Assistant
            };
            let text = Self::text(r);
            vec![self.message(role, vec![Part::Text { text }])]
        };
        d.journal().append(CONV, &events).unwrap();
        for e in &events {
            if let Event::Message(m) = e {
                self.appended.push(m.turn_id.clone());
            }
        }
    }

    /// Tally an outcome; an injected crash restarts the driver in `slot`; any other error is a breach.
    fn tally(&mut self, r: Result<Outcome>, slot: &mut D, holder: &str) {
        let key = match r {
            Ok(Outcome::Compacted(_)) => "compacted",
            Ok(Outcome::Failed(_)) => "failed",
            Ok(Outcome::Busy) => "busy",
            Ok(Outcome::Refused(_)) => "refused",
            Ok(_) => "other",
            Err(e) if e.to_string().contains(CRASH) => {
                *slot = self.driver(holder);
                "crashes"
            }
            Err(e) => panic!("the driver failed: {e} ({})", e.code()),
        };
        *self.counts.entry(key).or_default() += 1;
    }

    fn manual(&mut self, d: &D) -> Result<Outcome> {
        self.calls += 1;
        let task = ManualTask {
            id: format!("task-{}", self.calls),
            actor: "owner".into(),
            owner: Some("owner".into()),
            session_busy: false,
        };
        let tasks = self.tasks.clone();
        let id = task.id.clone();
        d.compact_task(CONV, &task, &mut |_| tasks.lock().unwrap().push(id.clone()))
    }
}

/// One case: `steps` random operations from `seed`; its counts, or a panic naming the breach.
fn case(seed: u64, steps: usize) -> BTreeMap<&'static str, usize> {
    let dir = tempfile::tempdir().unwrap();
    let mut r = Rng(seed);
    let mut s = Case {
        db: dir.path().join("fuzz.db"),
        model: Arc::new(Scripted::default()),
        armed: Arc::new(Mutex::new(Armed::default())),
        k: 0,
        calls: 0,
        appended: Vec::new(),
        late: Vec::new(),
        tasks: Arc::new(Mutex::new(Vec::new())),
        counts: BTreeMap::new(),
    };
    let mut c = s.driver("fuzz-1");
    let mut other = s.driver("fuzz-2");
    let mut before: Vec<String> = Vec::new();
    let mut log: Vec<String> = Vec::new();
    s.append_turns(&c, &mut r);
    const OPS: [(usize, &str); 12] = [
        (30, "append"),
        (20, "onMessage"),
        (6, "append while compacting"),
        (5, "overlapping onMessage x3"),
        (5, "two drivers"),
        (5, "manual /compact"),
        (3, "late delivery"),
        (3, "correction"),
        (6, "model mode"),
        (3, "arm a crash"),
        (4, "another conversation"),
        (2, "restart"),
    ];
    let total: usize = OPS.iter().map(|o| o.0).sum();
    for step in 0..steps {
        let mut roll = r.below(total);
        let name = OPS
            .iter()
            .find(|(w, _)| {
                let hit = roll < *w;
                roll = roll.saturating_sub(*w);
                hit
            })
            .map_or("append", |o| o.1);
        log.push(format!("{step}:{name}"));
        let result = catch_unwind(AssertUnwindSafe(|| {
            match name {
                "append" => s.append_turns(&c, &mut r),
                "onMessage" => {
                    let out = c.on_message(CONV);
                    s.tally(out, &mut c, "fuzz-1");
                }
                "append while compacting" => {
                    let (out, ()) = std::thread::scope(|t| {
                        let h = t.spawn(|| c.on_message(CONV));
                        s.append_turns(&c, &mut r);
                        (h.join().unwrap(), ())
                    });
                    s.tally(out, &mut c, "fuzz-1");
                }
                "overlapping onMessage x3" => {
                    let outs: Vec<_> = std::thread::scope(|t| {
                        let hs: Vec<_> = (0..3).map(|_| t.spawn(|| c.on_message(CONV))).collect();
                        hs.into_iter().map(|h| h.join().unwrap()).collect()
                    });
                    let compacted = outs
                        .iter()
                        .filter(|o| matches!(o, Ok(Outcome::Compacted(_))))
                        .count();
                    assert!(compacted <= 1, "{compacted} overlapping calls compacted");
                    for out in outs {
                        s.tally(out, &mut c, "fuzz-1");
                    }
                }
                "two drivers" => {
                    let (a, b) = std::thread::scope(|t| {
                        let h = t.spawn(|| other.on_message(CONV));
                        (c.on_message(CONV), h.join().unwrap())
                    });
                    s.tally(a, &mut c, "fuzz-1");
                    s.tally(b, &mut other, "fuzz-2");
                }
                "manual /compact" => {
                    let out = s.manual(&c);
                    s.tally(out, &mut c, "fuzz-1");
                }
                "late delivery" => {
                    let j = 1 + r.below(s.k as usize) as u64;
                    if !s.late.contains(&j) {
                        s.late.push(j);
                        let text = format!("late: {}", Case::text(&mut r));
                        let id = format!("late-{j}");
                        let e = Message::new(
                            CONV,
                            j * 10 + 5,
                            &id,
                            Role::User,
                            vec![Part::Text { text }],
                        );
                        c.journal().append(CONV, &[Event::LateDelivery(e)]).unwrap();
                        s.appended.push(format!("late-{j}"));
                    }
                }
                "correction" => {
                    let turns: Vec<&String> =
                        s.appended.iter().filter(|t| t.starts_with('t')).collect();
                    if !turns.is_empty() {
                        let target = turns[r.below(turns.len())].clone();
                        s.calls += 1;
                        let text = format!("corrected: {}", Case::text(&mut r));
                        c.journal()
                            .append(
                                CONV,
                                &[Event::Correction(Correction {
                                    turn_id: target,
                                    correction_seq: s.calls,
                                    parts: vec![Part::Text { text }],
                                    tokens: None,
                                })],
                            )
                            .unwrap();
                    }
                }
                "another conversation" => {
                    // Racing this conversation's check or not.
                    let elsewhere = format!("elsewhere-{}", r.below(3));
                    if r.below(2) == 0 {
                        c.position(&elsewhere).unwrap();
                    } else {
                        let out = std::thread::scope(|t| {
                            let check = t.spawn(|| c.on_message(CONV));
                            c.position(&elsewhere).unwrap();
                            check.join().unwrap()
                        });
                        s.tally(out, &mut c, "fuzz-1");
                    }
                }
                "model mode" => {
                    let mode = [0, 0, 0, 1, 2, 3][r.below(6)];
                    s.model.mode.store(mode, Ordering::SeqCst);
                }
                "arm a crash" => {
                    let mut a = s.armed.lock().unwrap();
                    if r.below(2) == 0 {
                        a.boundary = true;
                    } else {
                        a.packet = true;
                    }
                }
                _ => c = s.driver("fuzz-1"),
            }
            before = check(&c, CONV, &before, step);
            // Nothing appended is lost: every turn is in the journal, in order.
            let stored = c.journal().read_events(CONV, 0).unwrap();
            let turns: Vec<&str> = stored
                .iter()
                .filter_map(|x| match &x.event {
                    Event::Message(m) | Event::LateDelivery(m) => Some(m.turn_id.as_str()),
                    _ => None,
                })
                .collect();
            assert_eq!(
                turns, s.appended,
                "an appended turn is missing or out of order"
            );
            for task in s.tasks.lock().unwrap().iter() {
                let ends = task_ends(&stored, task);
                assert!(ends <= 1, "task {task} ended {ends} times");
            }
        }));
        if let Err(p) = result {
            let why = p
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| p.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                .unwrap_or_default();
            let last = log[log.len().saturating_sub(12)..].join(", ");
            panic!("fuzz seed {seed}, step {step} ({name}): {why}\n  last operations: {last}");
        }
    }
    // The end: a healthy model and a fresh driver end every interrupted task.
    s.model.mode.store(0, Ordering::SeqCst);
    *s.armed.lock().unwrap() = Armed::default();
    let c = s.driver("fuzz-1");
    assert!(
        c.end_interrupted(CONV).unwrap(),
        "seed {seed}: the lease is free"
    );
    let stored = c.journal().read_events(CONV, 0).unwrap();
    for task in s.tasks.lock().unwrap().iter() {
        assert_eq!(task_ends(&stored, task), 1, "seed {seed}: task {task}");
    }
    *s.counts.entry("turns").or_default() += s.appended.len();
    *s.counts.entry("model calls").or_default() += s.model.calls.load(Ordering::SeqCst);
    s.counts
}

fn task_ends(stored: &[StoredEvent], task: &str) -> usize {
    stored
        .iter()
        .filter(|x| {
            matches!(&x.event, Event::CompactionTask(t) if t.task_id == task
                && t.state != foldline_core::event::TaskState::Requested)
        })
        .count()
}

fn env(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

#[test]
fn random_interleavings_keep_every_seed_outcome() {
    let steps = env("FOLDLINE_FUZZ_STEPS", 80) as usize;
    let seeds: Vec<u64> = match std::env::var("FOLDLINE_FUZZ_SEED") {
        Ok(s) => vec![s.parse().unwrap()],
        Err(_) => (1..=env("FOLDLINE_FUZZ_CASES", 6)).collect(),
    };
    let mut total: BTreeMap<&str, usize> = BTreeMap::new();
    for seed in &seeds {
        for (k, v) in case(*seed, steps) {
            *total.entry(k).or_default() += v;
        }
    }
    eprintln!(
        "loop fuzzing: {} cases of {steps} steps: {total:?}",
        seeds.len()
    );
    assert!(
        total.get("compacted").copied().unwrap_or(0) > 0,
        "never compacted"
    );
}
