//! The JS journey's script (`js/test/journey/journey.mjs`: the same
//! messages, corrections, manual tasks and flaky model) through the Rust
//! driver on a SQLite file. Prints one JSON object — counts, and SHA-256
//! digests of the final journal (its events without default-valued members,
//! canonically encoded, one per line) and of the final OpenAI-format
//! context — which `js/test/journey/run.mjs` compares with what the JS
//! driver wrote in Node, Chromium and workerd (`tests/run` points it here
//! with `FOLDLINE_JOURNEY_RUST`).
//!
//! `target/debug/examples/journey [turns]` (default 600);
//! `FOLDLINE_JOURNEY_DUMP=file` also writes the journal's lines there.

use std::sync::atomic::Ordering;

use foldline_core::canonical;
use foldline_core::declaration::{Budget, Declaration};
use foldline_core::event::{Correction, Event};
use foldline_core::format::Format;
use foldline_core::packet::Packet;
use foldline_core::turn::{Part, Role, Route};
use foldline_wasmtime::driver::{ContextOptions, Driver, ManualTask, Outcome};
use foldline_wasmtime::error::HostError;
use foldline_wasmtime::journal::{Journal, SqliteJournal};
use foldline_wasmtime::model::{Evidence, Model, ModelError, ModelResult, StreamChunk};
use foldline_wasmtime::runtime::Foldline;
use sha2::{Digest, Sha256};

const TOPICS: [&str; 6] = [
    "the Lisbon flat",
    "the Porto train",
    "the budget",
    "Ana's visa",
    "the Douro tour",
    "the return flight",
];
const ID: &str = "journey";

/// One step: OpenAI chat messages as JSON lines, and whether a member
/// corrects or asks `/compact` (as `script` in journey.mjs).
struct Step {
    lines: String,
    correct: bool,
    manual: bool,
}

fn script(turns: usize) -> Vec<Step> {
    let json = |s: &str| serde_json::to_string(s).expect("a string");
    let mut steps = vec![Step {
        lines: r#"{"role":"system","content":"You are a travel planner. Keep every booking reference."}"#.to_owned() + "\n",
        correct: false,
        manual: false,
    }];
    for i in 1..turns {
        let topic = TOPICS[i % TOPICS.len()];
        let lines = if i % 9 == 4 {
            let args = format!("{{\"q\":{},\"day\":{}}}", json(topic), i % 10);
            format!(
                "{}\n{}\n",
                serde_json::json!({"role": "assistant", "content": format!("Checking {topic}."),
                    "tool_calls": [{"id": format!("call-{i}"), "type": "function", "function": {"name": "search", "arguments": args}}]}),
                serde_json::json!({"role": "tool", "tool_call_id": format!("call-{i}"),
                    "content": format!("Found 3 options for {topic}: {} euros, booking ref FL-{}.", 120 + i % 40, 1000 + i)}),
            )
        } else if i % 2 == 1 {
            let text = format!(
                "Question {i}: what about {topic} on day {}? We have {} euros left. ",
                i % 10,
                900 + i
            )
            .repeat(3);
            format!("{}\n", serde_json::json!({"role": "user", "content": text}))
        } else {
            let text = format!(
                "Answer {i}: for {topic}, I propose option {}; decided with Ana on step {i}. ",
                i % 4
            )
            .repeat(3);
            format!(
                "{}\n",
                serde_json::json!({"role": "assistant", "content": text})
            )
        };
        steps.push(Step {
            lines,
            correct: i % 97 == 96,
            manual: i % 150 == 149,
        });
    }
    steps
}

#[path = "../tests/support/flaky.rs"]
mod flaky;
use flaky::Flaky;
#[path = "../tests/support/intercept.rs"]
#[allow(dead_code)]
mod intercept;
use intercept::{Intercept, Write};

/// The journey's summaries (as `flakyModel`'s answer in journey.mjs), wrapped
/// in [`Flaky`] for its failures.
struct Fixed;

