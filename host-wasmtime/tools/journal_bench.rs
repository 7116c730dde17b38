//! What a message costs on each journal: the program's driver (append the
//! turn, `on_message`, `context`) per message after a history of turns, and
//! a bare append, on a SQLite file and on PostgreSQL (a server started for
//! the run from Debian's binaries, flushing each commit to disk as the
//! SQLite journal does). The two journals take their messages in
//! turn, [`BLOCK`] at a time. Medians; prints one JSON object with the Postgres /
//! SQLite ratios measured in the same run, each of a message's three steps
//! on its own, and one round trip to the database (a read of nothing new,
//! as `context` makes after `on_message`): a message on Postgres makes three
//! (the append, `on_message`'s read, `context`'s read), on SQLite none.
//! Every other message takes `on_message_and_context` instead of the two
//! calls (the context from the check's read: two round trips on Postgres),
//! reported beside them.
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

/// The program's driver over one journal, after `history` turns, and the
/// per-message and bare-append samples taken on it. The two journals are
/// stepped in turn (`main`), a block of messages each, so the machine's
/// drift reaches both alike.
struct Bench {
    driver: Driver<Box<dyn Journal>, Extractive>,
    turns: Vec<foldline_core::event::Event>,
    bare: Vec<foldline_core::event::Event>,
    per: Vec<Duration>,
    /// Messages appended, then `on_message_and_context`.
    one_read: Vec<Duration>,
    /// The append, `on_message` and `context` of each message.
    steps: Vec<[Duration; 3]>,
    appends: Vec<Duration>,
}

impl Bench {
    fn new(journal: Box<dyn Journal>, history: usize, messages: usize) -> Bench {
        let driver = Driver::new(
            Foldline::embedded().expect("artifact"),
            journal,
            Extractive,
            fixtures::small_decl(),
        );
        let mut all = fixtures::demo_events("c", history + messages);
        driver
            .journal()
            .append("c", &all[..history])
            .expect("history");
        driver.on_message("c").expect("first read");
        let turns = all.split_off(history);
        Bench {
            driver,
            turns,
            bare: fixtures::demo_events("b", messages),
            per: Vec::new(),
            one_read: Vec::new(),
            steps: Vec::new(),
            appends: Vec::new(),
        }
    }

    /// Message `i`: append the turn, `on_message`, `context`, timed (odd
    /// messages: the append, then `on_message_and_context`).
    fn message(&mut self, i: usize) {
        let t = Instant::now();
        self.driver
            .journal()
            .append("c", std::slice::from_ref(&self.turns[i]))
            .expect("append");
        if i % 2 == 1 {
            self.driver
                .on_message_and_context("c", ContextOptions::default())
                .expect("driver");
            self.one_read.push(t.elapsed());
            return;
        }
        let appended = t.elapsed();
        self.driver.on_message("c").expect("driver");
        let checked = t.elapsed();
        self.driver
            .context("c", ContextOptions::default())
            .expect("context");
        let done = t.elapsed();
        self.steps
            .push([appended, checked - appended, done - checked]);
        self.per.push(done);
    }

    /// Medians of the append, `on_message` and `context`, µs.
    fn steps(&self) -> serde_json::Value {
        let step = |k: usize| median(self.steps.iter().map(|s| s[k]).collect());
        json!({"append": step(0), "on_message": step(1), "context": step(2)})
    }

    /// Bare append `i`, timed.
    fn append(&mut self, i: usize) {
        let t = Instant::now();
        self.driver
            .journal()
            .append("b", std::slice::from_ref(&self.bare[i]))
            .expect("append");
        self.appends.push(t.elapsed());
    }
}

/// Messages each journal takes before the other takes its turn.
const BLOCK: usize = 25;

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let (history, messages) = if quick { (1_000, 100) } else { (1_000, 400) };
    let dir = tempfile::tempdir().expect("temp dir");
    let server = pg::Pg::start_durable();
    let mut sqlite = Bench::new(
        Box::new(SqliteJournal::open(dir.path().join("bench.db")).expect("sqlite")),
        history,
        messages,
    );
    let mut postgres = Bench::new(
        Box::new(PgJournal::open(&server.database("bench")).expect("postgres")),
        history,
        messages,
    );
    // Blocks of messages, not single ones: the Postgres journal writes its
    // progress notes behind the message path, and that work (and the
    // database server's) must not land in the SQLite journal's samples more
    // than at a block's first message.
    for block in (0..messages).step_by(BLOCK) {
        let block = block..(block + BLOCK).min(messages);
        block.clone().for_each(|i| sqlite.message(i));
        block.for_each(|i| postgres.message(i));
    }
    for block in (0..messages).step_by(BLOCK) {
        let block = block..(block + BLOCK).min(messages);
        block.clone().for_each(|i| sqlite.append(i));
        block.for_each(|i| postgres.append(i));
    }
    // One round trip: a read of nothing new, prepared, on a pooled connection.
    let round_trips: Vec<Duration> = (0..messages * 4)
        .map(|_| {
            let t = Instant::now();
            postgres
                .driver
                .journal()
                .read_events("c", u64::MAX >> 1)
                .expect("read");
            t.elapsed()
        })
        .collect();
    let (sqlite_steps, pg_steps) = (sqlite.steps(), postgres.steps());
    let (sqlite_msg, sqlite_append) = (median(sqlite.per), median(sqlite.appends));
    let (pg_msg, pg_append) = (median(postgres.per), median(postgres.appends));
    let (sqlite_one, pg_one) = (median(sqlite.one_read), median(postgres.one_read));
    println!(
        "{}",
        json!({
            "history_turns": history,
            "messages": messages,
            "sqlite_driver_per_message_us": sqlite_msg,
            "postgres_driver_per_message_us": pg_msg,
            "postgres_vs_sqlite_driver": pg_msg / sqlite_msg,
            "sqlite_one_read_per_message_us": sqlite_one,
            "postgres_one_read_per_message_us": pg_one,
            "postgres_vs_sqlite_one_read": pg_one / sqlite_one,
            "sqlite_append_us": sqlite_append,
            "postgres_append_us": pg_append,
            "postgres_vs_sqlite_append": pg_append / sqlite_append,
            "sqlite_steps_us": sqlite_steps,
            "postgres_steps_us": pg_steps,
            "postgres_round_trip_us": median(round_trips),
        })
    );
}
