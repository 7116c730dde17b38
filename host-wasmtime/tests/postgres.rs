//! The Postgres journal against a real PostgreSQL server (started by the
//! test from Debian's binaries): the journal contract, shared with SQLite;
//! the database's own refusals; the driver; and `foldline serve` replicas
//! racing on one conversation with a stopped replica's stale writes fenced.

mod support;

use std::process::Command;
use std::time::{Duration, Instant};

use foldline_core::event::Event;
use foldline_wasmtime::driver::{Driver, Outcome};
use foldline_wasmtime::journal::{contract, Journal, PgJournal, SqliteJournal};
use foldline_wasmtime::model::Extractive;
use foldline_wasmtime::runtime::Foldline;
use support::fixtures::{demo_events, small_decl};
use support::pg::Pg;
use support::server::Server;

#[test]
fn the_journal_contract_holds_on_sqlite_and_postgres() {
    contract::check(SqliteJournal::in_memory().unwrap());
    let pg = Pg::start();
    contract::check(PgJournal::open(&pg.database("contract")).unwrap());
    // Both keep the progress watermark.
    contract::check_progress(&SqliteJournal::in_memory().unwrap(), true);
    contract::check_progress(&PgJournal::open(&pg.database("progress")).unwrap(), true);
    // PostgreSQL keeps a watch: every append notifies.
    contract::check_watch(&PgJournal::open(&pg.database("watch")).unwrap(), true);
}

/// A database that cannot be reached is refused at once with the client's
/// reason, and the URL shown without its password. (The pool reported it
/// only after its 10-second timeout, as "timed out waiting for connection:
/// error connecting to server", whatever the reason.)
#[test]
fn a_database_that_cannot_be_reached_is_refused_at_once_with_the_reason() {
    let pg = Pg::start();
    let refused = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port() // closed again: nothing listens there
    };
    for (url, reason) in [
        (
            format!("postgres://foldline:s3cret@127.0.0.1:{refused}/db"),
            "Connection refused",
        ),
        (
            pg.url("no_such_db"),
            "database \"no_such_db\" does not exist",
        ),
    ] {
        let started = Instant::now();
        let Err(e) = PgJournal::open(&url) else {
            panic!("{url} opened")
        };
        let message = e.to_string();
        assert_eq!(e.code(), "journal", "{message}");
        assert!(message.contains(reason), "{message}");
        assert!(!message.contains("s3cret"), "{message}");
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{message} after {:?}",
            started.elapsed()
        );
    }
}

/// A journal written before turn claims were kept learns the claims of the
/// messages it already holds when it is opened, so a reused turn id is
/// refused there too.
#[test]
fn an_older_journal_learns_its_turn_claims_at_open() {
    let conflicting = |j: &dyn Journal| {
        let mut e = demo_events("c", 1).remove(0);
        if let Event::Message(m) = &mut e {
            m.parts = vec![foldline_core::turn::Part::Text {
                text: "not what was said".into(),
            }];
        }
        j.append("c", &[e]).unwrap_err().code().to_owned()
    };
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("old.db");
    SqliteJournal::open(&path)
        .unwrap()
        .append("c", &demo_events("c", 3))
        .unwrap();
    let old = rusqlite::Connection::open(&path).unwrap();
    old.execute_batch("DROP TABLE turns; PRAGMA user_version = 0;")
        .unwrap();
    drop(old);
    let j = SqliteJournal::open(&path).unwrap();
    assert_eq!(conflicting(&j), "conflicting_turn");
    let pg = Pg::start();
    let url = pg.database("older");
    PgJournal::open(&url)
        .unwrap()
        .append("c", &demo_events("c", 3))
        .unwrap();
    let mut c = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    c.batch_execute("DROP TABLE foldline_turns; DELETE FROM foldline_schema")
        .unwrap();
    let j = PgJournal::open(&url).unwrap();
    assert_eq!(conflicting(&j), "conflicting_turn");
    assert_eq!(j.read_events("c", 0).unwrap().len(), 4);
}

