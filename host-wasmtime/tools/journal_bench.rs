//! What a message costs on each journal: the program's driver (append the
//! turn, `on_message`, `context`) per message after a history of turns, and
//! a bare append, on a SQLite file and on PostgreSQL (a server started for
//! the run from Debian's binaries). Medians; prints one JSON object with the
//! Postgres / SQLite ratios measured in the same run.
//!
//! `cargo run -p foldline-wasmtime --example journal_bench -- [--quick]`

use std::time::{Duration, Instant};

use foldline_wasmtime::driver::{ContextOptions, Driver};
use foldline_wasmtime::journal::{Journal, PgJournal, SqliteJournal};
use foldline_wasmtime::model::Extractive;
use foldline_wasmtime::runtime::Foldline;
use serde_json::json;

#[path = "../tests/support/fixtures.rs"]
mod fixtures;
#[path = "../tests/support/pg.rs"]
mod pg;

fn median(mut v: Vec<Duration>) -> f64 {
    v.sort();
    v[v.len() / 2].as_secs_f64() * 1e6
}

/// (driver µs per message, append µs) on `journal`.
fn measure(journal: Box<dyn Journal>, history: usize, messages: usize) -> (f64, f64) {
    let d = Driver::new(
        Foldline::embedded().expect("artifact"),
        journal,
        Extractive,
        fixtures::small_decl(),
    );
    let all = fixtures::demo_events("c", history + messages);
    d.journal().append("c", &all[..history]).expect("history");
    d.on_message("c").expect("first read");
    let mut per = Vec::with_capacity(messages);
    for e in &all[history..] {
        let t = Instant::now();
        d.journal()
            .append("c", std::slice::from_ref(e))
            .expect("append");
        d.on_message("c").expect("driver");
        d.context("c", ContextOptions::default()).expect("context");
        per.push(t.elapsed());
    }
    let bare = fixtures::demo_events("b", messages);
    let mut appends = Vec::with_capacity(messages);
    for e in &bare {
        let t = Instant::now();
        d.journal()
            .append("b", std::slice::from_ref(e))
            .expect("append");
        appends.push(t.elapsed());
    }
    (median(per), median(appends))
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let (history, messages) = if quick { (1_000, 100) } else { (1_000, 400) };
    let dir = tempfile::tempdir().expect("temp dir");
    let (sqlite_msg, sqlite_append) = measure(
        Box::new(SqliteJournal::open(dir.path().join("bench.db")).expect("sqlite")),
        history,
        messages,
    );
    let server = pg::Pg::start();
    let (pg_msg, pg_append) = measure(
        Box::new(PgJournal::open(&server.database("bench")).expect("postgres")),
        history,
        messages,
    );
    println!(
        "{}",
        json!({
            "history_turns": history,
            "messages": messages,
            "sqlite_driver_per_message_us": sqlite_msg,
            "postgres_driver_per_message_us": pg_msg,
            "postgres_vs_sqlite_driver": pg_msg / sqlite_msg,
            "sqlite_append_us": sqlite_append,
            "postgres_append_us": pg_append,
            "postgres_vs_sqlite_append": pg_append / sqlite_append,
        })
    );
}
