//! The writer lease of a run: taken before anything is written, renewed on
//! a thread of its own while a model call runs, given back on every way out
//! (guards, so a panic or an error releases it too).

use super::Driver;
use crate::error::Result;
use crate::journal::Journal;
use crate::model::Model;
use crate::sync::lock;

/// Marks a conversation as running on this driver until dropped (also on a
/// panic), so overlapping calls never both compact one head.
pub(super) struct Running<'a> {
    pub(super) set: &'a std::sync::Mutex<std::collections::BTreeSet<String>>,
    pub(super) conversation: String,
}

impl Drop for Running<'_> {
    fn drop(&mut self) {
        lock(self.set).remove(&self.conversation);
    }
}

/// The writer lease of a conversation, held from [`Driver::lease`] until
/// released; dropped without release (a panicking model, an early return)
/// it is given back on unwind, so another driver can take the conversation
/// at once instead of waiting out the lease's time to live.
pub(super) struct LeaseGuard<'a, J: Journal, M: Model> {
    pub(super) driver: &'a Driver<J, M>,
    pub(super) conversation: &'a str,
    pub(super) released: bool,
}

impl<J: Journal, M: Model> LeaseGuard<'_, J, M> {
    pub(super) fn release(mut self) -> Result<()> {
        self.released = true;
        self.driver.unlease(self.conversation)
    }
}

impl<J: Journal, M: Model> Drop for LeaseGuard<'_, J, M> {
    fn drop(&mut self) {
        if !self.released {
            let _ = self.driver.unlease(self.conversation);
        }
    }
}

/// Sets the renewal thread's stop flag when dropped: when the work ends,
/// also by a panic, so the thread (and the scope that joins it) ends at once.
pub(super) struct StopOnDrop<'a>(&'a (std::sync::Mutex<bool>, std::sync::Condvar));

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        *lock(&self.0 .0) = true;
        self.0 .1.notify_all();
    }
}

impl<J: Journal, M: Model> Driver<J, M> {
    pub(super) fn enter(&self, conversation: &str) -> Option<Running<'_>> {
        lock(&self.running)
            .insert(conversation.to_owned())
            .then(|| Running {
                set: &self.running,
                conversation: conversation.to_owned(),
            })
    }

    /// Take the conversation's writer lease and keep its fencing token for
    /// this call's appends; false when another writer holds it.
    pub(super) fn lease(&self, conversation: &str) -> Result<bool> {
        let Some(fence) = self.journal.acquire_lease(
            conversation,
            &self.holder,
            (self.clock)(),
            self.lease_ms,
        )?
        else {
            return Ok(false);
        };
        lock(&self.fences).insert(conversation.to_owned(), fence);
        Ok(true)
    }

    /// [`Driver::lease`] as a guard that gives the lease back on unwind.
    pub(super) fn take_lease<'a>(
        &'a self,
        conversation: &'a str,
    ) -> Result<Option<LeaseGuard<'a, J, M>>> {
        Ok(self.lease(conversation)?.then_some(LeaseGuard {
            driver: self,
            conversation,
            released: false,
        }))
    }

    pub(super) fn unlease(&self, conversation: &str) -> Result<()> {
        lock(&self.fences).remove(conversation);
        self.journal.release_lease(conversation, &self.holder)
    }

    /// Run `work` (a model call) while a second thread renews the writer
    /// lease every third of its time to live, so a long call keeps it, until
    /// [`Driver::model_timeout_ms`]; a renewal that finds the lease taken, or
    /// the deadline passed, stops, and the call's appends are then refused by
    /// their stale fence once another writer took the lease.
    pub(super) fn renewing<T>(&self, key: &str, ttl_ms: u64, work: impl FnOnce() -> T) -> T {
        let stop = (std::sync::Mutex::new(false), std::sync::Condvar::new());
        let every = std::time::Duration::from_millis((ttl_ms / 3).max(1));
        let deadline =
            std::time::Instant::now() + std::time::Duration::from_millis(self.model_timeout_ms);
        let (journal, holder, clock, stop) = (&self.journal, &self.holder, self.clock, &stop);
        std::thread::scope(|s| {
            s.spawn(move || {
                let mut stopped = lock(&stop.0);
                // The flag is checked before every wait: the work may have
                // ended before this thread first took the lock.
                while !*stopped {
                    let (guard, waited) = stop
                        .1
                        .wait_timeout(stopped, every)
                        .unwrap_or_else(|p| p.into_inner());
                    stopped = guard;
                    if *stopped || !waited.timed_out() {
                        continue;
                    }
                    if std::time::Instant::now() >= deadline {
                        return;
                    }
                    match journal.acquire_lease(key, holder, clock(), ttl_ms) {
                        Ok(Some(_)) => {}
                        _ => return,
                    }
                }
            });
            let _stop = StopOnDrop(stop);
            work()
        })
    }
}