/// A PostgreSQL journal whose turn claims are of the earlier form (a
/// SHA-256) takes redeliveries and refuses other content, once migrated
/// and when an older replica keeps such a claim later (`support::claims`).
#[test]
fn a_journal_of_earlier_claims_takes_redeliveries_and_refuses_other_content() {
    let pg = Pg::start();
    let url = pg.database("earlier");
    let db = || postgres::Client::connect(&url, postgres::NoTls).unwrap();
    support::claims::earlier_claims_are_taken_up(support::claims::Store {
        open: &|| Box::new(PgJournal::open(&url).unwrap()),
        earlier: &|migrated, which| {
            let mut db = db();
            for (turn, claim) in which {
                db.execute(
                    "UPDATE foldline_turns SET claim = $1 WHERE conversation = 'c' AND turn_id = $2",
                    &[claim, turn],
                )
                .unwrap();
            }
            if !migrated {
                db.batch_execute("DELETE FROM foldline_schema").unwrap();
            }
        },
        claims: &|| {
            let rows = db()
                .query(
                    "SELECT claim FROM foldline_turns WHERE conversation = 'c' ORDER BY turn_id",
                    &[],
                )
                .unwrap();
            rows.iter().map(|r| r.get(0)).collect()
        },
    });
}

#[test]
fn the_database_refuses_edits_of_the_journal() {
    let pg = Pg::start();
    let url = pg.database("edits");
    let j = PgJournal::open(&url).unwrap();
    // Opening again (another replica) applies the schema idempotently.
    let _again = PgJournal::open(&url).unwrap();
    j.append("c", &demo_events("c", 3)).unwrap();
    let mut c = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    for sql in [
        "UPDATE foldline_events SET body = '{}' WHERE seq = 1",
        "DELETE FROM foldline_events WHERE seq = 1",
        "TRUNCATE foldline_events",
    ] {
        let e = c.batch_execute(sql).unwrap_err();
        assert!(
            e.to_string().contains("append-only") || format!("{e:?}").contains("append-only"),
            "{sql}: {e:?}"
        );
    }
    assert_eq!(j.read_events("c", 0).unwrap().len(), 4);
}

/// A pooled connection is checked before use only when it rested in the
/// pool (not before every statement, which cost a round trip each): one the
/// server ended while it rested (a restart, an administrator's
/// `pg_terminate_backend`) is replaced before any statement meets it.
#[test]
fn connections_the_server_ended_while_pooled_are_replaced_before_use() {
    let pg = Pg::start();
    let url = pg.database("ended");
    let j = PgJournal::open(&url).unwrap();
    j.append("c", &demo_events("c", 3)).unwrap();
    let mut admin = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    let ended: i64 = admin
        .query_one(
            "SELECT count(*) FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity
             WHERE datname = current_database() AND pid <> pg_backend_pid()) t",
            &[],
        )
        .unwrap()
        .get(0);
    assert!(ended >= 1, "the pool held no connection to end");
    // Rested past the pool's recheck age: checked, found ended, replaced.
    std::thread::sleep(Duration::from_millis(1_300));
    assert_eq!(j.read_events("c", 0).unwrap().len(), 4);
    j.append("c", &demo_events("c", 4)[4..]).unwrap();
    assert_eq!(j.read_events("c", 0).unwrap().len(), 5);
}

/// The progress watermark is written behind the message path on
/// PostgreSQL: a note the database cannot take now (its table locked past
/// the journal's lock timeout) is kept, its failure reported, and written
/// with the notes made meanwhile once the database takes writes again —
/// no skipped run lost or counted twice.
#[test]
fn progress_notes_the_database_could_not_take_are_kept_and_written_later() {
    let pg = Pg::start();
    let url = pg.database("notes");
    let j = PgJournal::open(&url).unwrap();
    let rec = contract::skip_record;
    j.note_skipped("a", &rec(1)).unwrap();
    assert_eq!(j.progress("a").unwrap().unwrap().skipped_runs, 1);
    let mut admin = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    let mut lock = admin.transaction().unwrap();
    lock.batch_execute("LOCK TABLE foldline_progress IN ACCESS EXCLUSIVE MODE")
        .unwrap();
    j.note_skipped("a", &rec(2)).unwrap();
    j.note_skipped("b", &rec(1)).unwrap();
    // The writer waits out the lock timeout (2 s) and is refused.
    let refused = j.progress("a").unwrap_err();
    assert_eq!(refused.code(), "journal", "{refused}");
    let reported = j.note_skipped("a", &rec(3)).unwrap_err();
    assert_eq!(reported.code(), "journal", "{reported}");
    lock.commit().unwrap();
    // Tried again: every note kept, none twice.
    let deadline = Instant::now() + Duration::from_secs(20);
    let written = loop {
        match j.progress("a") {
            Ok(p) => break p.unwrap(),
            Err(_) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(50)),
            Err(e) => panic!("the notes were never written: {e}"),
        }
    };
    assert_eq!(
        (written.skipped_runs, written.last.checked_through_seq),
        (3, 3)
    );
    assert_eq!(j.progress("b").unwrap().unwrap().skipped_runs, 1);
    // The journal's drop writes what is pending.
    j.note_skipped("c", &rec(9)).unwrap();
    drop(j);
    let again = PgJournal::open(&url).unwrap();
    assert_eq!(
        again
            .progress("c")
            .unwrap()
            .unwrap()
            .last
            .checked_through_seq,
        9
    );
}

