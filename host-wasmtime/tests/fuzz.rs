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
//! one case again: `FOLDLINE_FUZZ_SEED=<seed>`. Also here: the raw events an
//! import takes, each through the driver's append check, never leave a
//! conversation without a context or a chain that verifies.

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

/// The steps per case and the seeds to run: the short profile's unless
/// `FOLDLINE_FUZZ_STEPS`, `FOLDLINE_FUZZ_CASES` or `FOLDLINE_FUZZ_SEED` say.
fn profile(steps: u64, cases: u64) -> (usize, Vec<u64>) {
    let seeds = match std::env::var("FOLDLINE_FUZZ_SEED") {
        Ok(s) => vec![s.parse().unwrap()],
        Err(_) => (1..=env("FOLDLINE_FUZZ_CASES", cases)).collect(),
    };
    (env("FOLDLINE_FUZZ_STEPS", steps) as usize, seeds)
}

#[test]
fn random_interleavings_keep_every_seed_outcome() {
    let (steps, seeds) = profile(80, 6);
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

/// One raw event of the kinds only an import writes, made from the journal
/// as it stands: a correction of any turn (empty to far past every bound),
/// a late delivery (of a turn it holds, or a new one at an old position), a
/// frontier or boundary it holds with one field changed, a failure or task
/// record, a system, tool or ordinary turn.
fn raw_event(rng: &mut Rng, stored: &[StoredEvent]) -> Option<Event> {
    let turns: Vec<&Message> = stored
        .iter()
        .filter_map(|s| match &s.event {
            Event::Message(m) | Event::LateDelivery(m) => Some(m),
            _ => None,
        })
        .collect();
    let next = turns.iter().map(|m| m.source_seq).max().unwrap_or(0) + 1;
    let text = |n: usize| {
        vec![Part::Text {
            text: "z".repeat(n),
        }]
    };
    let sizes = [0, 5, 300, 3_000, 9_000, 500_000];
    let turn = |rng: &mut Rng, role: Role, parts: Vec<Part>| {
        let mut m = (*turns[rng.below(turns.len())]).clone();
        (m.source_seq, m.turn_id, m.role, m.parts) =
            (next, format!("raw-{}", rng.next()), role, parts);
        (m.content_hash, m.tokens, m.pinned) = (None, None, false);
        m
    };
    Some(match rng.below(9) {
        0 | 1 => Event::Correction(Correction {
            turn_id: turns[rng.below(turns.len())].turn_id.clone(),
            correction_seq: 1 + rng.below(4) as u64,
            parts: text(sizes[rng.below(sizes.len())]),
            tokens: None,
        }),
        2 => {
            let mut m = (*turns[rng.below(turns.len())]).clone();
            if rng.below(2) == 0 {
                (m.turn_id, m.source_seq) = (format!("late-{}", rng.next()), 1 + rng.below(next as usize) as u64);
            }
            (m.parts, m.content_hash) = (text([5, 3_000][rng.below(2)]), None);
            Event::LateDelivery(m)
        }
        3 | 4 => {
            let kind = ["frontier", "boundary"][rng.below(2)];
            let held: Vec<_> = stored.iter().filter(|s| foldline_wasmtime::journal::type_of(&s.event) == kind).collect();
            let mut v = serde_json::to_value(&held.get(rng.below(held.len()))?.event).ok()?;
            let keys: Vec<String> = v.as_object()?.keys().filter(|k| *k != "type").cloned().collect();
            let key = &keys[rng.below(keys.len())];
            v[key] = match &v[key] {
                serde_json::Value::String(s) => format!("{s}x").into(),
                serde_json::Value::Number(n) => (n.as_u64()? + 1).into(),
                serde_json::Value::Bool(b) => (!b).into(),
                _ => return None,
            };
            serde_json::from_value(v).ok()?
        }
        5 => serde_json::from_value(serde_json::json!({"type": "compactionFailed", "runId": format!("r{}", rng.next()),
            "packetId": "p", "trigger": "manual", "headSeq": rng.below(next as usize + 5), "kind": "other", "reason": "x"})).ok()?,
        6 => {
            let (role, size) = ([Role::System, Role::Developer][rng.below(2)], [10, 1_200][rng.below(2)]);
            Event::Message(turn(rng, role, text(size)))
        }
        7 => {
            let id = format!("k{}", rng.below(3));
            let part = match rng.below(2) {
                0 => Part::ToolCall { call_id: id, name: "f".into(), arguments: "{}".into(), custom: false, provider_options: serde_json::Value::Null },
                _ => serde_json::from_value(serde_json::json!({"type": "toolResult", "callId": id, "content": "r".repeat(1_000)})).ok()?,
            };
            let role = [Role::Assistant, Role::Tool][rng.below(2)];
            Event::Message(turn(rng, role, vec![part]))
        }
        _ => Event::Message(turn(rng, Role::User, text(300))),
    })
}

/// What an import takes — raw events of every kind, each checked by the
/// driver's append check before it is written — never leaves the
/// conversation without a context or a chain that verifies: after every
/// accepted event both still answer (the newest turns past the room pinned
/// turns near their bound leave, and an amendment in force beside them,
/// may wait for the next compaction: then ordinary turns must bring the
/// context back). Short profile: 3 cases of 60 events; a long one:
/// `FOLDLINE_FUZZ_CASES=50 FOLDLINE_FUZZ_STEPS=300 cargo test -p foldline-wasmtime --test fuzz raw`.
#[test]
fn raw_events_the_check_takes_never_break_a_conversation() {
    let (steps, seeds) = profile(60, 3);
    let (mut taken, mut refused) = (0, 0);
    for seed in seeds {
        let dir = tempfile::tempdir().unwrap();
        let journal = SqliteJournal::open(dir.path().join("j.db")).unwrap();
        let d = Driver::checked(
            Foldline::embedded().unwrap(),
            journal,
            foldline_wasmtime::model::Extractive,
            declaration(),
        )
        .unwrap();
        let mut rng = Rng(seed);
        let say = |d: &Driver<SqliteJournal, foldline_wasmtime::model::Extractive>,
                   rng: &mut Rng| {
            let text = "y".repeat(20 + rng.below(600));
            d.append(
                CONV,
                &serde_json::json!({"role": "user", "content": text}).to_string(),
            )
            .unwrap();
            d.on_message(CONV).unwrap();
        };
        for _ in 0..30 {
            say(&d, &mut rng);
        }
        for step in 0..steps {
            let Some(e) = raw_event(&mut rng, &d.journal().read_events(CONV, 0).unwrap()) else {
                continue;
            };
            let batch = [e];
            let ok =
                d.check_events(CONV, &batch).is_ok() && d.journal().append(CONV, &batch).is_ok();
            if !ok {
                refused += 1;
                continue;
            }
            taken += 1;
            let usable = |d: &Driver<_, _>| {
                d.resolve(CONV).is_ok() && d.context(CONV, Default::default()).is_ok()
            };
            let mut recovered = usable(&d);
            for _ in 0..8 {
                if recovered {
                    break;
                }
                say(&d, &mut rng);
                recovered = usable(&d);
            }
            assert!(
                recovered,
                "seed {seed}, step {step}: after {:?}: {:?} / {:?}",
                batch[0],
                d.resolve(CONV).err(),
                d.context(CONV, Default::default()).err()
            );
            say(&d, &mut rng);
        }
    }
    eprintln!("raw events: {taken} taken, {refused} refused");
    assert!(taken > 0 && refused > 0, "{taken} taken, {refused} refused");
}
