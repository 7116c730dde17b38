//! `plan` cost: flat in the history behind the boundary, and for a fresh,
//! established 400,000-character conversation.
use criterion::{black_box, criterion_group, criterion_main, BenchmarkId, Criterion};
use foldline_core::plan::{plan, PlanOutcome};

mod workload;
use workload::*;

fn behind_boundary(c: &mut Criterion) {
    let mut g = c.benchmark_group("plan_after_boundary");
    for history in [1_000u64, 10_000, 100_000] {
        // 40 turns after the boundary: below the trigger, the common message.
        let skip = request_after_boundary(history, 40);
        assert!(matches!(plan(&skip), PlanOutcome::Skip { .. }));
        g.bench_with_input(BenchmarkId::new("skip", history), &skip, |b, r| {
            b.iter(|| plan(black_box(r)))
        });
        // 160 turns after it: over the trigger, a compaction packet is rendered.
        let compact = request_after_boundary(history, 160);
        assert!(
            matches!(plan(&compact), PlanOutcome::Compact { .. }),
            "{:?}",
            plan(&compact)
        );
        g.bench_with_input(BenchmarkId::new("compact", history), &compact, |b, r| {
            b.iter(|| plan(black_box(r)))
        });
    }
    g.finish();
}

fn fresh_conversation(c: &mut Criterion) {
    let d = decl();
    // About 400,000 characters of chat-shaped turns, never compacted before.
    let mut events = vec![system()];
    let mut chars = 0;
    let mut seq = 1;
    while chars < 400_000 {
        let e = turn(seq);
        if let foldline_core::event::Event::Message(m) = &e {
            chars += foldline_core::turn::parts_chars(&m.parts);
        }
        events.push(e);
        seq += 1;
    }
    let mut req = request_after_boundary(0, 0);
    req.head = None;
    req.frontier = None;
    req.events = events;
    req.declaration = d;
    let frontier = match plan(&req) {
        PlanOutcome::Activate { frontier } => *frontier,
        o => panic!("{o:?}"),
    };
    let mut g = c.benchmark_group("plan_fresh_400k_chars");
    g.bench_function("activate", |b| b.iter(|| plan(black_box(&req))));
    let mut with_frontier = req.clone();
    with_frontier.frontier = Some(frontier);
    assert!(matches!(plan(&with_frontier), PlanOutcome::Compact { .. }));
    g.bench_function("compact", |b| b.iter(|| plan(black_box(&with_frontier))));
    g.finish();
}

criterion_group!(benches, behind_boundary, fresh_conversation);
criterion_main!(benches);