#[test]
fn the_driver_compacts_a_long_conversation_on_postgres() {
    let pg = Pg::start();
    let j = PgJournal::open(&pg.database("driver")).unwrap();
    let d = Driver::new(Foldline::embedded().unwrap(), j, Extractive, small_decl());
    let mut compacted = 0;
    for e in demo_events("c", 400) {
        d.journal().append("c", &[e]).unwrap();
        if let Outcome::Compacted(_) = d.on_message("c").unwrap() {
            compacted += 1;
        }
    }
    assert!(compacted >= 5, "{compacted}");
    let r = d.resolve("c").unwrap();
    assert_eq!(r.accepted.len(), compacted);
}

/// A replica paused inside an open transaction (a GC pause, a frozen VM,
/// `SIGSTOP`) holding the head row of one conversation: appends to other
/// conversations are not delayed; an append to the paused one is refused
/// fast as `busy` (nothing written, never written later) or written once the
/// database ends the idle session; a replica starting meanwhile applies
/// nothing and does not wait.
#[test]
fn a_paused_replica_stalls_no_other() {
    let pg = Pg::start();
    let url = pg.database("stall");
    let j = PgJournal::open(&url).unwrap();
    j.append("x", &demo_events("x", 2)).unwrap();
    j.append("y", &demo_events("y", 2)).unwrap();
    // The paused replica: a connection with the journal's own session
    // settings that locks x's head and then does nothing.
    let mut config: postgres::Config = url.parse().unwrap();
    config.options(foldline_wasmtime::journal::postgres::SESSION_OPTIONS);
    let mut paused = config.connect(postgres::NoTls).unwrap();
    let mut tx = paused.transaction().unwrap();
    tx.query(
        "SELECT seq FROM foldline_heads WHERE conversation = 'x' FOR UPDATE",
        &[],
    )
    .unwrap();
    let mut watch = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    let idle: i64 = watch
        .query_one(
            "SELECT count(*) FROM pg_stat_activity WHERE state = 'idle in transaction' AND datname = 'stall'",
            &[],
        )
        .unwrap()
        .get(0);
    assert_eq!(
        idle, 1,
        "the paused transaction is seen in pg_stat_activity"
    );
    // Another conversation: not delayed.
    let t = Instant::now();
    let more: Vec<Event> = demo_events("y", 4).split_off(3);
    j.append("y", &more).unwrap();
    assert!(t.elapsed() < Duration::from_secs(1), "{:?}", t.elapsed());
    // A replica starting now: the schema is applied already, nothing waits.
    let t = Instant::now();
    let _starting = PgJournal::open(&url).unwrap();
    assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());
    // The paused conversation: refused fast, nothing written.
    let before = j.read_events("x", 0).unwrap().len();
    let next: Vec<Event> = demo_events("x", 3).split_off(3);
    let t = Instant::now();
    let e = j.append("x", &next).unwrap_err();
    assert_eq!(e.code(), "busy", "{e}");
    assert!(t.elapsed() < Duration::from_secs(4), "{:?}", t.elapsed());
    // The database ends the idle session (5 s): its locks are gone, the
    // refused append was never written, and the next one goes through.
    std::thread::sleep(Duration::from_secs(6));
    assert!(tx.commit().is_err(), "the paused session was ended");
    assert_eq!(
        j.read_events("x", 0).unwrap().len(),
        before,
        "a refused append is never written later"
    );
    j.append("x", &next).unwrap();
    assert_eq!(j.read_events("x", 0).unwrap().len(), before + 1);
}

