//! Turn claims of the earlier form (the SHA-256 of the message as stored,
//! before claims were the text the JS journals keep): one scenario every
//! Rust journal runs (tests/host.rs on SQLite, tests/postgres.rs).

use foldline_core::event::{Event, Message};
use foldline_wasmtime::journal::Journal;

use super::fixtures::demo_events;

/// Set (turn id, claim) rows of conversation `c` (see [`Store::earlier`]).
pub type SetClaims<'a> = &'a dyn Fn(bool, &[(String, String)]);

/// A journal under test and its claims table reached from outside.
pub struct Store<'a> {
    /// Open the journal (after `earlier`, as a process starting would).
    pub open: &'a dyn Fn() -> Box<dyn Journal>,
    /// Set these (turn id, claim) rows of conversation `c`; `migrated`
    /// false also marks the journal as one never opened since (the
    /// migration runs at the next open), true as one already migrated (an
    /// older writer kept these claims later).
    pub earlier: SetClaims<'a>,
    /// Conversation `c`'s claims, by turn id.
    pub claims: &'a dyn Fn() -> Vec<String>,
}

/// The claim a journal kept before: the SHA-256 of the message as stored.
pub fn legacy_claim(m: &Message) -> String {
    use sha2::Digest;
    let d = sha2::Sha256::digest(serde_json::to_vec(m).unwrap());
    d.iter().map(|b| format!("{b:02x}")).collect()
}

/// Opened, a journal of earlier claims writes each again as the shared
/// text: a redelivery of a stored message is taken, other content refused.
/// A claim of the earlier form kept after (an older writer) is taken up by
/// the redelivery it stands for, and still refuses other content.
pub fn earlier_claims_are_taken_up(s: Store) {
    let j = (s.open)();
    j.append("c", &demo_events("c", 3)).unwrap();
    let messages: Vec<Message> = (j.read_events("c", 0).unwrap().into_iter())
        .filter_map(|e| match e.event {
            Event::Message(m) => Some(m),
            _ => None,
        })
        .collect();
    assert!(messages.len() >= 3, "{} messages", messages.len());
    drop(j);
    let earlier = |migrated: bool, which: &[&Message]| {
        let rows: Vec<(String, String)> = (which.iter())
            .map(|m| (m.turn_id.clone(), legacy_claim(m)))
            .collect();
        (s.earlier)(migrated, &rows);
    };
    let other = |m: &Message| {
        let mut m = m.clone();
        m.content_hash = None;
        m.parts = vec![foldline_core::turn::Part::Text {
            text: "not what was said".into(),
        }];
        Event::Message(m)
    };
    earlier(false, &messages.iter().collect::<Vec<_>>());
    assert!((s.claims)().iter().all(|c| !c.starts_with('[')));
    let j = (s.open)();
    let kept = (s.claims)();
    assert!(kept.iter().all(|c| c.starts_with('[')), "{kept:?}");
    let n = j.read_events("c", 0).unwrap().len();
    j.append("c", &[Event::Message(messages[0].clone())])
        .unwrap();
    let err = j.append("c", &[other(&messages[1])]).unwrap_err();
    assert_eq!(err.code(), "conflicting_turn");
    drop(j);
    earlier(true, &[&messages[1], &messages[2]]);
    let j = (s.open)();
    let err = j.append("c", &[other(&messages[2])]).unwrap_err();
    assert_eq!(err.code(), "conflicting_turn");
    j.append("c", &[Event::Message(messages[1].clone())])
        .unwrap();
    let kept = (s.claims)();
    assert_eq!(
        kept.iter().filter(|c| !c.starts_with('[')).count(),
        1,
        "{kept:?}"
    );
    assert_eq!(j.read_events("c", 0).unwrap().len(), n + 2);
}
