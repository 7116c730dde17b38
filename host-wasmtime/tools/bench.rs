//! The Rust side of `tests/bench/run`: writes the deterministic workloads for
//! Node and Python, and measures the native core and the wasmtime host in the
//! same process. Prints one JSON object.
//!
//! `cargo run -p foldline-wasmtime --example bench -- OUT_DIR [--quick]`

use std::time::{Duration, Instant};

use foldline_core::api;
use foldline_core::declaration::{Budget, Declaration};
use foldline_core::event::Event;
use foldline_wasmtime::runtime::{Bound, Foldline, Limits, EMBEDDED_WASM};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

// The same W1 generator as the core's criterion benchmarks, not a copy.
#[path = "../../core/benches/workload/mod.rs"]
mod workload;

/// A W1 turn as the journal stores it: hashed once when it entered.
fn turn(seq: u64) -> Event {
    let mut e = workload::turn(seq);
    if let Event::Message(m) = &mut e {
        m.content_hash = Some(foldline_core::turn::content_hash(&m.parts));
    }
    e
}

use workload::system;

/// W1 turn `s` of the conversation `c` as a driver's default route sees it.
fn say(s: u64) -> Event {
    say_in("c", s)
}

/// Turn `s` of the workload in conversation `conv`.
fn say_in(conv: &str, s: u64) -> Event {
    let mut e = workload::turn(s);
    if let Event::Message(m) = &mut e {
        m.conversation = conv.into();
        m.chat = String::new();
        m.sender = String::new();
    }
    e
}

fn decl() -> Declaration {
    let mut d = Declaration::new("assistant", "assistant-compactor");
    d.budget = Budget::Chars {
        trigger: 80_000,
        retain: 40_000,
    };
    d
}

fn call_ok(entry: &str, req: &[u8]) -> Value {
    let out: Value = serde_json::from_slice(&api::call(entry, req)).unwrap();
    assert!(
        out.get("ok").is_some(),
        "{entry}: {}",
        out.to_string().chars().take(300).collect::<String>()
    );
    out
}

/// The per-message requests a host sends when `history` turns lie behind the
/// boundary and `tail` turns follow it: plan (a skip) and select.
fn per_message(history: u64, tail: u64) -> (Vec<u8>, Vec<u8>) {
    let d = decl();
    let activate = json!({"declaration": d, "route": {"conversation": "bench", "chat": "c", "sender": "s"}, "events": [turn(1)]});
    let frontier = call_ok("plan", activate.to_string().as_bytes())["ok"]["frontier"].clone();
    let head = json!({"boundaryId": "boundary:w1", "boundaryHash": "sha256:w1", "coveredThroughSeq": history, "coveredThroughTurnId": format!("t{history}"), "frontierId": frontier["id"], "summary": "s".repeat(4_000), "length": 1 + history / 150});
    let mut events = vec![system()];
    events.extend((history + 1..=history + tail).map(turn));
    let plan = json!({"declaration": d, "route": {"conversation": "bench", "chat": "c", "sender": "s"}, "frontier": frontier, "head": head, "events": events});
    let select = json!({"declaration": d, "route": {"conversation": "bench", "chat": "c", "sender": "s"}, "frontier": frontier, "head": head, "events": events, "format": "openai"});
    (
        plan.to_string().into_bytes(),
        select.to_string().into_bytes(),
    )
}

fn median(mut f: impl FnMut(), budget: Duration, min_runs: usize) -> f64 {
    let mut samples = Vec::new();
    let start = Instant::now();
    while samples.len() < min_runs || start.elapsed() < budget {
        let t = Instant::now();
        f();
        samples.push(t.elapsed().as_secs_f64());
        if samples.len() > 100_000 {
            break;
        }
    }
    samples.sort_by(|a, b| a.partial_cmp(b).unwrap());
    samples[samples.len() / 2]
}

/// Rounds of [`medians_in_turns`].
const TURNS: usize = 6;