/// A folder with the replicas' members file (alice) and declaration.
fn replica_files() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("members.json"),
        serde_json::json!({"members": [{"id": "alice", "tokenSha256": foldline_wasmtime::serve::hash_token("alice-token")}]}).to_string(),
    )
    .unwrap();
    std::fs::write(
        dir.path().join("decl.json"),
        serde_json::to_string(&small_decl()).unwrap(),
    )
    .unwrap();
    dir
}

fn replica(url: &str, dir: &std::path::Path, name: &str, extra: &[&str]) -> Server {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_foldline"));
    cmd.args(["--journal", url, "--declaration"])
        .arg(dir.join("decl.json"))
        .args(["serve", "--listen", "127.0.0.1:0", "--members"])
        .arg(dir.join("members.json"))
        .args(["--replica", name, "--lease-ms", "1000"])
        .args(extra);
    support::server::start(cmd)
}

fn call(method: &str, url: &str, body: Option<&str>) -> (u16, serde_json::Value) {
    let r = ureq::request(method, url)
        .timeout(Duration::from_secs(60))
        .set("Authorization", "Bearer alice-token");
    let res = match body {
        Some(b) => r.send_string(b),
        None => r.call(),
    };
    let resp = match res {
        Ok(r) | Err(ureq::Error::Status(_, r)) => r,
        Err(e) => panic!("{method} {url}: {e}"),
    };
    let status = resp.status();
    (status, resp.into_json().unwrap_or(serde_json::Value::Null))
}

fn last_event(url: &str) -> String {
    use std::io::BufRead;
    let resp = ureq::get(url)
        .timeout(Duration::from_secs(60))
        .set("Authorization", "Bearer alice-token")
        .call()
        .unwrap();
    let mut last = String::new();
    for line in std::io::BufReader::new(resp.into_reader()).lines() {
        if let Some(e) = line.unwrap().strip_prefix("event:") {
            last = e.trim().to_owned();
        }
    }
    last
}

/// An OpenAI-compatible endpoint whose first answer ("A stale summary.")
/// waits until `gate` is created; later ones answer at once.
fn gated_model(gate: std::path::PathBuf) -> String {
    let server = tiny_http::Server::http("127.0.0.1:0").unwrap();
    let url = format!("http://{}/v1", server.server_addr().to_ip().unwrap());
    std::thread::spawn(move || {
        for (n, req) in server.incoming_requests().enumerate() {
            let gate = gate.clone();
            std::thread::spawn(move || {
                let text = if n == 0 {
                    while !gate.exists() {
                        std::thread::sleep(Duration::from_millis(20));
                    }
                    "A stale summary."
                } else {
                    "A later summary."
                };
                let _ = req.respond(tiny_http::Response::from_string(format!(
                    "data: {{\"model\":\"m\",\"choices\":[{{\"delta\":{{\"content\":\"{text}\"}},\"finish_reason\":\"stop\"}}]}}\n\ndata: [DONE]\n\n"
                )));
            });
        }
    });
    url
}

