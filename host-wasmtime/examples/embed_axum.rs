//! Embedding foldline in an axum service of your own (docs/embedding.md):
//! your runtime, your listener, a route of yours beside foldline's; the
//! driver called from async code on the blocking pool (`spawn_blocking`);
//! a model from an async function; a journal of your own, checked by the
//! exported contract suite. Runs in CI (tests/run): it exits 0 only when
//! every step answered as expected.
//!
//!   cargo run -p foldline-wasmtime --example embed_axum

use std::collections::BTreeMap;
use std::error::Error;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::{routing::get, Router};
use foldline_core::declaration::Declaration;
use foldline_core::event::Event;
use foldline_core::packet::Packet;
use foldline_wasmtime::driver::{ContextOptions, Driver, Outcome};
use foldline_wasmtime::journal::{self, Journal, SqliteJournal, StoredEvent};
use foldline_wasmtime::model::{model_fn, ModelError};
use foldline_wasmtime::runtime::Foldline;
use foldline_wasmtime::serve::{hash_token, Location, Members, ServeConfig, Server};

/// A journal of your own: here in memory (yours would be your database).
/// The contract (docs/journal.md) is in the exported helpers it calls:
/// the append check, turn claims, chain slots; `journal::contract::check`
/// proves it.
#[derive(Default)]
struct MemJournal {
    state: Mutex<MemState>,
}

#[derive(Default)]
struct MemState {
    events: BTreeMap<String, Vec<Event>>,
    turns: BTreeMap<(String, String), String>,
    slots: std::collections::BTreeSet<(String, String)>,
    packets: BTreeMap<(String, String), Packet>,
    /// conversation → (holder, until_ms, fencing token)
    leases: BTreeMap<String, (String, u64, u64)>,
    /// conversation → the compactor's progress watermark
    progress: BTreeMap<String, journal::Progress>,
}

type HostResult<T> = foldline_wasmtime::Result<T>;

impl Journal for MemJournal {
    fn read_events(&self, conversation: &str, since: u64) -> HostResult<Vec<StoredEvent>> {
        let s = self.state.lock().unwrap();
        Ok(s.events
            .get(conversation)
            .map(|es| {
                es.iter()
                    .zip(1..)
                    .skip(since as usize)
                    .map(|(e, seq)| StoredEvent {
                        seq,
                        event: e.clone(),
                    })
                    .collect()
            })
            .unwrap_or_default())
    }

    fn append_batch(
        &self,
        conversation: &str,
        events: &[Event],
        expected: Option<u64>,
        fence: Option<u64>,
    ) -> HostResult<u64> {
        let events = journal::check_batch(conversation, events)?;
        let claims = journal::turn_claims(&events)?;
        let mut s = self.state.lock().unwrap();
        let head = s.events.get(conversation).map_or(0, Vec::len) as u64;
        if let Some(fence) = fence {
            if s.leases.get(conversation).map(|l| l.2) != Some(fence) {
                return Err(foldline_wasmtime::HostError::LeaseLost { fence });
            }
        }
        if let Some(expected) = expected {
            if expected != head {
                return Err(foldline_wasmtime::HostError::Conflict {
                    expected,
                    found: head,
                });
            }
        }
        // Check everything before writing anything: all or nothing.
        for (turn, claim) in &claims {
            let key = (conversation.to_owned(), turn.clone());
            if s.turns.get(&key).is_some_and(|held| held != claim) {
                return Err(journal::conflicting_turn(turn));
            }
        }
        let slots: Vec<_> = events
            .iter()
            .filter_map(journal::chain_slot)
            .map(|slot| (conversation.to_owned(), slot))
            .collect();
        if slots.iter().any(|slot| s.slots.contains(slot))
            || slots
                .iter()
                .collect::<std::collections::BTreeSet<_>>()
                .len()
                < slots.len()
        {
            return Err(journal::fork());
        }
        for (turn, claim) in claims {
            s.turns.insert((conversation.to_owned(), turn), claim);
        }
        s.slots.extend(slots);
        let log = s.events.entry(conversation.to_owned()).or_default();
        log.extend(events);
        Ok(log.len() as u64)
    }

