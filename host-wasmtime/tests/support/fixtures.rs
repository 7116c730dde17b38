//! Fixtures shared by the host's tests and examples.

use foldline_core::declaration::{Budget, Declaration};
use foldline_core::event::Event;

/// A declaration that compacts after ~20,000 characters and keeps 8,000 exact.
pub fn small_decl() -> Declaration {
    let mut d = Declaration::new("assistant", "assistant-compactor");
    d.budget = Budget::Chars {
        trigger: 20_000,
        retain: 8_000,
    };
    d.summary.max_chars = Some(1_500);
    d
}

/// The bundled demo conversation as journal events of conversation `conv`.
pub fn demo_events(conv: &str, turns: usize) -> Vec<Event> {
    let text: String = foldline_wasmtime::import::demo_conversation(turns)
        .iter()
        .map(|m| format!("{m}\n"))
        .collect();
    let route = foldline_core::turn::Route {
        conversation: conv.into(),
        chat: String::new(),
        sender: String::new(),
    };
    foldline_wasmtime::import::parse(&text, &route, 0).expect("the demo conversation parses")
}
