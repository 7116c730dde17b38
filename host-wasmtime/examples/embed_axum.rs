//! Embedding foldline in an axum service of your own (docs/embedding.md):
//! your runtime, your listener, a route of yours beside foldline's; the
//! driver called from async code on the blocking pool (`spawn_blocking`);
//! a model from an async function. Runs in CI (tests/run): it exits 0 only
//! when every step answered as expected.
//!
//!   cargo run -p foldline-wasmtime --example embed_axum

use std::error::Error;
use std::sync::Arc;

use axum::{routing::get, Router};
use foldline_core::declaration::Declaration;
use foldline_core::packet::Packet;
use foldline_wasmtime::driver::{ContextOptions, Driver, Outcome};
use foldline_wasmtime::journal::{Journal, SqliteJournal};
use foldline_wasmtime::model::{model_fn, ModelError};
use foldline_wasmtime::runtime::Foldline;
use foldline_wasmtime::serve::{hash_token, Location, Members, ServeConfig, Server};

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
        SqliteJournal::open(&db)?,
        model_fn(move |p: &Packet| handle.block_on(summarize(p.input.turn_count))),
        declaration.clone(),
    )?);
    let compacted = rt.block_on(async {
        let d = driver.clone();
        tokio::task::spawn_blocking(move || -> Result<bool, foldline_wasmtime::HostError> {
            let events = foldline_wasmtime::import::parse(
                &foldline_wasmtime::import::demo_conversation(60)
                    .iter()
                    .map(|m| format!("{m}\n"))
                    .collect::<String>(),
                &foldline_core::turn::Route {
                    conversation: "direct".into(),
                    ..Default::default()
                },
                0,
            )?;
            d.journal.append("direct", &events)?;
            let compacted = matches!(d.on_message("direct")?, Outcome::Compacted(_));
            let ctx = d.context("direct", ContextOptions::default())?;
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
            let _ = axum::serve(listener, app)
                .with_graceful_shutdown(async {
                    let _ = rx.await;
                })
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
