//! Fixtures shared by the host's tests and examples.

use foldline_core::declaration::{Budget, Declaration};
use foldline_core::event::Event;

/// A declaration that compacts after ~20,000 characters and keeps 8,000
/// exact (the journal contract suite's).
pub fn small_decl() -> Declaration {
    foldline_wasmtime::journal::contract::declaration()
}

/// A declaration of the `assistant` target with this budget (and every
/// other field its default).
#[allow(dead_code)] // the tests use it; the examples that include this file do not
pub fn budget_decl(budget: Budget) -> Declaration {
    let mut d = Declaration::new("assistant", "assistant-compactor");
    d.budget = budget;
    d
}

/// A plain text message of conversation `conv` at source `seq` (turn id
/// `t<seq>`), as a member or the assistant writes it.
#[allow(dead_code)] // the tests use it; the examples that include this file do not
pub fn text_message(conv: &str, seq: u64, role: foldline_core::turn::Role, text: String) -> Event {
    Event::Message(foldline_core::event::Message {
        conversation: conv.into(),
        chat: String::new(),
        sender: String::new(),
        source: String::new(),
        source_seq: seq,
        index: 0,
        turn_id: format!("t{seq}"),
        role,
        author_agent: None,
        parts: vec![foldline_core::turn::Part::Text { text }],
        tokens: None,
        pinned: false,
        sensitive: false,
        content_hash: None,
    })
}

/// The bundled demo conversation as journal events of conversation `conv`.
pub fn demo_events(conv: &str, turns: usize) -> Vec<Event> {
    foldline_wasmtime::journal::contract::demo_events(conv, turns)
}