#[test]
fn replicas_share_one_chain_and_a_stopped_replica_is_fenced_out() {
    let pg = Pg::start();
    let url = pg.database("replicas");
    let dir = replica_files();
    let gate = dir.path().join("gate");
    let model = gated_model(gate.clone());
    // r1 summarizes through a model that waits; r2 and r3 offline.
    let r1 = replica(&url, dir.path(), "r1", &["--openai-base-url", &model]);
    let r2 = replica(&url, dir.path(), "r2", &[]);
    let r3 = replica(&url, dir.path(), "r3", &[]);
    let turns = foldline_wasmtime::import::demo_conversation(400);
    let post = |r: &Server, i: usize| {
        let (s, v) = call(
            "POST",
            &format!("{}/api/conversations/c/messages", r.base),
            Some(&turns[i].to_string()),
        );
        assert_eq!(s, 201, "{v}");
    };
    // Below the trigger, through every replica in turn.
    for i in 0..40 {
        post([&r1, &r2, &r3][i % 3], i);
    }
    // r1 takes a manual task; its model call waits; r1 is stopped (SIGSTOP)
    // while it holds the lease.
    let (s, v) = call(
        "POST",
        &format!("{}/api/conversations/c/condense", r1.base),
        None,
    );
    assert_eq!(s, 202, "{v}");
    let stale_task = v["events"].as_str().unwrap().to_owned();
    let pid = r1.child.id().to_string();
    assert!(Command::new("kill")
        .args(["-STOP", &pid])
        .status()
        .unwrap()
        .success());
    // The lease (1 s) lapses; r2 and r3 go on and compact automatically.
    std::thread::sleep(Duration::from_millis(1_500));
    for i in 40..220 {
        post([&r2, &r3][i % 2], i);
    }
    let start = Instant::now();
    loop {
        let (_, v) = call(
            "GET",
            &format!("{}/api/conversations/c/verify", r3.base),
            None,
        );
        if v["resolution"]["accepted"]
            .as_array()
            .is_some_and(|a| !a.is_empty())
        {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "no automatic compaction: {v}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    // r1 wakes up and its model answers: its fenced append is refused.
    std::fs::write(&gate, "open").unwrap();
    assert!(Command::new("kill")
        .args(["-CONT", &pid])
        .status()
        .unwrap()
        .success());
    assert_eq!(last_event(&format!("{}{stale_task}", r2.base)), "failed");
    // Manual tasks from the live replicas, and more messages from all.
    for (k, i) in (220..320).enumerate() {
        post([&r1, &r2, &r3][i % 3], i);
        if k % 25 == 24 {
            let r = [&r2, &r3][k % 2];
            let (s, v) = call(
                "POST",
                &format!("{}/api/conversations/c/condense", r.base),
                None,
            );
            if s == 202 {
                let end = last_event(&format!("{}{}", r.base, v["events"].as_str().unwrap()));
                assert!(end == "completed" || end == "failed", "{end}");
            } else {
                assert!(s == 409, "{s} {v}");
            }
        }
    }
    // A replica killed outright; the others go on.
    drop(r3);
    for i in 320..360 {
        post([&r1, &r2][i % 2], i);
    }
    std::thread::sleep(Duration::from_millis(500));
    // One chain: every boundary accepted, every message once, in order.
    let j = PgJournal::open(&url).unwrap();
    let events = j.read_events("c", 0).unwrap();
    let seqs: Vec<u64> = events
        .iter()
        .filter_map(|s| match &s.event {
            Event::Message(m) => Some(m.source_seq),
            _ => None,
        })
        .collect();
    assert_eq!(
        seqs,
        (1..=360).collect::<Vec<u64>>(),
        "every message once, numbered in order"
    );
    let boundaries = events
        .iter()
        .filter(|s| matches!(s.event, Event::Boundary(_)))
        .count();
    let (_, v) = call(
        "GET",
        &format!("{}/api/conversations/c/verify", r2.base),
        None,
    );
    assert_eq!(v["ok"], true, "{v}");
    assert_eq!(
        v["resolution"]["accepted"].as_array().unwrap().len(),
        boundaries,
        "every boundary on the one chain (no fork)"
    );
    assert!(boundaries >= 2, "{boundaries}");
    // The stale replica wrote no boundary: none of them carries its summary.
    assert!(!events
        .iter()
        .any(|s| matches!(&s.event, Event::Boundary(b) if b.summary.contains("stale"))));
}

/// Three replicas on one database, hit at once: condense and answers on
/// every replica never collide (ids are random, so no two replicas issue
/// the same task or answer id, and no two answers ever share the writer
/// lease's holder); never a 5xx; at most one answer holds the session at a
/// time.
#[test]
fn simultaneous_condense_and_answers_on_three_replicas_never_collide() {
    let pg = Pg::start();
    let url = pg.database("collide");
    let dir = replica_files();
    let rs: Vec<Server> = ["r1", "r2", "r3"]
        .iter()
        .map(|n| replica(&url, dir.path(), n, &[]))
        .collect();
    let turns = foldline_wasmtime::import::demo_conversation(60);
    for (i, t) in turns.iter().enumerate() {
        let (s, v) = call(
            "POST",
            &format!("{}/api/conversations/c/messages", rs[i % 3].base),
            Some(&t.to_string()),
        );
        assert_eq!(s, 201, "{v}");
    }
    let bases: Vec<String> = rs.iter().map(|r| r.base.clone()).collect();
    let mut task_ids = std::collections::BTreeSet::new();
    for round in 0..10 {
        let path = if round % 2 == 0 { "condense" } else { "answer" };
        let answers: Vec<(u16, serde_json::Value)> = std::thread::scope(|s| {
            let hs: Vec<_> = bases
                .iter()
                .map(|b| {
                    s.spawn(move || call("POST", &format!("{b}/api/conversations/c/{path}"), None))
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).collect()
        });
        for (s, v) in &answers {
            assert!(*s < 500, "round {round} {path}: {s} {v}");
        }
        let won: Vec<&serde_json::Value> = answers
            .iter()
            .filter(|(s, _)| *s == 201 || *s == 202)
            .map(|(_, v)| v)
            .collect();
        if path == "answer" {
            assert!(
                won.len() <= 1,
                "round {round}: {} answers hold the session",
                won.len()
            );
            for v in &won {
                let id = v["answer"].as_str().unwrap();
                assert!(task_ids.insert(id.to_owned()), "{id} issued twice");
                let (s, v) = call(
                    "DELETE",
                    &format!("{}/api/conversations/c/answer/{id}", bases[round % 3]),
                    None,
                );
                assert_eq!(s, 204, "{v}");
            }
        } else {
            for v in &won {
                let events = v["events"].as_str().unwrap();
                assert!(task_ids.insert(events.to_owned()), "{events} issued twice");
                let end = last_event(&format!("{}{events}", bases[0]));
                assert!(end == "completed" || end == "failed", "{end}");
            }
        }
    }
    let (s, v) = call(
        "GET",
        &format!("{}/api/conversations/c/verify", bases[1]),
        None,
    );
    assert_eq!((s, &v["ok"]), (200, &serde_json::json!(true)), "{v}");
}

/// The per-member condense rate is one for all replicas: nine requests at
/// once, three on each of three replicas, and exactly the two a minute
/// allows are taken (the others `429 rate_limited`), however they race.
#[test]
fn replicas_share_the_condense_rate() {
    let pg = Pg::start();
    let url = pg.database("rate");
    let dir = replica_files();
    let rs: Vec<Server> = ["r1", "r2", "r3"]
        .iter()
        .map(|n| replica(&url, dir.path(), n, &["--condense-per-minute", "2"]))
        .collect();
    for t in foldline_wasmtime::import::demo_conversation(20) {
        let (s, v) = call(
            "POST",
            &format!("{}/api/conversations/c/messages", rs[0].base),
            Some(&t.to_string()),
        );
        assert_eq!(s, 201, "{v}");
    }
    let answers: Vec<(u16, serde_json::Value)> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..9)
            .map(|i| {
                let b = &rs[i % 3].base;
                s.spawn(move || call("POST", &format!("{b}/api/conversations/c/condense"), None))
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let limited = answers
        .iter()
        .filter(|(s, v)| *s == 429 && v["error"]["code"] == "rate_limited")
        .count();
    assert_eq!(limited, 7, "{answers:?}");
}

/// A long poll waiting on one replica is answered by a write on another:
/// the append notifies, and the first replica's watch of the journal wakes
/// the requests waiting on that conversation (their wait, 20 s, is far
/// from up when the answer comes with the event).
#[test]
fn a_write_on_one_replica_answers_a_long_poll_on_another() {
    let pg = Pg::start();
    let url = pg.database("watched");
    let dir = replica_files();
    let (r1, r2) = (
        replica(&url, dir.path(), "r1", &[]),
        replica(&url, dir.path(), "r2", &[]),
    );
    answered_across(&r1, &r2, "w");
}

/// A replica whose watch of the journal was cut (its connection ended by
/// the database: a restart, an administrator) listens again on a new
/// connection, and meanwhile its waiting requests still see what the
/// other replicas write.
#[test]
fn a_replica_whose_watch_was_cut_watches_again() {
    let pg = Pg::start();
    let url = pg.database("rewatched");
    let dir = replica_files();
    let (r1, r2) = (
        replica(&url, dir.path(), "r1", &[]),
        replica(&url, dir.path(), "r2", &[]),
    );
    let mut admin = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    let watching = |admin: &mut postgres::Client| {
        let until = Instant::now() + Duration::from_secs(20);
        loop {
            let n: i64 = admin
                .query_one(
                    "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'foldline watch' AND datname = current_database()",
                    &[],
                )
                .unwrap()
                .get(0);
            if n == 2 || Instant::now() > until {
                return n;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    };
    assert_eq!(watching(&mut admin), 2, "each replica watches the journal");
    admin
        .execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'foldline watch' AND datname = current_database()",
            &[],
        )
        .unwrap();
    answered_across(&r1, &r2, "cut");
    assert_eq!(watching(&mut admin), 2, "each replica watches again");
    answered_across(&r2, &r1, "rewatched");
}

/// Replicas connected through PgBouncer in session mode, as many
/// deployments run them: they start (the journal's session settings are
/// SET on each connection: PgBouncer refuses the `options` startup
/// parameter), write, compact, and a long poll on one hears a write on the
/// other (`LISTEN` works in session mode; the watch checks it hears).
#[test]
fn replicas_behind_pgbouncer_in_session_mode() {
    let pg = Pg::start();
    pg.database("bounced");
    let bouncer = support::pg::Bouncer::start(&pg, "session");
    let url = bouncer.url("bounced");
    let dir = replica_files();
    let (r1, r2) = (
        replica(&url, dir.path(), "r1", &[]),
        replica(&url, dir.path(), "r2", &[]),
    );
    answered_across(&r1, &r2, "b1");
    answered_across(&r2, &r1, "b2");
    // Past the trigger through both, in turn: the conversation compacts.
    let turns = foldline_wasmtime::import::demo_conversation(200);
    for (i, t) in turns.iter().enumerate() {
        let r = [&r1, &r2][i % 2];
        let (s, v) = call(
            "POST",
            &format!("{}/api/conversations/long/messages", r.base),
            Some(&t.to_string()),
        );
        assert_eq!(s, 201, "{v}");
    }
    let until = Instant::now() + Duration::from_secs(30);
    loop {
        let (s, v) = call(
            "GET",
            &format!("{}/api/conversations/long/verify", r1.base),
            None,
        );
        assert_eq!((s, &v["ok"]), (200, &serde_json::json!(true)), "{v}");
        let accepted = v["resolution"]["accepted"].as_array().map_or(0, Vec::len);
        if accepted > 0 || Instant::now() > until {
            assert!(accepted > 0, "no boundary after 200 turns: {v}");
            break;
        }
        std::thread::sleep(Duration::from_millis(300));
    }
}

/// A long poll on `waiting` for conversation `conv` (a new one) is answered
/// with the message then written through `writing`.
fn answered_across(waiting: &Server, writing: &Server, conv: &str) {
    let turns = foldline_wasmtime::import::demo_conversation(2);
    let on = |r: &Server| format!("{}/api/conversations/{conv}", r.base);
    let (s, v) = call(
        "POST",
        &format!("{}/messages", on(waiting)),
        Some(&turns[0].to_string()),
    );
    assert_eq!(s, 201, "{v}");
    // Where the conversation stands once its automatic check wrote.
    let mut last = 0;
    loop {
        std::thread::sleep(Duration::from_millis(300));
        let (_, v) = call("GET", &format!("{}/events?after=0", on(waiting)), None);
        let now = v["last"].as_u64().unwrap();
        if now == last {
            break;
        }
        last = now;
    }
    let url = format!("{}/events?after={last}&wait=20000", on(waiting));
    let started = Instant::now();
    let poll = std::thread::spawn(move || call("GET", &url, None));
    std::thread::sleep(Duration::from_millis(500));
    let (s, v) = call(
        "POST",
        &format!("{}/messages", on(writing)),
        Some(&turns[1].to_string()),
    );
    assert_eq!(s, 201, "{v}");
    let (s, v) = poll.join().unwrap();
    assert_eq!(s, 200, "{v}");
    assert!(
        v["events"]
            .as_array()
            .is_some_and(|e| e.iter().any(|e| e["event"]["type"] == "message")),
        "the poll was answered without the other replica's message: {v}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "answered only when its wait was up"
    );
}