    fn put_packet(&self, conversation: &str, packet: &Packet) -> HostResult<()> {
        let mut s = self.state.lock().unwrap();
        s.packets
            .entry((conversation.to_owned(), packet.id.clone()))
            .or_insert_with(|| packet.clone());
        Ok(())
    }

    fn get_packet(&self, conversation: &str, id: &str) -> HostResult<Option<Packet>> {
        let s = self.state.lock().unwrap();
        Ok(s.packets
            .get(&(conversation.to_owned(), id.to_owned()))
            .cloned())
    }

    fn list_packets(&self, conversation: &str) -> HostResult<Vec<Packet>> {
        let s = self.state.lock().unwrap();
        Ok(s.packets
            .iter()
            .filter(|((c, _), _)| c == conversation)
            .map(|(_, p)| p.clone())
            .collect())
    }

    fn acquire_lease(
        &self,
        conversation: &str,
        holder: &str,
        now_ms: u64,
        ttl_ms: u64,
    ) -> HostResult<Option<u64>> {
        let mut s = self.state.lock().unwrap();
        let fence = match s.leases.get(conversation) {
            Some((h, until, _)) if h != holder && *until > now_ms => return Ok(None),
            // The same live holder renews under its token.
            Some((h, until, fence)) if h == holder && *until > now_ms => *fence,
            // A new grant: a newer token, so the previous holder's appends are refused.
            Some((_, _, fence)) => fence + 1,
            None => 1,
        };
        s.leases.insert(
            conversation.to_owned(),
            (holder.to_owned(), now_ms.saturating_add(ttl_ms), fence),
        );
        Ok(Some(fence))
    }

    fn note_skipped(
        &self,
        conversation: &str,
        record: &foldline_core::plan::SkipRecord,
    ) -> HostResult<()> {
        let mut s = self.state.lock().unwrap();
        let p = s
            .progress
            .entry(conversation.to_owned())
            .or_insert_with(|| journal::Progress {
                skipped_runs: 0,
                last: record.clone(),
            });
        p.skipped_runs += 1;
        // A late, shorter check does not move the watermark back.
        if record.checked_through_seq >= p.last.checked_through_seq {
            p.last = record.clone();
        }
        Ok(())
    }

    fn progress(&self, conversation: &str) -> HostResult<Option<journal::Progress>> {
        Ok(self
            .state
            .lock()
            .unwrap()
            .progress
            .get(conversation)
            .cloned())
    }

    fn release_lease(&self, conversation: &str, holder: &str) -> HostResult<()> {
        let mut s = self.state.lock().unwrap();
        if let Some(l) = s.leases.get_mut(conversation) {
            if l.0 == holder {
                // The token stays, so the next grant's is still newer.
                l.0.clear();
                l.1 = 0;
            }
        }
        Ok(())
    }
}

/// Your provider call, async as provider clients are.
async fn summarize(turns: u64) -> Result<String, ModelError> {
    tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    Ok(format!(
        "The member and the assistant exchanged {turns} turns about a trip."
    ))
}

