//! The conversations a driver keeps state for: at most a bound of them, the
//! least recently used let go when another comes in, so a server's memory
//! stays bounded over any number of conversations. A conversation let go is
//! read from the journal again at its next call (as after a restart);
//! nothing in the journal changes.

use std::collections::BTreeMap;

use super::read::Cached;
use super::Driver;
use crate::journal::Journal;
use crate::model::Model;

/// Each kept conversation's state, with when it was last used.
pub(super) struct Kept {
    states: BTreeMap<String, (u64, Cached)>,
    bound: usize,
    uses: u64,
}

impl Default for Kept {
    fn default() -> Self {
        Kept::within(
            usize::try_from(foldline_core::defaults::CONVERSATIONS_KEPT).unwrap_or(usize::MAX),
        )
    }
}

impl Kept {
    /// Keep at most `bound` conversations (at least the one in use).
    pub(super) fn within(bound: usize) -> Self {
        Kept {
            states: BTreeMap::new(),
            bound,
            uses: 0,
        }
    }

    /// The state of `conversation` (new when not kept), marked used now, and
    /// the state let go to make room for it, if any: the caller releases
    /// what the core's instance holds for that one.
    pub(super) fn entry(&mut self, conversation: &str) -> (&mut Cached, Option<Cached>) {
        self.uses += 1;
        let mut gone = None;
        if !self.states.contains_key(conversation) && self.states.len() >= self.bound.max(1) {
            let oldest = self
                .states
                .iter()
                .min_by_key(|(_, (used, _))| *used)
                .map(|(id, _)| id.clone());
            gone = oldest
                .and_then(|id| self.states.remove(&id))
                .map(|(_, c)| c);
        }
        let (used, c) = self
            .states
            .entry(conversation.to_owned())
            .or_insert_with(|| (0, Cached::default()));
        *used = self.uses;
        (c, gone)
    }

    /// The state of `conversation`, if kept (not marked used).
    pub(super) fn get(&self, conversation: &str) -> Option<&Cached> {
        self.states.get(conversation).map(|(_, c)| c)
    }

    /// Let `conversation` go.
    pub(super) fn remove(&mut self, conversation: &str) -> Option<Cached> {
        self.states.remove(conversation).map(|(_, c)| c)
    }

    /// Conversations kept.
    pub(super) fn len(&self) -> usize {
        self.states.len()
    }
}

impl<J: Journal, M: Model> Driver<J, M> {
    /// The kept state of `conversation` in `cache` (a new one when not
    /// kept); what the core's instance holds of a conversation let go to
    /// make room is released.
    pub(super) fn kept<'a>(&self, cache: &'a mut Kept, conversation: &str) -> &'a mut Cached {
        let (c, gone) = cache.entry(conversation);
        if let Some(mut g) = gone {
            // A failure leaves those events in the instance, which is
            // replaced once its memory passes its bound: nothing is lost.
            let _ = self.foldline.release(&mut g.holding);
        }
        c
    }
}

#[cfg(test)]
mod tests {
    use super::Kept;

    #[test]
    fn the_least_recently_used_is_let_go_past_the_bound() {
        let mut k = Kept::within(2);
        k.entry("a").0.seq = 1;
        k.entry("b").0.seq = 2;
        k.entry("a"); // a is used again: b is now the oldest
        let (c, gone) = k.entry("c");
        assert_eq!(c.seq, 0, "a new state");
        assert_eq!(gone.map(|g| g.seq), Some(2), "b was let go");
        assert_eq!(k.len(), 2);
        assert_eq!(k.get("a").map(|c| c.seq), Some(1));
        assert!(k.get("b").is_none());
        // Using a kept one lets nothing go.
        assert!(k.entry("c").1.is_none());
        // A bound of 0 still keeps the one in use.
        let mut none = Kept::within(0);
        none.entry("x");
        assert!(none.entry("y").1.is_some());
        assert_eq!(none.len(), 1);
    }
}
