//! One rule for every lock of the host: a thread that panicked while holding
//! a lock does not poison it for everyone after. Each value behind these
//! locks (module caches, connections, leases, counters) is whole between
//! statements, so the next holder may use it as it is.

use std::sync::{Mutex, MutexGuard};

/// Lock `m`, taking it over from a thread that panicked while holding it.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}