/// The medians of `fs`, measured in turns: in each of [`TURNS`] rounds each
/// runs for its share of `budget` (and at least its share of `min_runs`
/// times), so the machine's drift reaches all of them alike.
fn medians_in_turns(fs: &mut [&mut dyn FnMut()], budget: Duration, min_runs: usize) -> Vec<f64> {
    let mut samples = vec![Vec::new(); fs.len()];
    for _ in 0..TURNS {
        for (f, s) in fs.iter_mut().zip(&mut samples) {
            let start = Instant::now();
            let runs = s.len() + min_runs.div_ceil(TURNS);
            while s.len() < runs || start.elapsed() < budget / TURNS as u32 {
                let t = Instant::now();
                f();
                s.push(t.elapsed().as_secs_f64());
            }
        }
    }
    samples
        .into_iter()
        .map(|mut s| {
            s.sort_by(|a, b| a.partial_cmp(b).unwrap());
            s[s.len() / 2]
        })
        .collect()
}

/// The artifact under test, under `bound`: the embedded one, or the `.wasm`
/// file `FOLDLINE_BENCH_WASM` names (to compare two builds with one binary).
fn artifact(bound: Bound) -> Foldline {
    let limits = Limits {
        bound,
        ..Limits::default()
    };
    match std::env::var_os("FOLDLINE_BENCH_WASM") {
        Some(p) => Foldline::from_file(std::path::Path::new(&p), limits).unwrap(),
        None => Foldline::from_bytes(EMBEDDED_WASM, limits).unwrap(),
    }
}

/// What the `foldline` program pays per message: append the member's turn,
/// `on_message`, `context`, through the driver over a SQLite journal file on
/// the seed-002 token defaults, after `history` turns were written to the
/// journal before the driver started. `hold`: the driver holds the live
/// events in the core's instance (the default) or sends them whole with
/// every call. The runs compared are stepped in turn, one message of each
/// (`main`), so the machine's drift reaches them alike.
struct PerMessage {
    driver: foldline_wasmtime::driver::Driver<
        foldline_wasmtime::journal::SqliteJournal,
        foldline_wasmtime::model::Extractive,
    >,
    next: u64,
    samples: Vec<f64>,
    compactions: usize,
}

impl PerMessage {
    fn new(dir: &std::path::Path, history: u64, hold: bool) -> PerMessage {
        use foldline_wasmtime::driver::Driver;
        use foldline_wasmtime::journal::SqliteJournal;
        let path = dir.join(format!("driver-{history}-{hold}.db"));
        let _ = std::fs::remove_file(&path);
        // The builder's defaults: the assistant target on the seed's token budget.
        let driver = Driver::builder(
            artifact(Bound::default()),
            SqliteJournal::open(&path).unwrap(),
            foldline_wasmtime::model::Extractive,
        )
        .hold_events(hold)
        .build()
        .unwrap();
        write_history(driver.journal(), history);
        driver.on_message("c").unwrap(); // the first call reads the history once
        PerMessage {
            driver,
            next: history + 1,
            samples: Vec::new(),
            compactions: 0,
        }
    }

    /// One message, timed.
    fn message(&mut self) {
        use foldline_wasmtime::driver::{ContextOptions, Outcome};
        use foldline_wasmtime::journal::Journal;
        let t = Instant::now();
        self.driver
            .journal()
            .append("c", &[say(self.next)])
            .unwrap();
        if let Outcome::Compacted(_) = self.driver.on_message("c").unwrap() {
            self.compactions += 1;
        }
        self.driver.context("c", ContextOptions::default()).unwrap();
        self.samples.push(t.elapsed().as_secs_f64());
        self.next += 1;
    }

    /// The median seconds per message.
    fn median(mut self) -> f64 {
        assert!(self.compactions > 0, "the driver benchmark never compacted");
        self.samples.sort_by(|a, b| a.total_cmp(b));
        self.samples[self.samples.len() / 2]
    }
}

