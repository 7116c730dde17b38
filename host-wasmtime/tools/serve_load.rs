//! A load test of `foldline serve` on loopback: many members, each with
//! their own conversations, append concurrently over real HTTP while manual
//! compactions run and their event streams are read to the end. Afterwards
//! every conversation is checked: every message is in the journal (nothing
//! lost), the chain verifies (no fork), every accepted task has exactly one
//! terminal event. Prints one JSON object with throughput and latencies;
//! exits 1 if an invariant broke.
//!
//! `cargo run -p foldline-wasmtime --example serve_load -- [--quick] [--postgres [--replicas N]] [--vs-bare]`
//! (quick: 4 members × 2 conversations × 120 messages; default: 8 × 4 × 400).
//! With `--vs-bare` (SQLite), the same clients then send the same messages,
//! appends only, to a fresh `foldline serve` and to a bare axum + rusqlite
//! server that does only the durable insert (one transaction per message,
//! the journal's WAL settings) and nothing else: `serve_vs_bare_axum` is
//! foldline's appends per second over the bare server's, both in this run,
//! foldline's time running until its server stopped (so the automatic
//! checks and compactions the appends caused are counted).
//! With `--postgres` a PostgreSQL server is started for the run (Debian's
//! binaries) and N server replicas share it; clients spread their requests
//! over the replicas round-robin.

use std::io::{BufRead, BufReader};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use foldline_core::event::{Event, TaskState};
use foldline_wasmtime::driver::Driver;
use foldline_wasmtime::import::demo_conversation;
use foldline_wasmtime::journal::PgJournal;
use foldline_wasmtime::journal::{Journal, SqliteJournal};
use foldline_wasmtime::model::{Extractive, Model};
use foldline_wasmtime::runtime::Foldline;
use foldline_wasmtime::serve::{self, hash_token, Location, Members, ServeConfig};
use serde_json::{json, Value};

#[path = "../tests/support/fixtures.rs"]
#[allow(dead_code)]
mod fixtures;
#[path = "../tests/support/pg.rs"]
mod pg;

fn percentile(sorted: &[Duration], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i].as_secs_f64() * 1000.0
}

/// The bare server of `--vs-bare`: axum + rusqlite, the same route, one
/// durable insert per message after parsing its JSON — the floor a
/// journal-backed HTTP append can reach on this machine.
mod bare {
    use std::sync::{Arc, Mutex};

    use axum::body::Bytes;
    use axum::extract::{Path, State};
    use axum::http::StatusCode;
    use rusqlite::{params, Connection, TransactionBehavior};

    type Db = Arc<Mutex<Connection>>;

    async fn append(State(db): State<Db>, Path(id): Path<String>, body: Bytes) -> StatusCode {
        if serde_json::from_slice::<serde_json::Value>(&body).is_err() {
            return StatusCode::BAD_REQUEST;
        }
        let text = String::from_utf8_lossy(&body).into_owned();
        let done = tokio::task::spawn_blocking(move || -> rusqlite::Result<()> {
            let mut c = db.lock().unwrap_or_else(|p| p.into_inner());
            let tx = c.transaction_with_behavior(TransactionBehavior::Immediate)?;
            let seq: i64 = tx.query_row(
                "SELECT COALESCE(MAX(seq), 0) FROM events WHERE conversation = ?1",
                params![id],
                |r| r.get(0),
            )?;
            tx.execute(
                "INSERT INTO events (conversation, seq, body) VALUES (?1, ?2, ?3)",
                params![id, seq + 1, text],
            )?;
            tx.commit()
        })
        .await;
        match done {
            Ok(Ok(())) => StatusCode::CREATED,
            _ => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// Serve on a loopback port until `stop`; answers the address.
    pub fn start(
        path: &std::path::Path,
    ) -> (
        String,
        tokio::sync::oneshot::Sender<()>,
        std::thread::JoinHandle<()>,
    ) {
        let c = Connection::open(path).expect("bare db");
        c.execute_batch(
            "PRAGMA journal_mode = WAL; PRAGMA busy_timeout = 10000;
             CREATE TABLE IF NOT EXISTS events (conversation TEXT NOT NULL, seq INTEGER NOT NULL, body TEXT NOT NULL, PRIMARY KEY (conversation, seq));",
        )
        .expect("bare schema");
        let db: Db = Arc::new(Mutex::new(c));
        let (addr_tx, addr_rx) = std::sync::mpsc::channel();
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .enable_all()
                .build()
                .expect("runtime");
            rt.block_on(async move {
                let app = axum::Router::new()
                    .route(
                        "/api/conversations/{id}/messages",
                        axum::routing::post(append),
                    )
                    .with_state(db);
                let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
                    .await
                    .expect("bind");
                let _ = addr_tx.send(listener.local_addr().expect("addr"));
                let _ = axum::serve(listener, app)
                    .with_graceful_shutdown(async {
                        let _ = stop_rx.await;
                    })
                    .await;
            });
        });
        let addr = addr_rx.recv().expect("listening");
        (format!("http://{addr}"), stop_tx, thread)
    }
}

