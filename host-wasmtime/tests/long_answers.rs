//! Long answers at seed 002's token budget, and large pinned documents at
//! seed 000's character budget, through the Rust driver: an answer of
//! 1,000–3,000 tokens (over the ~1,196-token tail target) is kept whole as
//! the exact tail with everything before it folded, and pinned turns that
//! eat the headroom shrink the exact tail to what the limit leaves beside
//! them, so after every message the context fits, holds the newest turn
//! verbatim, and leaves out no turn that no summary covers.

mod support;

use foldline_core::declaration::Budget;
use foldline_core::turn::Role;
use foldline_wasmtime::driver::{ContextOptions, Driver, Outcome};
use foldline_wasmtime::journal::{Journal, SqliteJournal};
use foldline_wasmtime::model::Extractive;
use foldline_wasmtime::runtime::Foldline;
use support::fixtures::budget_decl;

/// An answer as models write it (prose, code, a list) of about `tokens`
/// tokens by the documented estimate (four characters a token).
fn answer(n: u64, tokens: u64) -> String {
    let mut out = format!("Here is how to handle case {n}.\n\n");
    let mut k = 0;
    while (out.len() as u64) < tokens * 4 {
        out.push_str(&match k % 3 {
            0 => format!("```rust\nfn step_{n}_{k}(xs: &[u64]) -> u64 {{ xs.iter().map(|x| x * {k}).sum::<u64>() + {n} }}\n```\n"),
            1 => format!("- Point {k}: the budget for week {} stays at {} euros.\n", k % 9, n * 17 % 1000),
            _ => format!("The reason is that part {k} depends on what we decided about item {}.\n", n - 1),
        });
        k += 1;
    }
    out
}

/// A driver on an in-memory journal, the extractive summarizer and `budget`.
fn driver(budget: Budget) -> Driver<SqliteJournal, Extractive> {
    Driver::new(
        Foldline::embedded().unwrap(),
        SqliteJournal::in_memory().unwrap(),
        Extractive,
        budget_decl(budget),
    )
}

/// Messages `ns` (role and text from `turn`) through the driver one at a
/// time; after each, the seeds' outcomes (it fits, an exact suffix, one
/// envelope, the chain verifies, ...), then the newest turn verbatim and no
/// uncovered turn left out (and, with `pinned`, that turn pinned). The
/// compactions run.
fn converse(
    d: &Driver<SqliteJournal, Extractive>,
    ns: std::ops::RangeInclusive<u64>,
    pinned: Option<&str>,
    turn: impl Fn(u64) -> (Role, String),
) -> usize {
    let mut compacted = 0;
    let mut journal = Vec::new();
    for n in ns {
        let (role, text) = turn(n);
        let e = support::fixtures::text_message("c", n, role, text);
        d.journal().append("c", &[e]).unwrap();
        match d.on_message("c").unwrap() {
            Outcome::Refused(e) => panic!("message {n}: {e:?}"),
            Outcome::Failed(r) => panic!("message {n}: {r:?}"),
            Outcome::Compacted(_) => compacted += 1,
            _ => {}
        }
        journal = support::invariants::check(d, "c", &journal, n as usize);
        let sel = d.context("c", ContextOptions::default()).unwrap();
        let m = &sel.manifest;
        if let Some(p) = pinned {
            assert_eq!(m.pinned, vec![p.to_owned()], "message {n}");
        }
        assert_eq!(m.included.last(), Some(&format!("t{n}")), "message {n}");
        assert_eq!(m.uncovered_omitted, 0, "message {n}: {:?}", m.omitted);
    }
    d.resolve("c").expect("the chain verifies");
    compacted
}

#[test]
fn long_answers_never_cost_the_model_its_recent_history() {
    let d = driver(Budget::default_tokens());
    let compacted = converse(&d, 1..=240, None, |n| {
        if n % 2 == 1 {
            let q = format!("Question {n}: what about step {n}? Show me the code.");
            (Role::User, q)
        } else {
            (Role::Assistant, answer(n, 1_000 + (n * 397) % 2_001))
        }
    });
    assert!(compacted >= 40, "{compacted}");
}

#[test]
fn a_large_pinned_system_prompt_never_costs_the_model_its_recent_history() {
    // Seed 000's budget (80,000 characters, retain 40,000, an 8,000-character
    // summary): a 35,000-character system prompt takes more than half the
    // room between retain + the summary and the trigger, and the exact tail
    // gives way for the rest.
    let d = driver(Budget::Chars {
        trigger: 80_000,
        retain: 40_000,
    });
    let doc = "The handbook says: keep receipts. ".repeat(1_030);
    let first = support::fixtures::text_message("c", 1, Role::System, doc);
    d.journal().append("c", &[first]).unwrap();
    let compacted = converse(&d, 2..=200, Some("t1"), |n| {
        if n % 2 == 0 {
            (
                Role::User,
                format!("Question {n}: and the receipts for step {n}?"),
            )
        } else {
            (Role::Assistant, answer(n, 250 + (n * 397) % 500))
        }
    });
    assert!(compacted >= 5, "{compacted}");
}