/// One compaction through the program's driver (SQLite file, a warm
/// driver) when the chain already holds `short` boundaries and when it
/// holds `long`: the median time of the message that compacts (append,
/// `on_message`), over `samples` compactions of each. Two conversations of
/// one driver: both chains are built first, then their compactions
/// alternate, one of each in turn (the short chain grows by `samples` as
/// they run), so the machine's drift reaches both alike. A small character
/// budget, so a compaction comes every few turns.
fn compaction_growth(
    dir: &std::path::Path,
    short: usize,
    long: usize,
    samples: usize,
) -> (f64, f64) {
    use foldline_wasmtime::driver::{Driver, Outcome};
    use foldline_wasmtime::journal::{Journal, SqliteJournal};
    let path = dir.join("compaction-growth.db");
    let _ = std::fs::remove_file(&path);
    let mut d = Declaration::new("assistant", "assistant-compactor");
    d.budget = Budget::Chars {
        trigger: 6_000,
        retain: 2_000,
    };
    d.summary.max_chars = Some(400);
    let driver = Driver::new(
        artifact(Bound::default()),
        SqliteJournal::open(&path).unwrap(),
        foldline_wasmtime::model::Extractive,
        d,
    );
    let mut s = 1;
    // Messages appended to `conv` until one compacts: that message's time.
    let mut compact_once = |conv: &str| loop {
        let t = Instant::now();
        driver.journal().append(conv, &[say_in(conv, s)]).unwrap();
        s += 1;
        if let Outcome::Compacted(_) = driver.on_message(conv).unwrap() {
            return t.elapsed().as_secs_f64();
        }
    };
    for (conv, length) in [("short", short), ("long", long)] {
        for _ in 0..length {
            compact_once(conv);
        }
    }
    let (mut a, mut b) = (Vec::new(), Vec::new());
    for _ in 0..samples {
        a.push(compact_once("short"));
        b.push(compact_once("long"));
    }
    let median = |mut v: Vec<f64>| {
        v.sort_by(|x, y| x.total_cmp(y));
        v[v.len() / 2]
    };
    (median(a), median(b))
}

/// Turns 1..=`history` of conversation `c`, appended in batches of 1,000.
fn write_history(journal: &impl foldline_wasmtime::journal::Journal, history: u64) {
    let mut s = 1;
    while s <= history {
        let batch: Vec<Event> = (s..(s + 1_000).min(history + 1)).map(say).collect();
        journal.append("c", &batch).unwrap();
        s += 1_000;
    }
}

/// A timeline page (the latest 200 items) drawn right after a write,
/// through the program's driver on a SQLite file of `history` messages:
/// with the conversation's text kept between drawings (the default) and
/// with none kept (each drawing reads and encodes the whole conversation),
/// two drivers on the same file, a write and a drawing of each in turn.
/// The median seconds of each drawing.
fn timeline_after_write(dir: &std::path::Path, history: u64, samples: usize) -> (f64, f64) {
    use foldline_wasmtime::driver::{Driver, Page};
    use foldline_wasmtime::journal::{Journal, SqliteJournal};
    let path = dir.join("timeline-after-write.db");
    let _ = std::fs::remove_file(&path);
    let driver = |kept: usize| {
        Driver::builder(
            artifact(Bound::default()),
            SqliteJournal::open(&path).unwrap(),
            foldline_wasmtime::model::Extractive,
        )
        .timeline_text_bytes(kept)
        .build()
        .unwrap()
    };
    let drivers = [
        driver(foldline_core::defaults::TIMELINE_TEXT_BYTES as usize),
        driver(0),
    ];
    write_history(drivers[0].journal(), history);
    let mut s = history + 1;
    let page = Page {
        limit: Some(200),
        before: None,
    };
    let mut times = [Vec::new(), Vec::new()];
    for k in 0..=samples {
        for (d, t) in drivers.iter().zip(&mut times) {
            d.journal().append("c", &[say(s)]).unwrap();
            s += 1;
            d.on_message("c").unwrap();
            let start = Instant::now();
            d.timeline_at("c", page).unwrap();
            // The first drawing of each reads the conversation whole.
            if k > 0 {
                t.push(start.elapsed().as_secs_f64());
            }
        }
    }
    let [kept, whole] = times.map(|mut v| {
        v.sort_by(|x, y| x.total_cmp(y));
        v[v.len() / 2]
    });
    (kept, whole)
}

