//! What a host keeps per conversation, for at most a bound of them: the
//! least recently used that is not in use is let go when another comes in,
//! so a server's memory stays bounded over any number of conversations.
//! Everything kept so is derived from the journal and read again when it
//! is needed next; nothing in the journal changes.

use std::collections::BTreeMap;

/// Each kept conversation's value, with when it was last used.
pub(crate) struct Kept<T> {
    values: BTreeMap<String, (u64, T)>,
    bound: usize,
    uses: u64,
}

impl<T: Default> Default for Kept<T> {
    /// Bounded by `CONVERSATIONS_KEPT`.
    fn default() -> Self {
        Kept::within(
            usize::try_from(foldline_core::defaults::CONVERSATIONS_KEPT).unwrap_or(usize::MAX),
        )
    }
}

impl<T: Default> Kept<T> {
    /// Keep at most `bound` conversations (at least the one in use).
    pub(crate) fn within(bound: usize) -> Self {
        Kept {
            values: BTreeMap::new(),
            bound,
            uses: 0,
        }
    }

    /// The value of `conversation` (new when not kept), marked used now,
    /// and the value let go to make room for it, if any: the least recently
    /// used of those `in_use` says are not (none when all are).
    pub(crate) fn entry(
        &mut self,
        conversation: &str,
        in_use: impl Fn(&T) -> bool,
    ) -> (&mut T, Option<T>) {
        self.uses += 1;
        let mut gone = None;
        if !self.values.contains_key(conversation) && self.values.len() >= self.bound.max(1) {
            let oldest = self
                .values
                .iter()
                .filter(|(_, (_, v))| !in_use(v))
                .min_by_key(|(_, (used, _))| *used)
                .map(|(id, _)| id.clone());
            gone = oldest
                .and_then(|id| self.values.remove(&id))
                .map(|(_, v)| v);
        }
        let (used, v) = self
            .values
            .entry(conversation.to_owned())
            .or_insert_with(|| (0, T::default()));
        *used = self.uses;
        (v, gone)
    }

    /// The value of `conversation`, if kept (not marked used).
    pub(crate) fn get(&self, conversation: &str) -> Option<&T> {
        self.values.get(conversation).map(|(_, v)| v)
    }

    /// Let `conversation` go.
    pub(crate) fn remove(&mut self, conversation: &str) -> Option<T> {
        self.values.remove(conversation).map(|(_, v)| v)
    }

    /// Conversations kept.
    pub(crate) fn len(&self) -> usize {
        self.values.len()
    }
}

#[cfg(test)]
mod tests {
    use super::Kept;

    #[test]
    fn the_least_recently_used_not_in_use_is_let_go_past_the_bound() {
        let mut k: Kept<u64> = Kept::within(2);
        let free = |_: &u64| false;
        *k.entry("a", free).0 = 1;
        *k.entry("b", free).0 = 2;
        k.entry("a", free); // a is used again: b is now the oldest
        let (c, gone) = k.entry("c", free);
        assert_eq!(*c, 0, "a new value");
        assert_eq!(gone, Some(2), "b was let go");
        assert_eq!(k.len(), 2);
        assert_eq!(k.get("a"), Some(&1));
        assert!(k.get("b").is_none());
        // Using a kept one lets nothing go.
        assert!(k.entry("c", free).1.is_none());
        // One in use is passed over: a (the oldest) is, so c goes.
        let (_, gone) = k.entry("d", |v| *v == 1);
        assert_eq!(gone, Some(0));
        assert!(k.get("a").is_some());
        // All in use: nothing goes, the bound is passed for now.
        assert!(k.entry("e", |_| true).1.is_none());
        assert_eq!(k.len(), 3);
        // A bound of 0 still keeps the one in use.
        let mut none: Kept<u64> = Kept::within(0);
        none.entry("x", free);
        assert!(none.entry("y", free).1.is_some());
        assert_eq!(none.len(), 1);
    }
}
