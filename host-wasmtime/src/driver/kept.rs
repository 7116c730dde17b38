//! The conversations a driver keeps state for ([`crate::kept`]): a state
//! let go is read from the journal again at its next call (as after a
//! restart), and what the core's instance held of it is released.

use super::read::Cached;
use super::Driver;
use crate::journal::Journal;
use crate::model::Model;

/// Each kept conversation's state.
pub(super) type Kept = crate::kept::Kept<Cached>;

impl<J: Journal, M: Model> Driver<J, M> {
    /// The kept state of `conversation` in `cache` (a new one when not
    /// kept); what the core's instance holds of a conversation let go to
    /// make room is released.
    pub(super) fn kept<'a>(&self, cache: &'a mut Kept, conversation: &str) -> &'a mut Cached {
        let (c, gone) = cache.entry(conversation, |_| false);
        if let Some(mut g) = gone {
            // A failure leaves those events in the instance, which is
            // replaced once its memory passes its bound: nothing is lost.
            let _ = self.foldline.release(&mut g.holding);
        }
        c
    }
}