/// One SHA-256 pass over `bytes` inside WebAssembly under wasmtime (the
/// `sha-floor` probe of tests/bench, sha2 compiled as the artifact compiles
/// it): the least any settle under a WebAssembly runtime can cost, since it
/// hashes the packet at least once. `None` without the probe.
fn sha256_in_wasmtime(bytes: &[u8], budget: Duration) -> Option<f64> {
    let path = std::env::var_os("FOLDLINE_SHA_FLOOR_WASM")?;
    let engine = wasmtime::Engine::default();
    let module = wasmtime::Module::from_file(&engine, path).expect("sha-floor probe");
    let mut store = wasmtime::Store::new(&engine, ());
    let instance = wasmtime::Instance::new(&mut store, &module, &[]).expect("instantiate");
    let alloc = instance
        .get_typed_func::<u32, u32>(&mut store, "alloc")
        .expect("alloc");
    let hash = instance
        .get_typed_func::<(u32, u32), u32>(&mut store, "hash")
        .expect("hash");
    let memory = instance.get_memory(&mut store, "memory").expect("memory");
    let len = u32::try_from(bytes.len()).expect("packet under 4 GiB");
    let ptr = alloc.call(&mut store, len).expect("alloc");
    memory
        .write(&mut store, ptr as usize, bytes)
        .expect("write");
    Some(median(
        || {
            hash.call(&mut store, (ptr, len)).expect("hash");
        },
        budget,
        50,
    ))
}