/// Each member's client thread sends `messages` turns to each of its
/// `convs` conversations, round-robin over `bases`; answers the append
/// latencies (sorted) and when the clients started.
fn appends_only(
    bases: &[String],
    tokens: &[(String, String)],
    turns: &[Value],
    convs: usize,
) -> (Vec<Duration>, Instant) {
    let agent = ureq::AgentBuilder::new()
        .timeout(Duration::from_secs(60))
        .build();
    let latencies = Arc::new(Mutex::new(Vec::new()));
    let start = Instant::now();
    let workers: Vec<_> = tokens
        .iter()
        .cloned()
        .map(|(member, token)| {
            let (agent, bases, turns) = (agent.clone(), bases.to_vec(), turns.to_vec());
            let latencies = latencies.clone();
            std::thread::spawn(move || {
                for (i, turn) in turns.iter().enumerate() {
                    for c in 0..convs {
                        let base = &bases[(i + c) % bases.len()];
                        let t = Instant::now();
                        let r = agent
                            .post(&format!("{base}/api/conversations/{member}-c{c}/messages"))
                            .set("Authorization", &format!("Bearer {token}"))
                            .send_string(&turn.to_string());
                        assert_eq!(r.map(|r| r.status()).ok(), Some(201), "append");
                        latencies.lock().unwrap().push(t.elapsed());
                    }
                }
            })
        })
        .collect();
    for w in workers {
        w.join().expect("a client thread failed");
    }
    let mut l = latencies.lock().unwrap().clone();
    l.sort();
    (l, start)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let quick = args.iter().any(|a| a == "--quick");
    let postgres = args.iter().any(|a| a == "--postgres");
    let replicas: usize = args
        .iter()
        .position(|a| a == "--replicas")
        .and_then(|i| args.get(i + 1))
        .and_then(|n| n.parse().ok())
        .unwrap_or(1);
    assert!(
        postgres || replicas == 1,
        "several replicas need --postgres: a SQLite file serves one machine"
    );
    let (members, convs, messages) = if quick { (4, 2, 120) } else { (8, 4, 400) };
    let dir = tempfile::tempdir().expect("temp dir");
    let server_pg = postgres.then(pg::Pg::start_durable);
    let location = match &server_pg {
        Some(p) => Location::Postgres(p.database("load")),
        None => Location::Sqlite(dir.path().join("load.db")),
    };
    let open = |at: &Location| -> Box<dyn Journal> {
        match at {
            Location::Sqlite(p) => Box::new(SqliteJournal::open(p).expect("journal")),
            Location::Postgres(u) => Box::new(PgJournal::open(u).expect("journal")),
        }
    };
    let tokens: Vec<(String, String)> = (0..members)
        .map(|m| (format!("member-{m}"), format!("token-{m}-secret")))
        .collect();
    let file = json!({"members": tokens.iter().map(|(id, t)| json!({"id": id, "tokenSha256": hash_token(t)})).collect::<Vec<_>>()});
    let members_set = Members::parse(&file.to_string()).expect("members");
    let decl = fixtures::small_decl;
    let start_replica = |r: usize, at: &Location| {
        let model: Box<dyn Model + Send + Sync> = Box::new(Extractive);
        let driver = Driver::new(
            Foldline::embedded().expect("artifact"),
            open(at),
            model,
            decl(),
        );
        let mut config = ServeConfig::new(
            "127.0.0.1:0".parse().expect("addr"),
            at.clone(),
            members_set.clone(),
        );
        config.condense_per_minute = 1_000;
        config.replica = format!("r{r}");
        let (addr_tx, addr_rx) = std::sync::mpsc::channel();
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let server = std::thread::spawn(move || {
            serve::serve(
                driver,
                config,
                move |a| {
                    let _ = addr_tx.send(a);
                },
                async move {
                    let _ = stop_rx.await;
                },
            )
        });
        let base = format!("http://{}", addr_rx.recv().expect("listening"));
        (base, server, stop_tx)
    };
    let mut servers = Vec::new();
    let mut bases = Vec::new();
    for r in 0..replicas {
        let (base, server, stop_tx) = start_replica(r, &location);
        bases.push(base);
        servers.push((server, stop_tx));
    }
    let agent = ureq::AgentBuilder::new()
        .timeout(Duration::from_secs(60))
        .build();
    let turns = demo_conversation(messages);
    let latencies = Arc::new(Mutex::new((Vec::new(), Vec::new())));
    let tasks = Arc::new(Mutex::new(Vec::<(String, String, String)>::new()));
    let start = Instant::now();
    let workers: Vec<_> = tokens
        .iter()
        .cloned()
        .map(|(member, token)| {
            let (agent, bases, turns) = (agent.clone(), bases.clone(), turns.clone());
            let (latencies, tasks) = (latencies.clone(), tasks.clone());
            std::thread::spawn(move || {
                for (i, turn) in turns.iter().enumerate().take(messages) {
                    for c in 0..convs {
                        let base = &bases[(i + c) % bases.len()];
                        let conv = format!("{member}-c{c}");
                        let url = format!("{base}/api/conversations/{conv}");
                        let t = Instant::now();
                        let r = agent
                            .post(&format!("{url}/messages"))
                            .set("Authorization", &format!("Bearer {token}"))
                            .send_string(&turn.to_string());
                        let took = t.elapsed();
                        assert_eq!(r.map(|r| r.status()).ok(), Some(201), "append {conv}");
                        latencies.lock().unwrap().0.push(took);
                        if i % 40 == 39 {
                            let t = Instant::now();
                            let r = agent
                                .post(&format!("{url}/condense"))
                                .set("Authorization", &format!("Bearer {token}"))
                                .call();
                            latencies.lock().unwrap().1.push(t.elapsed());
                            if let Ok(r) = r {
                                let v: Value = r.into_json().expect("json");
                                let events =
                                    format!("{base}{}", v["events"].as_str().unwrap_or(""));
                                let resp = agent
                                    .get(&events)
                                    .set("Authorization", &format!("Bearer {token}"))
                                    .call()
                                    .expect("events");
                                let mut last = String::new();
                                for line in BufReader::new(resp.into_reader()).lines() {
                                    let line = line.expect("stream");
                                    if let Some(e) = line.strip_prefix("event:") {
                                        last = e.trim().to_owned();
                                    }
                                }
                                let task = v["task"].as_str().unwrap_or("").to_owned();
                                tasks.lock().unwrap().push((conv.clone(), task, last));
                            }
                        }
                    }
                }
            })
        })
        .collect();
    for w in workers {
        w.join().expect("a client thread failed");
    }
    let elapsed = start.elapsed();
    // Let the last automatic checks finish, then stop the server gracefully.
    std::thread::sleep(Duration::from_millis(500));
    for (server, stop_tx) in servers {
        let _ = stop_tx.send(());
        server.join().expect("server thread").expect("server");
    }

    let check = Driver::new(
        Foldline::embedded().expect("artifact"),
        open(&location),
        Extractive,
        decl(),
    );
    let mut broken = Vec::new();
    let mut boundaries = 0;
    for (member, _) in &tokens {
        for c in 0..convs {
            let conv = format!("{member}-c{c}");
            let events = check.journal().read_events(&conv, 0).expect("read");
            let msgs = events
                .iter()
                .filter(|s| matches!(s.event, Event::Message(_)))
                .count();
            if msgs != messages {
                broken.push(format!("{conv}: {msgs} of {messages} messages"));
            }
            let b = events
                .iter()
                .filter(|s| matches!(s.event, Event::Boundary(_)))
                .count();
            boundaries += b;
            match check.resolve(&conv) {
                Ok(r) if r.accepted.len() == b => {}
                Ok(r) => broken.push(format!(
                    "{conv}: {} of {b} boundaries accepted",
                    r.accepted.len()
                )),
                Err(e) => broken.push(format!("{conv}: chain does not verify: {e}")),
            }
            for (tc, task, last) in tasks.lock().unwrap().iter() {
                if *tc != conv {
                    continue;
                }
                let ends = events
                    .iter()
                    .filter(|s| matches!(&s.event, Event::CompactionTask(t) if t.task_id == *task && t.state != TaskState::Requested))
                    .count();
                if ends != 1 || (last != "completed" && last != "failed") {
                    broken.push(format!(
                        "{conv}: task {task} has {ends} terminal events, stream ended at {last:?}"
                    ));
                }
            }
        }
    }
    let (mut appends, mut condenses) = latencies.lock().unwrap().clone();
    appends.sort();
    condenses.sort();
    // `--vs-bare`: the same clients send the same messages, appends only,
    // to a fresh `foldline serve` and then to the bare server. Each run's
    // time ends when its server has stopped — for foldline, once the
    // automatic checks and compactions the appends caused (run after each
    // answer, off the request's path) have finished too.
    let vs_bare = args.iter().any(|a| a == "--vs-bare").then(|| {
        assert!(!postgres, "--vs-bare compares on SQLite");
        let sent = &turns[..messages.min(turns.len())];
        let rate = |l: &[Duration], seconds: f64| {
            json!({
                "appends_per_second": l.len() as f64 / seconds,
                "append_p50_ms": percentile(l, 0.50),
                "append_p99_ms": percentile(l, 0.99),
                "seconds": seconds,
            })
        };
        let only = Location::Sqlite(dir.path().join("only.db"));
        let (base, server, stop) = start_replica(0, &only);
        let (l, start) = appends_only(&[base], &tokens, sent, convs);
        let _ = stop.send(());
        server.join().expect("server thread").expect("server");
        let mut foldline = rate(&l, start.elapsed().as_secs_f64());
        // What the automatic checks wrote meanwhile: the run compacts.
        let journal = open(&only);
        let written = |kind: fn(&Event) -> bool| {
            tokens
                .iter()
                .flat_map(|(m, _)| (0..convs).map(move |c| format!("{m}-c{c}")))
                .map(|conv| {
                    let events = journal.read_events(&conv, 0).expect("read");
                    events.iter().filter(|s| kind(&s.event)).count()
                })
                .sum::<usize>()
        };
        foldline["messages"] = json!(written(|e| matches!(e, Event::Message(_))));
        foldline["boundaries"] = json!(written(|e| matches!(e, Event::Boundary(_))));
        let (base, stop, thread) = bare::start(&dir.path().join("bare.db"));
        let (l, start) = appends_only(&[base], &tokens, sent, convs);
        let _ = stop.send(());
        thread.join().expect("bare server");
        let bare = rate(&l, start.elapsed().as_secs_f64());
        (foldline, bare)
    });
    let ratio = vs_bare.as_ref().map(|(f, b)| {
        f["appends_per_second"].as_f64().unwrap_or(f64::NAN)
            / b["appends_per_second"].as_f64().unwrap_or(f64::NAN)
    });
    let (appends_only_run, bare) = vs_bare.unzip();
    let out = json!({
        "profile": if quick { "quick" } else { "full" },
        "journal": if postgres { "postgres" } else { "sqlite" },
        "replicas": replicas,
        "members": members,
        "conversations": members * convs,
        "messages": appends.len(),
        "seconds": elapsed.as_secs_f64(),
        "appends_per_second": appends.len() as f64 / elapsed.as_secs_f64(),
        "append_p50_ms": percentile(&appends, 0.50),
        "append_p99_ms": percentile(&appends, 0.99),
        "condense_requests": condenses.len(),
        "condense_p99_ms": percentile(&condenses, 0.99),
        "tasks_streamed": tasks.lock().unwrap().len(),
        "boundaries": boundaries,
        "broken": broken,
        "appends_only": appends_only_run,
        "bare": bare,
        "serve_vs_bare_axum": ratio,
    });
    println!("{out}");
    if !out["broken"].as_array().is_some_and(|b| b.is_empty()) {
        std::process::exit(1);
    }
}
