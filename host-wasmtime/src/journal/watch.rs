//! Writes as they happen, by any process: what lets `foldline serve`'s long
//! polls wait without reading their conversations again and again. A
//! journal that can tell which conversations were written — by this
//! process, another replica, or `foldline import` — gives a [`Watch`] from
//! [`Journal::watch`](super::Journal::watch): the SQLite journal follows
//! its events table by row id, the PostgreSQL one listens for the
//! notification each append sends. A journal that cannot (the trait's
//! default) gives none, and the server has each waiting request read its
//! conversation again every poll interval instead.

use std::time::Duration;

use crate::error::Result;

/// Which conversations were written, as it happens. One server keeps one,
/// on a thread of its own.
pub trait Watch: Send {
    /// Wait at most `timeout` for writes; what was written since the last
    /// call (or since the watch was made).
    ///
    /// # Errors
    /// The watch was lost (a closed connection): the server opens another
    /// with [`Journal::watch`](super::Journal::watch), and meanwhile has
    /// its waiting requests read again, as without one.
    fn next(&mut self, timeout: Duration) -> Result<Written>;
}

/// What a [`Watch`] saw.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Written {
    /// These conversations were written (none: nothing was), each once,
    /// in order.
    These(Vec<String>),
    /// Something was written, but the journal cannot say where (a
    /// conversation id too long for a PostgreSQL notification, a SQLite
    /// file whose row ids were renumbered): every waiting request reads
    /// again.
    Unknown,
}