fn main() -> Result<(), Box<dyn Error>> {
    // One compiled module per process: only the first load compiles.
    let t = std::time::Instant::now();
    let first = Foldline::embedded()?;
    let first_ms = t.elapsed();
    let t = std::time::Instant::now();
    let second = Foldline::embedded()?;
    println!(
        "Foldline::embedded(): first {:?}, second {:?} (the compiled module shared)",
        first_ms,
        t.elapsed()
    );
    drop((first, second));

    // 0. Your own journal passes the journal contract.
    journal::contract::check(MemJournal::default());
    println!("MemJournal passes journal::contract::check");

    let dir = tempfile::tempdir()?;
    let db = dir.path().join("journal.db");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;

    // 1. The driver from async code. Its calls block (SQLite, the core, the
    //    model), so they run on the blocking pool; the async model runs
    //    through the runtime's handle from there.
    let handle = rt.handle().clone();
    let mut declaration = Declaration::new("assistant", "assistant-compactor");
    declaration.budget = foldline_core::declaration::Budget::Chars {
        trigger: 6_000,
        retain: 2_000,
    };
    let driver = Arc::new(Driver::checked(
        Foldline::embedded()?,
        MemJournal::default(),
        model_fn(move |p: &Packet| handle.block_on(summarize(p.input.turn_count))),
        declaration.clone(),
    )?);
    let compacted = rt.block_on(async {
        let d = driver.clone();
        tokio::task::spawn_blocking(move || -> Result<bool, foldline_wasmtime::HostError> {
            // OpenAI-style messages, numbered by the driver.
            let messages =
                serde_json::Value::from(foldline_wasmtime::import::demo_conversation(60));
            d.append("direct", &messages.to_string())?;
            // The check, then the context, from one read when the check
            // writes nothing.
            let (outcome, ctx) = d.on_message_and_context("direct", ContextOptions::default())?;
            let compacted = matches!(outcome, Outcome::Compacted(_));
            assert!(!ctx.manifest.included.is_empty());
            Ok(compacted)
        })
        .await
    })??;
    assert!(
        compacted,
        "the direct conversation compacted through the async model"
    );
    println!("driver on the blocking pool: compacted with an async model");

    // 2. foldline's HTTP surface mounted in your own router, on your listener.
    let members = Members::parse(
        &serde_json::json!({"members": [{"id": "alice", "tokenSha256": hash_token("alice-token")}]})
            .to_string(),
    )?;
    let server = Arc::new(Server::open(
        Driver::checked(
            Foldline::embedded()?,
            Box::new(SqliteJournal::open(&db)?) as Box<dyn Journal>,
            Box::new(foldline_wasmtime::model::Extractive)
                as Box<dyn foldline_wasmtime::model::Model + Send + Sync>,
            declaration,
        )?,
        ServeConfig::new(
            "127.0.0.1:0".parse()?,
            Location::Sqlite(db.clone()),
            members,
        ),
    )?);
    let app = Router::new()
        .route("/health", get(|| async { "ok" }))
        .merge(server.router());
    let (base, stop) = rt.block_on(async {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let base = format!("http://{}", listener.local_addr()?);
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        tokio::spawn(async move {
            // `axum::serve` with a header timeout (it installs none).
            let stop = async {
                let _ = rx.await;
            };
            foldline_wasmtime::serve::listen::run(listener, app, Duration::from_secs(30), stop)
                .await;
        });
        Ok::<_, std::io::Error>((base, tx))
    })?;
    // A client (blocking ureq, off the runtime's workers).
    let health = ureq::get(&format!("{base}/health")).call()?.into_string()?;
    assert_eq!(health, "ok");
    for i in 0..40 {
        let r = ureq::post(&format!("{base}/api/conversations/trip/messages"))
            .set("Authorization", "Bearer alice-token")
            .send_string(
                &serde_json::json!({"role": if i % 2 == 0 { "user" } else { "assistant" },
                    "content": format!("Message {i} about the trip: {}", "details ".repeat(40))})
                .to_string(),
            )?;
        assert_eq!(r.status(), 201);
    }
    let verify: serde_json::Value = ureq::get(&format!("{base}/api/conversations/trip/verify"))
        .set("Authorization", "Bearer alice-token")
        .call()?
        .into_json()?;
    assert_eq!(verify["ok"], true, "{verify}");
    println!("foldline's routes mounted beside /health: 40 messages in, the chain verifies");
    let _ = stop.send(());
    rt.block_on(server.shutdown());
    println!("embed_axum: ok");
    Ok(())
}