fn answer(p: &Packet) -> ModelResult {
    ModelResult {
        text: format!(
            "Summary of {} turns through {}: plans for {}.",
            p.input.turn_count,
            p.covered_through_turn_id,
            TOPICS.join(", ")
        ),
        evidence: Evidence {
            model_id: "journey-1".into(),
            usage: foldline_core::boundary::Usage {
                input_tokens: 1000,
                output_tokens: 40,
            },
            finish_reason: "stop".into(),
        },
    }
}

impl Model for Fixed {
    fn stream(&self, p: &Packet, sink: &mut dyn FnMut(StreamChunk)) -> Result<(), ModelError> {
        let a = answer(p);
        sink(StreamChunk::Delta(a.text));
        sink(StreamChunk::Done(a.evidence));
        Ok(())
    }

    fn complete(&self, p: &Packet) -> Result<ModelResult, ModelError> {
        Ok(answer(p))
    }
}

/// An event without its default-valued members (`""`, `0`, `false`,
/// `null`, `[]`), as `withoutDefaults` in journey.mjs: the Rust host writes
/// them out where the JS driver omits them, and decoding gives absent
/// members exactly those values.
fn without_defaults(v: serde_json::Value) -> serde_json::Value {
    use serde_json::Value;
    let default = |x: &Value| match x {
        Value::Null => true,
        Value::Bool(b) => !b,
        Value::Number(n) => n.as_u64() == Some(0),
        Value::String(s) => s.is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::Object(_) => false,
    };
    match v {
        Value::Object(m) => Value::Object(
            m.into_iter()
                .filter(|(_, x)| !default(x))
                .map(|(k, x)| (k, without_defaults(x)))
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.into_iter().map(without_defaults).collect()),
        other => other,
    }
}

