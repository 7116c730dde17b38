//! An import that can run again. Each message a file brings gets a turn id
//! ending in `:import-<key>`, where the key hashes the file's messages up to
//! and including it (role and content hash, chained). The journal is
//! append-only, so an import run twice — the same command again, a run cut
//! short by Ctrl-C or a crash, or an export that has grown since — must not
//! write what it already holds: the messages whose keys the conversation
//! holds are left out, and the rest are appended after its last turn.

use std::collections::BTreeSet;

use foldline_core::event::Event;
use foldline_core::turn::{content_hash, Route};
use sha2::{Digest, Sha256};

/// What marks an imported message's turn id, before its key. Not `@`: a
/// turn id ending `@<key>` is an idempotency key's (the servers' and the
/// JS driver's), and those are kept for the latest 4,096 keyed appends, so
/// an import of thousands of messages would push a client's keys out.
const MARK: &str = ":import-";

/// The keys of a file's messages, in order: each the first 16 hex digits of
/// SHA-256 over the key before it, the role and the content hash.
fn keys(events: &[Event]) -> Vec<String> {
    let mut previous = String::new();
    events
        .iter()
        .filter_map(|e| match e {
            Event::Message(m) => Some(m),
            _ => None,
        })
        .map(|m| {
            let digest = Sha256::new()
                .chain_update(previous.as_bytes())
                .chain_update([0])
                .chain_update(m.role.as_str().as_bytes())
                .chain_update([0])
                .chain_update(content_hash(&m.parts).as_bytes())
                .finalize();
            previous = digest[..8].iter().map(|b| format!("{b:02x}")).collect();
            previous.clone()
        })
        .collect()
}

/// Key `events` (a file's messages, numbered after `after`) for a later
/// run, leaving out the leading ones `stored` (the conversation's events)
/// holds from an earlier run, and number the rest after `after`. Answers
/// how many were left out. Call it for messages the file brought in a
/// provider's shape only: raw foldline events keep their own turn ids (an
/// import of those is checked for conflicts instead).
pub fn skip_imported(
    events: &mut Vec<Event>,
    stored: &[Event],
    route: &Route,
    after: u64,
) -> usize {
    let imported: Vec<&str> = stored
        .iter()
        .filter_map(|e| match e {
            Event::Message(m) | Event::LateDelivery(m) => m.turn_id.rsplit_once(MARK),
            _ => None,
        })
        .map(|(_, key)| key)
        .collect();
    let held: BTreeSet<&str> = imported.iter().copied().collect();
    let keys = keys(events);
    let mut skipped = keys
        .iter()
        .take_while(|k| held.contains(k.as_str()))
        .count();
    // Only a file that goes on from the last message an import wrote is
    // the same history run again: another file that merely opens with the
    // same messages (a system prompt, a greeting) is imported whole.
    if skipped > 0 && imported.last() != Some(&keys[skipped - 1].as_str()) {
        skipped = 0;
    }
    events.drain(..skipped);
    super::renumber(events, route, after);
    for (e, key) in events.iter_mut().zip(&keys[skipped..]) {
        if let Event::Message(m) = e {
            m.turn_id = format!("{}{MARK}{key}", m.turn_id);
        }
    }
    skipped
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(texts: &[&str]) -> Vec<Event> {
        let messages: Vec<serde_json::Value> = texts
            .iter()
            .map(|t| serde_json::json!({"role": "user", "content": t}))
            .collect();
        super::super::parse(&serde_json::to_string(&messages).unwrap(), &route(), 0).unwrap()
    }

    fn route() -> Route {
        Route {
            conversation: "c".into(),
            ..Route::default()
        }
    }

    /// A second run writes nothing; a run after one cut short, or of a file
    /// that grew, writes only what is new, numbered after the last turn.
    #[test]
    fn a_second_run_writes_only_what_the_journal_lacks() {
        let mut first = file(&["a", "b", "c"]);
        assert_eq!(skip_imported(&mut first, &[], &route(), 0), 0);
        let Event::Message(m) = &first[2] else {
            panic!()
        };
        assert!(m.turn_id.starts_with("c-3:import-"), "{}", m.turn_id);
        // Never read as an idempotency key (`@<key>`) by a server or driver.
        assert!(!m.turn_id.contains('@'), "{}", m.turn_id);

        let mut again = file(&["a", "b", "c"]);
        assert_eq!(skip_imported(&mut again, &first, &route(), 3), 3);
        assert!(again.is_empty());

        let mut cut = first[..2].to_vec();
        let mut resumed = file(&["a", "b", "c"]);
        assert_eq!(skip_imported(&mut resumed, &cut, &route(), 2), 2);
        assert_eq!(
            resumed,
            first[2..].to_vec(),
            "the same event the whole run wrote"
        );
        cut.extend(resumed);

        let mut grown = file(&["a", "b", "c", "d"]);
        assert_eq!(skip_imported(&mut grown, &cut, &route(), 3), 3);
        let Event::Message(m) = &grown[0] else {
            panic!()
        };
        assert!(
            m.turn_id.starts_with("c-4:import-") && m.source_seq == 4,
            "{m:?}"
        );
    }

    /// Another file that opens with the same messages as the last import
    /// but goes another way is imported whole: only a file that goes on
    /// from the last message an import wrote is that history run again.
    #[test]
    fn a_file_that_only_opens_alike_is_imported_whole() {
        let mut first = file(&["hi", "plan a trip"]);
        skip_imported(&mut first, &[], &route(), 0);
        let mut other = file(&["hi", "fix my build"]);
        assert_eq!(skip_imported(&mut other, &first, &route(), 2), 0);
        assert_eq!(other.len(), 2, "its own greeting too");
        // ... and the first file grown after it is no longer its
        // continuation: imported whole again, never a part left out.
        first.extend(other);
        let mut grown = file(&["hi", "plan a trip", "to Porto"]);
        assert_eq!(skip_imported(&mut grown, &first, &route(), 4), 0);
    }

    /// The key is the file's history up to the message: the same words at
    /// another place, or after other words, are another message.
    #[test]
    fn the_same_words_elsewhere_are_imported_again() {
        let mut first = file(&["a", "b"]);
        skip_imported(&mut first, &[], &route(), 0);
        let mut other = file(&["b", "a"]);
        assert_eq!(skip_imported(&mut other, &first, &route(), 2), 0);
        let mut repeated = file(&["a", "b", "a", "b"]);
        assert_eq!(skip_imported(&mut repeated, &first, &route(), 2), 2);
        assert_eq!(repeated.len(), 2);
    }
}
