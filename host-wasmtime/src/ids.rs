//! The ids clients name things by, as both servers take them (the edge
//! handler holds the same rule in `js/src/handler/access.ts`).

/// An idempotency key: 1 to 128 of `A-Z a-z 0-9 . _ : -`.
pub fn is_key(s: &str) -> bool {
    (1..=128).contains(&s.len())
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._:-".contains(&b))
}

/// A conversation id: a key's characters, other than `.` and `..`
/// (browsers and curl normalize those path segments away).
pub fn is_conversation(s: &str) -> bool {
    is_key(s) && s != "." && s != ".."
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_what_a_path_segment_keeps() {
        for ok in ["a", "trip-2026", "c.1:x_y", &"k".repeat(128)] {
            assert!(is_key(ok) && is_conversation(ok), "{ok}");
        }
        for bad in ["", "a b", "a/b", "ü", "a@b", &"k".repeat(129)] {
            assert!(!is_key(bad) && !is_conversation(bad), "{bad}");
        }
        assert!(is_key("..") && !is_conversation("..") && !is_conversation("."));
    }
}