/// One message natively: plan then select on the request bytes, median seconds.
fn native_per_message(plan: &[u8], select: &[u8], budget: Duration) -> f64 {
    median(
        || {
            api::call("plan", plan);
            api::call("select", select);
        },
        budget,
        20,
    )
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let out = std::path::PathBuf::from(
        args.get(1)
            .cloned()
            .unwrap_or_else(|| "target/bench".into()),
    );
    let quick = args.iter().any(|a| a == "--quick");
    let budget = Duration::from_millis(if quick { 600 } else { 3_000 });
    if args.iter().any(|a| a == "--native-turn") {
        // One turn of the native side of node_vs_native, on the W1 requests
        // an earlier run wrote (tests/bench/node.mjs alternates it with its
        // own per-message call).
        let read =
            |name: &str| std::fs::read(out.join(name)).expect("W1 requests written by a full run");
        let us = native_per_message(&read("w1-plan.json"), &read("w1-select.json"), budget) * 1e6;
        println!("{us}");
        return;
    }
    std::fs::create_dir_all(&out).unwrap();
    let f = artifact(Bound::default());
    // The same artifact bounded by fuel (`--fuel`; the budget the program
    // had by default before its calls were bounded by time), beside it.
    let fueled = artifact(Bound::Fuel(20_000_000_000));

    // W1: a 2,000-turn chat; the steady state has ~1,900 turns behind a boundary.
    let (plan_w1, select_w1) = per_message(1_900, 100);
    std::fs::write(out.join("w1-plan.json"), &plan_w1).unwrap();
    std::fs::write(out.join("w1-select.json"), &select_w1).unwrap();
    // The whole W1 history for the peer comparison: OpenAI-style messages and
    // the same history as a foldline select with the same token budget.
    let mut all = vec![system()];
    all.extend((1..=2_000).map(turn));
    let mut tokens_decl = decl();
    tokens_decl.budget = Budget::default_tokens();
    let full = json!({"declaration": tokens_decl, "route": {"conversation": "bench", "chat": "c", "sender": "s"}, "events": all, "format": "openai", "limit": 10_000});
    let full_w1 = full.to_string().into_bytes();
    std::fs::write(out.join("w1-full-select.json"), &full_w1).unwrap();
    let msgs = call_ok("select", json!({"declaration": tokens_decl, "route": {"conversation": "bench", "chat": "c", "sender": "s"}, "events": all, "format": "openai", "limit": 100_000_000}).to_string().as_bytes())["ok"]["messages"].clone();
    std::fs::write(out.join("w1-openai-messages.json"), msgs.to_string()).unwrap();

    // One message: plan then select, natively or under wasmtime.
    let on_wasm = |plan: &[u8], select: &[u8]| {
        median(
            || {
                f.call_raw("plan", plan).unwrap();
                f.call_raw("select", select).unwrap();
            },
            budget,
            20,
        )
    };
    // Natively, under wasmtime (bounded by time) and under wasmtime bounded
    // by fuel, in turns.
    let message = |f: &Foldline| {
        f.call_raw("plan", &plan_w1).unwrap();
        f.call_raw("select", &select_w1).unwrap();
    };
    let [native, wasm, wasm_fuel] = medians_in_turns(
        &mut [
            &mut || {
                api::call("plan", &plan_w1);
                api::call("select", &select_w1);
            },
            &mut || message(&f),
            &mut || message(&fueled),
        ],
        budget * 3,
        60,
    )[..] else {
        unreachable!("three measured")
    };
    // The request bytes are built once, outside the timed call.
    let full_native = median(
        || {
            api::call("select", &full_w1);
        },
        budget,
        10,
    );

    let (p1, s1) = per_message(1_000, 100);
    let (p100, s100) = per_message(100_000, 100);
    let g1 = on_wasm(&p1, &s1);
    let g100 = on_wasm(&p100, &s100);

    // Settling an 80,000-character packet vs one SHA-256 pass over its bytes.
    let mut events = vec![system()];
    events.extend((1..=400).map(turn));
    let frontier = call_ok(
        "plan",
        json!({"declaration": decl(), "route": {"conversation": "bench", "chat": "c", "sender": "s"}, "events": [turn(1)]})
            .to_string()
            .as_bytes(),
    )["ok"]["frontier"]
        .clone();
    let mut sd = decl();
    sd.budget = Budget::Chars {
        trigger: 100_000,
        retain: 20_000,
    };
    sd.prefix_bounds.max_chars = 1_000_000;
    let frontier_s = call_ok(
        "plan",
        json!({"declaration": sd, "route": {"conversation": "bench", "chat": "c", "sender": "s"}, "events": [turn(1)]})
            .to_string()
            .as_bytes(),
    )["ok"]["frontier"]
        .clone();
    let _ = frontier;
    let mut packet = Value::Null;
    for n in 150..400u64 {
        let p = call_ok("plan", json!({"declaration": sd, "route": {"conversation": "bench", "chat": "c", "sender": "s"}, "frontier": frontier_s, "events": events[..=n as usize]}).to_string().as_bytes());
        if p["ok"]["outcome"] == "compact"
            && p["ok"]["packet"]["input"]["renderedChars"]
                .as_u64()
                .unwrap_or(0)
                >= 80_000
        {
            packet = p["ok"]["packet"].clone();
            break;
        }
    }
    assert!(!packet.is_null(), "no 80,000-character packet");
    let settle = json!({"kind": "settle", "packet": packet, "output": {"packetId": packet["id"], "runId": "r1", "modelId": "m", "summary": "A summary of the conversation so far."}}).to_string().into_bytes();
    call_ok("validate", &settle);
    assert!(
        api::settle_as_written(&settle).is_some(),
        "the packet as plan wrote it settles on its bytes"
    );
    let packet_bytes = packet.to_string().into_bytes();
    // Settle natively, under wasmtime (by time, by fuel) and one native
    // SHA-256 pass, in turns.
    let [settle_native, settle_wasm, settle_wasm_fuel, sha_native] = medians_in_turns(
        &mut [
            &mut || {
                api::call("validate", &settle);
            },
            &mut || {
                f.call_raw("validate", &settle).unwrap();
            },
            &mut || {
                fueled.call_raw("validate", &settle).unwrap();
            },
            &mut || {
                Sha256::digest(&packet_bytes);
            },
        ],
        budget * 2,
        60,
    )[..] else {
        unreachable!("four measured")
    };
    // The same request decoded as a whole (the path every other request
    // takes, and the artifact's path for this one too), beside it.
    let settle_decoded = median(
        || {
            api::envelope(api::parse(&settle).and_then(|r| foldline_core::validate(&r)));
        },
        budget,
        20,
    );

    let sha_wasm = sha256_in_wasmtime(&packet_bytes, budget);

    let inst = median(|| f.instantiate_only().unwrap(), budget, 50);

    let (big, messages) = if quick { (20_000, 60) } else { (100_000, 300) };
    let mut runs = [
        PerMessage::new(&out, 1_000, true),
        PerMessage::new(&out, big, true),
        PerMessage::new(&out, 1_000, false),
    ];
    for _ in 0..messages {
        for run in &mut runs {
            run.message();
        }
    }
    let [driver_1k, driver_big, driver_plain_1k] = runs.map(PerMessage::median);

    // One compaction with 1,000 boundaries in the chain vs 10.
    let growth = compaction_growth(&out, 10, 1_000, if quick { 25 } else { 61 });
    // A timeline page right after a write, text kept vs none.
    let (tl_kept, tl_whole) = timeline_after_write(
        &out,
        if quick { 2_000 } else { 5_000 },
        if quick { 9 } else { 25 },
    );

    let mut r = json!({
        "compaction_10_boundaries_us": growth.0 * 1e6,
        "compaction_1000_boundaries_us": growth.1 * 1e6,
        "compaction_growth_1000_vs_10_boundaries": growth.1 / growth.0,
        "program_timeline_after_write_kept_us": tl_kept * 1e6,
        "program_timeline_after_write_whole_us": tl_whole * 1e6,
        "program_timeline_after_write_kept_vs_whole": tl_kept / tl_whole,
        "program_driver_1k_us": driver_1k * 1e6,
        "program_driver_big_us": driver_big * 1e6,
        "program_driver_history_big": big,
        "program_driver_growth_100k_vs_1k": driver_big / driver_1k,
        "program_driver_plain_1k_us": driver_plain_1k * 1e6,
        "program_driver_held_vs_plain": driver_1k / driver_plain_1k,
        "native_per_message_us": native * 1e6,
        "wasmtime_per_message_us": wasm * 1e6,
        "wasmtime_vs_native": wasm / native,
        "wasmtime_fuel_per_message_us": wasm_fuel * 1e6,
        "wasmtime_fuel_vs_native": wasm_fuel / native,
        "native_full_w1_select_us": full_native * 1e6,
        "growth_1k_us": g1 * 1e6,
        "growth_100k_us": g100 * 1e6,
        "growth_100k_vs_1k": g100 / g1,
        "settle_native_us": settle_native * 1e6,
        "settle_wasmtime_us": settle_wasm * 1e6,
        "sha256_native_us": sha_native * 1e6,
        "packet_bytes": packet_bytes.len(),
        "settle_vs_sha256": settle_native / sha_native,
        "settle_decoded_us": settle_decoded * 1e6,
        "settle_decoded_vs_sha256": settle_decoded / sha_native,
        "settle_wasmtime_vs_sha256": settle_wasm / sha_native,
        "settle_wasmtime_fuel_us": settle_wasm_fuel * 1e6,
        "settle_wasmtime_fuel_vs_sha256": settle_wasm_fuel / sha_native,
        "wasmtime_instantiate_us": inst * 1e6,
    });
    if let Some(sha_wasm) = sha_wasm {
        r["sha256_wasmtime_us"] = json!(sha_wasm * 1e6);
        // The floor of settle_wasmtime_vs_sha256: one pass in wasm vs native.
        r["sha256_wasmtime_vs_native"] = json!(sha_wasm / sha_native);
        r["settle_wasmtime_vs_wasm_sha256"] = json!(settle_wasm / sha_wasm);
    }
    println!("{r}");
}
