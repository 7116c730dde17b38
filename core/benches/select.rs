//! `select` cost for a 10,000-turn tail and behind a 100,000-turn history,
//! beside the floor: one SHA-256 pass over the rendered bytes, and the same
//! context shaped for a member who opted in to every compression tool.
use criterion::{black_box, criterion_group, criterion_main, Criterion};
use foldline_core::format::Format;
use foldline_core::member::seams::MemberInput;
use foldline_core::member::settings::{Availability, Preferences};
use foldline_core::select::{select, SelectRequest};
use sha2::{Digest, Sha256};

mod workload;
use workload::*;

fn request(history: u64, tail: u64) -> SelectRequest {
    let p = request_after_boundary(history, tail);
    SelectRequest {
        declaration: p.declaration,
        route: p.route,
        frontier: p.frontier,
        head: if history == 0 { None } else { p.head },
        amendment: None,
        events: p.events,
        prompt: None,
        prompt_sender: None,
        format: Format::Openai,
        limit: Some(u64::MAX / 4),
        render: true,
        member: None,
        carried: None,
    }
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("select");
    g.sample_size(20);
    let tail = request(0, 10_000);
    let rendered = serde_json::to_vec(&select(&tail).unwrap().messages).unwrap();
    g.bench_function("tail_10k_turns", |b| {
        b.iter(|| select(black_box(&tail)).unwrap())
    });
    g.bench_function("floor_sha256_tail_10k_rendered", |b| {
        b.iter(|| Sha256::digest(black_box(&rendered)))
    });
    let mut lean = tail.clone();
    lean.render = false;
    g.bench_function("tail_10k_turns_manifest_only", |b| {
        b.iter(|| select(black_box(&lean)).unwrap())
    });

    let behind = request(100_000, 160);
    let rendered_b = serde_json::to_vec(&select(&behind).unwrap().messages).unwrap();
    g.bench_function("behind_100k_history", |b| {
        b.iter(|| select(black_box(&behind)).unwrap())
    });
    g.bench_function("floor_sha256_behind_100k_rendered", |b| {
        b.iter(|| Sha256::digest(black_box(&rendered_b)))
    });
    // The same context shaped for a member who opted in to everything: a
    // trim per member turn of the tail, the fragments, the measurements.
    let mut member = behind.clone();
    member.member = Some(MemberInput {
        availability: Availability {
            surface: true,
            tool_result: true,
            plain_speak: true,
            prompt_trim: true,
        },
        preferences: Preferences {
            master: true,
            tool_result: true,
            plain_speak: true,
            prompt_trim: true,
        },
    });
    g.bench_function("behind_100k_history_member_all_on", |b| {
        b.iter(|| select(black_box(&member)).unwrap())
    });
    // Reasoning stored on every assistant turn (an Anthropic thinking
    // block): what an Anthropic context of the same tail costs with it,
    // where only the open tool cycle's is sent.
    let mut anthropic = tail.clone();
    anthropic.format = Format::Anthropic;
    let mut thinking = anthropic.clone();
    let block = serde_json::json!({"type": "thinking", "thinking": "t".repeat(300), "signature": "s".repeat(400)});
    for e in &mut thinking.events {
        if let foldline_core::event::Event::Message(m) = e {
            if m.role == foldline_core::turn::Role::Assistant {
                m.parts.insert(0, serde_json::from_value(serde_json::json!({"type": "reasoning", "format": "anthropic", "data": block})).unwrap());
            }
        }
    }
    g.bench_function("tail_10k_turns_anthropic", |b| {
        b.iter(|| select(black_box(&anthropic)).unwrap())
    });
    g.bench_function("tail_10k_turns_anthropic_thinking_on_every_answer", |b| {
        b.iter(|| select(black_box(&thinking)).unwrap())
    });
    g.finish();
    println!(
        "rendered bytes: tail_10k={} behind_100k={}",
        rendered.len(),
        rendered_b.len()
    );
}

criterion_group!(benches, bench);
criterion_main!(benches);
