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

/// A conversation a writer starts (the program's `import`): its id must be
/// one the servers serve, or the conversation could never be reached there.
///
/// # Errors
/// `invalid_input`, naming the id.
pub fn check_new_conversation(id: &str) -> crate::error::Result<()> {
    if is_conversation(id) {
        return Ok(());
    }
    Err(crate::error::HostError::Input(format!(
        "conversation id {id:?}: a new conversation's id is 1 to 128 of A-Z a-z 0-9 . _ : -, other than . and .. (the ids `foldline serve` serves); nothing imported"
    )))
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
