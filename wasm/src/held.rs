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

/// Update what is held under `id` (created empty when new); answers the
/// envelope of the number of events held.
pub fn hold(id: u32, input: &[u8]) -> Vec<u8> {
    STORE.with(|s| {
        let mut s = s.borrow_mut();
        let at = match s.iter().position(|(k, _)| *k == id) {
            Some(at) => at,
            None => {
                s.push((id, Held::default()));
                s.len() - 1
            }
        };
        held::hold(&mut s[at].1, input)
    })
}

/// An entry point with the events held under `id` in front of the request's
/// own. `count` is how many events the host believes are held: any other
/// number (nothing held, a re-instantiated module) is an `invalid_request`
/// error, never an answer from fewer events.
pub fn call(id: u32, count: u32, entry: &str, input: &[u8]) -> Vec<u8> {
    STORE.with(
        |s| match s.borrow_mut().iter_mut().find(|(k, _)| *k == id) {
            Some((_, h)) if h.events.len() == count as usize => held::call(h, entry, input),
            found => api::envelope::<()>(Err(Error::new(
                Code::InvalidRequest,
                format!(
                    "{count} events were to be held under {id}, {} are: send them again",
                    found.map_or(0, |(_, h)| h.events.len())
                ),
            ))),
        },
    )
}

/// Drop what is held under `id`.
pub fn forget(id: u32) {
    STORE.with(|s| s.borrow_mut().retain(|(k, _)| *k != id));
}

#[cfg(test)]
mod tests {
    use super::*;

    const EVENT: &str = r#"{"type":"message","conversation":"c","sourceSeq":1,"turnId":"t1","role":"user","parts":[{"type":"text","text":"hi"}]}"#;

    #[test]
    fn a_call_with_another_count_than_held_is_refused() {
        assert_eq!(
            hold(7, format!(r#"{{"events":[{EVENT}]}}"#).as_bytes()),
            br#"{"ok":1}"#
        );
        let wrong = String::from_utf8(call(7, 2, "select", b"{}")).unwrap();
        assert!(
            wrong.starts_with(r#"{"error":{"code":"invalid_request""#),
            "{wrong}"
        );
        assert!(
            wrong.contains("2 events were to be held under 7, 1 are"),
            "{wrong}"
        );
        forget(7);
        let gone = String::from_utf8(call(7, 1, "select", b"{}")).unwrap();
        assert!(
            gone.contains("1 events were to be held under 7, 0 are"),
            "{gone}"
        );
    }

    #[test]
    fn ids_hold_apart() {
        hold(1, format!(r#"{{"events":[{EVENT},{EVENT}]}}"#).as_bytes());
        hold(2, format!(r#"{{"events":[{EVENT}]}}"#).as_bytes());
        assert_eq!(hold(1, b"{}"), br#"{"ok":2}"#);
        assert_eq!(hold(2, b"{}"), br#"{"ok":1}"#);
        forget(1);
        assert_eq!(hold(1, b"{}"), br#"{"ok":0}"#);
        assert_eq!(hold(2, b"{}"), br#"{"ok":1}"#);
    }
}