fn hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn main() {
    let turns: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(600);
    let dir = tempfile::tempdir().expect("a temp dir");
    let db = dir.path().join("journey.db");
    let model = std::sync::Arc::new(Flaky::new(Fixed));
    // The policy upgrade five sixths of the way in (as UPGRADED in
    // journey.mjs): a shorter summary bound, a new epoch.
    let driver = |upgraded: bool| {
        let mut decl = Declaration::new("assistant", "assistant-compactor");
        decl.budget = Budget::Chars {
            trigger: 20_000,
            retain: 8_000,
        };
        decl.summary.max_chars = Some(if upgraded { 1_200 } else { 1_500 });
        Driver::builder(
            Foldline::embedded().expect("artifact"),
            failing_once(SqliteJournal::open(&db).expect("journal")),
            Shared(model.clone()),
        )
        .declaration(decl)
        .owner("owner")
        .build()
        .unwrap()
    };
    let route = Route {
        conversation: ID.into(),
        chat: String::new(),
        sender: String::new(),
    };
    let mut upgraded = false;
    let mut d = driver(upgraded);
    let (mut compacted, mut failed, mut manual, mut corrections) = (0, 0, 0, 0);
    let (mut races, mut crashes, mut upgrades) = (0, 0, 0);
    let (mut users, mut callers): (Vec<String>, Vec<String>) = (Vec::new(), Vec::new());
    let mut last_seq = 0;
    for (step, s) in script(turns).into_iter().enumerate() {
        let events = foldline_wasmtime::import::parse(&s.lines, &route, last_seq)
            .expect("the script parses");
        for e in &events {
            if let Event::Message(m) = e {
                last_seq = m.source_seq;
                if m.role == Role::User {
                    users.push(m.turn_id.clone());
                }
                if m.parts.iter().any(|p| matches!(p, Part::ToolCall { .. })) {
                    callers.push(m.turn_id.clone());
                }
            }
        }
        d.journal().append(ID, &events).expect("append");
        let target = if (step / 97) % 2 == 0 {
            users.len().checked_sub(2).map(|i| users[i].clone())
        } else {
            callers.last().cloned()
        };
        if let (true, Some(target)) = (s.correct, target) {
            let text = format!("corrected at step {step}: the budget is 1,200 euros.");
            let c = Event::Correction(Correction {
                turn_id: target,
                correction_seq: step as u64,
                parts: vec![Part::Text { text }],
                tokens: None,
            });
            d.journal().append(ID, &[c]).expect("append");
            corrections += 1;
        }
        if step == turns * 2 / 3 {
            ARMED.store(true, Ordering::SeqCst);
        }
        let outcome = if ARMED.load(Ordering::SeqCst) && !FIRED.load(Ordering::SeqCst) {
            match d.on_message(ID) {
                Ok(o) => o,
                Err(HostError::Storage(e)) if e.contains(intercept::CRASH) => {
                    // The process "restarts": a new driver over the same file.
                    crashes += 1;
                    d = driver(upgraded);
                    Outcome::Busy
                }
                Err(e) => panic!("step {step}: {e}"),
            }
        } else if s.manual {
            manual += 1;
            let task = ManualTask {
                id: format!("task-{step}"),
                actor: "owner".into(),
                owner: Some("owner".into()),
                session_busy: false,
            };
            d.compact_task(ID, &task, &mut |_| {}).expect("manual")
        } else {
            // The JS journey races two compactors here; the lease lets one
            // through and the other writes nothing, so one call is the same
            // journal (the Rust driver's own races are in its tests).
            if step % 61 == 60 {
                races += 1;
            }
            d.on_message(ID).expect("on_message")
        };
        match outcome {
            Outcome::Compacted(_) => compacted += 1,
            Outcome::Failed(_) => failed += 1,
            _ => {}
        }
        if step == turns / 2 {
            d = driver(upgraded);
        }
        if step == turns * 5 / 6 {
            upgraded = true;
            upgrades += 1;
            d = driver(upgraded);
        }
    }
    let lines: Vec<String> = d
        .journal()
        .read_events(ID, 0)
        .expect("read")
        .iter()
        .map(|s| {
            let v = serde_json::from_slice(&canonical::encode(&s.event)).expect("an event");
            String::from_utf8(canonical::encode_value(&without_defaults(v))).expect("utf-8")
        })
        .collect();
    if let Ok(path) = std::env::var("FOLDLINE_JOURNEY_DUMP") {
        std::fs::write(path, lines.join("\n") + "\n").expect("dump");
    }
    let ctx = d
        .context(
            ID,
            ContextOptions {
                format: Format::Openai,
                ..ContextOptions::default()
            },
        )
        .expect("context");
    let out = serde_json::json!({
        "compacted": compacted, "failed": failed, "manual": manual, "corrections": corrections, "races": races, "crashes": crashes, "upgrades": upgrades,
        "events": lines.len(),
        "journal": hex(lines.join("\n").as_bytes()),
        "context": hex(&canonical::encode(&ctx)),
    });
    println!("{out}");
}

/// Armed at two thirds of the journey: the first boundary append after it
/// fails (as `failingOnce` in journey.mjs), as a crash between the stored
/// packet and the boundary would.
static ARMED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
static FIRED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// The SQLite journal with that one injected failure.
fn failing_once(inner: SqliteJournal) -> Intercept<SqliteJournal> {
    Intercept {
        crash: Box::new(|w| {
            matches!(w, Write::Append(events) if events.iter().any(|e| matches!(e, Event::Boundary(_))))
                && ARMED.load(Ordering::SeqCst)
                && !FIRED.swap(true, Ordering::SeqCst)
        }),
        ..Intercept::counting(inner)
    }
}

/// The one flaky model, kept across the restart (its call count goes on).
struct Shared(std::sync::Arc<Flaky<Fixed>>);

impl Model for Shared {
    fn stream(&self, p: &Packet, sink: &mut dyn FnMut(StreamChunk)) -> Result<(), ModelError> {
        self.0.stream(p, sink)
    }
    fn complete(&self, p: &Packet) -> Result<ModelResult, ModelError> {
        self.0.complete(p)
    }
}
