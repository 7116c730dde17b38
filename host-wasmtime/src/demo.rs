//! `foldline demo`: a conversation through the whole loop, offline, with
//! what the model is sent at the end. Part of the `foldline` program
//! (main.rs), not of the library.

use std::process::ExitCode;

use foldline_wasmtime::driver::ContextOptions;
use foldline_wasmtime::journal::Journal;
use foldline_wasmtime::serve::Location;
use foldline_wasmtime::{import, HostError};

use crate::import_cmd::import_events;
use crate::{driver, print_timeline, route, Cli, ProgramDriver};

pub(crate) fn demo(cli: &Cli, turns: usize) -> Result<ExitCode, HostError> {
    let (at, conv) = demo_journal(&cli.journal);
    let path = match &at {
        Location::Sqlite(p) => p.display().to_string(),
        Location::Postgres(u) => u.clone(),
    };
    let d = driver(cli, at)?;
    let conv = conv.as_str();
    let messages = import::demo_conversation(turns);
    let text: String = messages.iter().map(|m| format!("{m}\n")).collect();
    let events = import::parse(&text, &route(conv), 0)?;
    let started = std::time::Instant::now();
    import_events(&d, conv, events, true, false)?;
    let elapsed = started.elapsed();
    let t = d.timeline(conv)?;
    out!("foldline demo — {} messages through the whole loop (offline: SQLite journal, extractive summarizer)", messages.len());
    out!("artifact {}\n", d.foldline().sha256());
    print_timeline(&t.items, 70);
    let r = d.resolve(conv)?;
    let ctx = d.context(conv, ContextOptions::default())?;
    print_statistics(&d, conv, messages.len(), &r, &ctx)?;
    print_sent(&d, conv, &r, &ctx)?;
    out!(
        "  time: {:.2?} for {} driver passes",
        elapsed,
        messages.len()
    );
    out!("  journal: {path} (conversation {conv})");
    Ok(ExitCode::SUCCESS)
}

/// Where the demo writes: its own SQLite file unless `--journal` named one
/// (the default file is left alone), or its own conversation in a shared
/// PostgreSQL database.
fn demo_journal(journal: &str) -> (Location, String) {
    match Location::parse(journal) {
        Location::Sqlite(p) => {
            let p = if p == std::path::Path::new("foldline.db") {
                std::env::temp_dir().join(format!("foldline-demo-{}.db", std::process::id()))
            } else {
                p
            };
            let _ = std::fs::remove_file(&p);
            (Location::Sqlite(p), "demo".to_owned())
        }
        // A shared database keeps what is there: the demo gets its own conversation.
        pg => {
            let secs = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_secs())
                .unwrap_or(0);
            (pg, format!("demo-{}-{secs}", std::process::id()))
        }
    }
}

/// The demo's compaction statistics: the journal, the boundaries, the context.
fn print_statistics(
    d: &ProgramDriver,
    conv: &str,
    messages: usize,
    r: &foldline_core::resolve::Resolution,
    ctx: &foldline_core::select::Selection,
) -> Result<(), HostError> {
    let all: u64 = d
        .journal()
        .read_events(conv, 0)?
        .iter()
        .filter_map(|s| match &s.event {
            foldline_core::event::Event::Message(m) => {
                Some(foldline_core::turn::parts_chars(&m.parts))
            }
            _ => None,
        })
        .sum();
    let bs: Vec<_> = d
        .journal()
        .read_events(conv, 0)?
        .into_iter()
        .filter_map(|s| match s.event {
            foldline_core::event::Event::Boundary(b) => Some(b),
            _ => None,
        })
        .collect();
    out!("\ncompaction statistics");
    out!(
        "  journal: {} messages, {all} characters (never edited)",
        messages
    );
    out!(
        "  boundaries: {} (chain {})",
        bs.len(),
        if r.head.is_some() { "intact" } else { "empty" }
    );
    for (i, b) in bs.iter().enumerate() {
        out!(
            "    #{:<2} through source {:<4} {:>4} turns folded  context {:>6} -> {:>6} chars  ({})",
            i + 1, b.covered_through_seq, b.input.turn_count, b.stats.before.chars, b.stats.after.chars, b.run.model_id
        );
    }
    out!(
        "  model-bound context now: {} messages, {} {unit} of the {} budget, {} exact turns after the summary",
        ctx.manifest.message_count, ctx.manifest.sizes.total, ctx.manifest.limit, ctx.manifest.included.len(),
        unit = ctx.manifest.metric.as_str()
    );
    Ok(())
}

/// What the model is sent now: the envelope, then the exact tail.
fn print_sent(
    d: &ProgramDriver,
    conv: &str,
    r: &foldline_core::resolve::Resolution,
    ctx: &foldline_core::select::Selection,
) -> Result<(), HostError> {
    out!("\nwhat the model is sent now");
    if let Some(h) = &r.head {
        let preview: String = h.summary.chars().take(320).collect();
        out!("  1. user  [untrusted-history-summary] envelope, {} chars of summary covering sources 1..={}:", h.summary.chars().count(), h.covered_through_seq);
        for line in preview.lines().take(6) {
            out!("       | {line}");
        }
        if h.summary.chars().count() > 320 {
            out!("       | …");
        }
    }
    if let Some(first) = ctx.manifest.included.first() {
        let tail = d.journal().read_events(conv, 0)?;
        let seq = tail.iter().find_map(|s| match &s.event {
            foldline_core::event::Event::Message(m) if &m.turn_id == first => Some(m.source_seq),
            _ => None,
        });
        out!(
            "  2. then {} exact turns, verbatim, from source {} ({first}) to the newest",
            ctx.manifest.included.len(),
            seq.map(|s| s.to_string()).unwrap_or_else(|| "?".into())
        );
    }
    Ok(())
}
