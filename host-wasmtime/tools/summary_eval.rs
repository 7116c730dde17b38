//! The summary evaluation: a long chat (public dialogue data, exported by
//! `tests/eval/run`) goes through the real driver once per summarizer; after
//! the 1st, 3rd and 10th compaction, the salient facts of the folded turns —
//! numbers and capitalized names (a word of three or more letters that does
//! not start its sentence) — are looked up in the model-bound context (the
//! summary envelope and the exact tail). Prints the share that survives.
//!
//! `cargo run -p foldline-wasmtime --example summary_eval -- FILE.jsonl`

use std::collections::BTreeSet;

use foldline_core::event::Event;
use foldline_core::packet::{CompactorRole, Packet};
use foldline_core::turn::Part;
use foldline_wasmtime::driver::{ContextOptions, Driver, Outcome};
use foldline_wasmtime::journal::{Journal, SqliteJournal};
use foldline_wasmtime::model::{
    Evidence, Extractive, FirstSentences, Model, ModelError, ModelResult, StreamChunk,
};
use foldline_wasmtime::runtime::Foldline;
use serde_json::json;

#[path = "../tests/support/fixtures.rs"]
#[allow(dead_code)]
mod fixtures;

/// The truncation baseline: the newest folded lines that fit, verbatim.
struct Truncation;

impl Model for Truncation {
    fn stream(&self, p: &Packet, sink: &mut dyn FnMut(StreamChunk)) -> Result<(), ModelError> {
        let r = self.complete(p)?;
        sink(StreamChunk::Delta(r.text.clone()));
        sink(StreamChunk::Done(r.evidence));
        Ok(())
    }
    fn complete(&self, p: &Packet) -> Result<ModelResult, ModelError> {
        let max = p
            .bounds
            .max_chars
            .min(p.bounds.max_tokens.saturating_sub(4) * 4) as usize;
        let transcript = p
            .messages
            .iter()
            .rev()
            .find(|m| m.role == CompactorRole::User)
            .map(|m| m.content.clone())
            .unwrap_or_default();
        let mut kept: Vec<&str> = Vec::new();
        let mut used = 0;
        for line in transcript.lines().rev() {
            let line = line.split_once("] ").map_or(line, |x| x.1);
            if used + line.chars().count() + 1 > max {
                break;
            }
            used += line.chars().count() + 1;
            kept.push(line);
        }
        kept.reverse();
        let text = if kept.is_empty() {
            "(truncated)".to_owned()
        } else {
            kept.join("\n")
        };
        Ok(ModelResult {
            evidence: Evidence {
                model_id: "truncation".into(),
                usage: foldline_core::boundary::Usage {
                    input_tokens: p.input.tokens,
                    output_tokens: 1,
                },
                finish_reason: "stop".into(),
            },
            text,
        })
    }
}

/// Salient facts of a text: numbers, and capitalized words of three or more
/// letters that do not start a sentence; lowercased.
fn facts(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut start = true;
    for raw in text.split_whitespace() {
        let w = raw.trim_matches(|c: char| !c.is_alphanumeric());
        if !w.is_empty() {
            let number = w.chars().any(|c| c.is_ascii_digit());
            let name = !start
                && w.chars().count() >= 3
                && w.chars().next().is_some_and(char::is_uppercase)
                && w.chars().skip(1).any(char::is_lowercase);
            if number || name {
                out.insert(w.to_lowercase());
            }
        }
        start = raw.ends_with(['.', '?', '!']);
    }
    out
}

fn words(text: &str) -> BTreeSet<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect()
}

fn text_of(e: &Event) -> Option<(u64, String)> {
    match e {
        Event::Message(m) => Some((
            m.source_seq,
            m.parts
                .iter()
                .map(|p| match p {
                    Part::Text { text } => text.clone(),
                    Part::ToolCall { arguments, .. } => arguments.clone(),
                    Part::ToolResult { content, .. } => content.clone(),
                    Part::ApprovalResponse { reason, .. } => reason.clone(),
                    Part::ApprovalRequest { .. } | Part::Reasoning { .. } => String::new(),
                })
                .collect::<Vec<_>>()
                .join(" "),
        )),
        _ => None,
    }
}

/// Survival after the 1st, 3rd and 10th compaction (None when not reached).
fn run(name: &str, model: Box<dyn Model + Send + Sync>, events: &[Event]) -> serde_json::Value {
    let dir = tempfile::tempdir().expect("temp dir");
    let journal = SqliteJournal::open(dir.path().join("eval.db")).expect("journal");
    let d = Driver::new(
        Foldline::embedded().expect("artifact"),
        journal,
        model,
        fixtures::small_decl(),
    );
    let turns: Vec<(u64, String)> = events.iter().filter_map(text_of).collect();
    let mut compactions = 0;
    let mut out = serde_json::Map::new();
    let mut summary_chars = 0;
    for e in events {
        d.journal()
            .append("eval", std::slice::from_ref(e))
            .expect("append");
        let Outcome::Compacted(b) = d.on_message("eval").expect("driver") else {
            continue;
        };
        compactions += 1;
        if ![1, 3, 10].contains(&compactions) {
            continue;
        }
        summary_chars = b.summary.chars().count();
        let folded: BTreeSet<String> = turns
            .iter()
            .filter(|(seq, _)| *seq <= b.covered_through_seq)
            .flat_map(|(_, t)| facts(t))
            .collect();
        let ctx = d
            .context("eval", ContextOptions::default())
            .expect("context");
        let seen = words(&serde_json::to_string(&ctx.messages).expect("json"));
        let kept = folded.iter().filter(|f| seen.contains(*f)).count();
        out.insert(
            format!("after_{compactions}"),
            json!({
                "folded_facts": folded.len(),
                "surviving": kept,
                "share": (kept as f64 / folded.len().max(1) as f64 * 1000.0).round() / 1000.0,
            }),
        );
    }
    json!({"summarizer": name, "compactions": compactions, "last_summary_chars": summary_chars, "results": out})
}

fn main() {
    let path = std::env::args()
        .nth(1)
        .expect("a JSON Lines file (tests/eval/run makes it)");
    let text = std::fs::read_to_string(&path).expect("read the dialogue file");
    let route = foldline_core::turn::Route {
        conversation: "eval".into(),
        chat: String::new(),
        sender: String::new(),
    };
    let events = foldline_wasmtime::import::parse(&text, &route, 0).expect("parse");
    let results = vec![
        run("extractive-2 (default)", Box::new(Extractive), &events),
        run(
            "first-sentences (before)",
            Box::new(FirstSentences),
            &events,
        ),
        run("truncation", Box::new(Truncation), &events),
    ];
    println!(
        "{}",
        json!({"dataset": path, "turns": events.len(), "budget": "chars: trigger 20,000, retain 8,000, summary 1,500", "runs": results})
    );
}
