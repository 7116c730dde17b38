//! The instance's store of held events (`foldline_core::held`), by the id a
//! host chose for each conversation. A re-instantiated module starts empty;
//! a host that lost its store sends what it holds again.

use std::cell::RefCell;

use foldline_core::held::{self, Held};
use foldline_core::{api, Code, Error};

// A list, not a map: a host holds a few conversations at a time (the JS
// package at most 64), and a map's code costs the artifact ~4 KB.
thread_local! {
    static STORE: RefCell<Vec<(u32, Held)>> = const { RefCell::new(Vec::new()) };
}

/// Apply `update` (a `foldline_core::held::HoldRequest`; empty: none) to
/// what is held under `id`, then call an entry point with it in front of the
/// request's own. `count` is how many events the host believes are held
/// before the update (0 for a new id): any other number (a re-instantiated
/// module) is an `invalid_request` error, never an answer from fewer events.
/// An update that does not decode is answered with its error, and nothing
/// is called.
pub fn call(id: u32, count: u32, entry: &str, input: &[u8], update: &[u8]) -> Vec<u8> {
    STORE.with(|s| {
        let mut s = s.borrow_mut();
        let at = match s.iter().position(|(k, _)| *k == id) {
            Some(at) => Some(at),
            None if count == 0 => {
                s.push((id, Held::default()));
                Some(s.len() - 1)
            }
            None => None,
        };
        let held = match at {
            Some(at) if s[at].1.events.len() == count as usize => &mut s[at].1,
            _ => {
                let n = at.map_or(0, |at| s[at].1.events.len());
                return api::envelope::<()>(Err(Error::new(
                    Code::InvalidRequest,
                    format!("{count} events were to be held under {id}, {n} are: send them again"),
                )));
            }
        };
        if !update.is_empty() {
            let answer = held::hold(held, update);
            if answer.starts_with(b"{\"error\"") {
                return answer;
            }
        }
        held::call(held, entry, input)
    })
}

/// Drop what is held under `id`.
pub fn forget(id: u32) {
    STORE.with(|s| s.borrow_mut().retain(|(k, _)| *k != id));
}

#[cfg(test)]
mod tests {
    use super::*;

    const EVENT: &str = r#"{"type":"message","conversation":"c","sourceSeq":1,"turnId":"t1","role":"user","parts":[{"type":"text","text":"hi"}]}"#;

    fn held_count(id: u32, count: u32) -> String {
        // `select` of an empty request fails to decode: the count check and
        // the update come first.
        String::from_utf8(call(id, count, "select", b"{}", b"")).unwrap()
    }

    #[test]
    fn a_call_with_another_count_than_held_is_refused() {
        let add = format!(r#"{{"events":[{EVENT}]}}"#);
        let first = String::from_utf8(call(7, 0, "select", b"{}", add.as_bytes())).unwrap();
        assert!(first.contains("missing field"), "{first}");
        let wrong = held_count(7, 2);
        assert!(
            wrong.starts_with(r#"{"error":{"code":"invalid_request""#),
            "{wrong}"
        );
        assert!(
            wrong.contains("2 events were to be held under 7, 1 are"),
            "{wrong}"
        );
        forget(7);
        let gone = held_count(7, 1);
        assert!(
            gone.contains("1 events were to be held under 7, 0 are"),
            "{gone}"
        );
    }

    #[test]
    fn ids_hold_apart_and_a_bad_update_changes_nothing() {
        let two = format!(r#"{{"events":[{EVENT},{EVENT}]}}"#);
        call(1, 0, "select", b"{}", two.as_bytes());
        call(
            2,
            0,
            "select",
            b"{}",
            format!(r#"{{"events":[{EVENT}]}}"#).as_bytes(),
        );
        assert!(held_count(1, 2).contains("missing field"));
        assert!(held_count(2, 1).contains("missing field"));
        let bad = String::from_utf8(call(
            2,
            1,
            "select",
            b"{}",
            br#"{"events":[{"type":"nope"}]}"#,
        ))
        .unwrap();
        assert!(bad.contains("unknown variant"), "{bad}");
        assert!(held_count(2, 1).contains("missing field"), "still 1 held");
        forget(1);
        assert!(held_count(1, 0).contains("missing field"));
    }
}
