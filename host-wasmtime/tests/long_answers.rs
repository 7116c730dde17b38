//! Long answers at seed 002's token budget, through the Rust driver: an
//! answer of 1,000–3,000 tokens (over the ~1,196-token tail target) is kept
//! whole as the exact tail with everything before it folded, so after every
//! message the context fits, holds the newest turn verbatim, and leaves out
//! no turn that no summary covers.

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

#[test]
fn long_answers_never_cost_the_model_its_recent_history() {
    let d = Driver::new(
        Foldline::embedded().unwrap(),
        SqliteJournal::in_memory().unwrap(),
        Extractive,
        budget_decl(Budget::default_tokens()),
    );
    let mut compacted = 0;
    let mut journal = Vec::new();
    for n in 1..=240u64 {
        let (role, text) = if n % 2 == 1 {
            (
                Role::User,
                format!("Question {n}: what about step {n}? Show me the code."),
            )
        } else {
            (Role::Assistant, answer(n, 1_000 + (n * 397) % 2_001))
        };
        let e = support::fixtures::text_message("c", n, role, text);
        d.journal().append("c", &[e]).unwrap();
        match d.on_message("c").unwrap() {
            Outcome::Refused(e) => panic!("message {n}: {e:?}"),
            Outcome::Failed(r) => panic!("message {n}: {r:?}"),
            Outcome::Compacted(_) => compacted += 1,
            _ => {}
        }
        // The seeds' outcomes (it fits, an exact suffix, one envelope, the
        // chain verifies, ...), then the newest turn and no uncovered turn
        // left out.
        journal = support::invariants::check(&d, "c", &journal, n as usize);
        let sel = d.context("c", ContextOptions::default()).unwrap();
        let m = &sel.manifest;
        assert_eq!(m.included.last(), Some(&format!("t{n}")), "message {n}");
        assert_eq!(m.uncovered_omitted, 0, "message {n}: {:?}", m.omitted);
    }
    assert!(compacted >= 40, "{compacted}");
    d.resolve("c").expect("the chain verifies");
}
