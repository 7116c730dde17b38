//! Soak: N messages (default 100,000) through the Rust driver in one
//! process — per message: append the turn, `on_message`, `context` — over a
//! SQLite file, on the README's token budget (window 8,192), with the
//! offline summarizer. Halfway, a member pastes a 4 MB log (`trimPrompt`),
//! the one huge request that would otherwise leave the kept instance's
//! linear memory at its high-water mark.
//!
//! Asserts: no error; every context fits its limit; the instance kept for
//! the next call never holds more than `MEMORY_RESET_BYTES`, also right
//! after the paste. Prints, every tenth of the run, the process's resident
//! memory, the journal file's size and the median, mean and p99 cost per
//! message (the mean and p99 carry the compactions), then one JSON object.
//!
//! `cargo run --release -p foldline-wasmtime --example soak -- [messages]`

use std::time::Instant;

use foldline_core::declaration::{Budget, Declaration};
use foldline_core::event::{Event, Message};
use foldline_core::turn::{Part, Role};
use foldline_wasmtime::driver::{ContextOptions, Driver, Outcome};
use foldline_wasmtime::journal::{Journal, SqliteJournal};
use foldline_wasmtime::model::Extractive;
use foldline_wasmtime::runtime::{Foldline, MEMORY_RESET_BYTES};
use serde_json::json;

/// Resident and peak resident memory of this process, in MiB (Linux).
fn rss_mb() -> (u64, u64) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0)
            / 1024
    };
    (field("VmRSS:"), field("VmHWM:"))
}

fn say(i: u64) -> Event {
    let text = format!(
        "Message {i} about the trip: day {}, {} euros, with Ana. ",
        i % 14,
        800 + i % 300
    )
    .repeat(1 + (i % 5) as usize);
    let role = if i % 2 == 1 {
        Role::User
    } else {
        Role::Assistant
    };
    Event::Message(Message::new(
        "soak",
        i,
        &format!("t{i}"),
        role,
        vec![Part::Text { text }],
    ))
}

fn main() {
    let n: u64 = std::env::args()
        .nth(1)
        .and_then(|v| v.parse().ok())
        .unwrap_or(100_000);
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("soak.db");
    let mut decl = Declaration::new("agent", "agent-compactor");
    decl.budget = Budget::default_tokens();
    let d = Driver::new(
        Foldline::embedded().unwrap(),
        SqliteJournal::open(&db).unwrap(),
        Extractive,
        decl,
    );
    let started = Instant::now();
    let (mut compactions, mut window, mut rows) = (0u64, Vec::new(), Vec::new());
    let mut peak_kept = 0;
    for i in 1..=n {
        let t = Instant::now();
        d.journal().append("soak", &[say(i)]).unwrap();
        match d.on_message("soak").unwrap() {
            Outcome::Compacted(_) => compactions += 1,
            Outcome::Failed(r) => panic!("message {i}: {}", r.audit_reason),
            Outcome::Refused(e) => panic!("message {i}: {e}"),
            _ => {}
        }
        let ctx = d.context("soak", ContextOptions::default()).unwrap();
        assert!(
            ctx.manifest.sizes.total <= ctx.manifest.limit,
            "message {i}: over the limit"
        );
        window.push(t.elapsed().as_secs_f64());
        peak_kept = peak_kept.max(d.foldline().memory_bytes());
        assert!(d.foldline().memory_bytes() <= MEMORY_RESET_BYTES);
        if i == n / 2 {
            let paste = json!({ "text": "ERROR 2026-11-30T12:00:00Z connection reset by peer, basically retrying now. ".repeat(52_000) });
            d.foldline()
                .call_raw("trimPrompt", paste.to_string().as_bytes())
                .unwrap();
            assert!(
                d.foldline().memory_bytes() <= MEMORY_RESET_BYTES,
                "after the paste the kept instance holds {} bytes",
                d.foldline().memory_bytes()
            );
        }
        if i % (n / 10).max(1) == 0 || i == n {
            window.sort_by(f64::total_cmp);
            let (rss, hwm) = rss_mb();
            let row = json!({
                "messages": i, "compactions": compactions, "rssMB": rss, "peakRssMB": hwm,
                "journalMB": std::fs::metadata(&db).map(|m| m.len() / 1_048_576).unwrap_or(0),
                "keptWasmMB": (d.foldline().memory_bytes() as f64 / 1_048_576.0 * 10.0).round() / 10.0,
                "medianUs": (window[window.len() / 2] * 1e6).round(),
                "p99Us": (window[window.len() * 99 / 100] * 1e6).round(),
                "meanUs": (window.iter().sum::<f64>() / window.len() as f64 * 1e6).round(),
            });
            eprintln!("{row}");
            rows.push(row);
            window.clear();
        }
    }
    assert!(compactions > 0, "the soak never compacted");
    let growth = |k: &str| {
        let (first, last) = (
            rows[0][k].as_f64().unwrap(),
            rows[rows.len() - 1][k].as_f64().unwrap(),
        );
        (last / first * 100.0).round() / 100.0
    };
    println!(
        "{}",
        json!({
            "host": "the Rust driver (wasmtime, SQLite)", "messages": n,
            "seconds": started.elapsed().as_secs(), "compactions": compactions,
            "peakKeptWasmMB": (peak_kept as f64 / 1_048_576.0 * 10.0).round() / 10.0,
            "resetBoundMB": MEMORY_RESET_BYTES / 1_048_576,
            "medianGrowthLastVsFirst": growth("medianUs"),
            "meanGrowthLastVsFirst": growth("meanUs"),
            "rows": rows,
        })
    );
}
