//! A journal that lets another writer append at a chosen moment: between
//! two reads of one call, where a race between replicas would land it.

use foldline_core::event::Event;
use foldline_core::packet::Packet;
use foldline_wasmtime::journal::{Journal, StoredEvent};
use foldline_wasmtime::Result;
use std::sync::Mutex;

/// `inner`, whose read after position `at` — the `skip`-th such read from
/// the moment [`Meanwhile::then`] is called — first appends the pending
/// events, as another writer would.
pub struct Meanwhile<J> {
    /// The journal read and written.
    pub inner: J,
    pending: Mutex<(Vec<Event>, u64, usize)>,
}

impl<J> Meanwhile<J> {
    /// `inner` with nothing pending.
    pub fn new(inner: J) -> Self {
        Meanwhile {
            inner,
            pending: Mutex::new((Vec::new(), 0, 0)),
        }
    }

    /// Append `events` at the `skip`-th read after position `at` (0: the
    /// next one).
    pub fn then(&self, events: Vec<Event>, at: u64, skip: usize) {
        *self.pending.lock().unwrap() = (events, at, skip);
    }

    /// Whether the pending events were appended.
    pub fn landed(&self) -> bool {
        self.pending.lock().unwrap().0.is_empty()
    }
}

impl<J: Journal> Journal for Meanwhile<J> {
    fn read_events(&self, c: &str, since: u64) -> Result<Vec<StoredEvent>> {
        let mut p = self.pending.lock().unwrap();
        if since == p.1 && !p.0.is_empty() {
            if p.2 == 0 {
                self.inner.append(c, &std::mem::take(&mut p.0))?;
            } else {
                p.2 -= 1;
            }
        }
        drop(p);
        self.inner.read_events(c, since)
    }
    fn append_batch(&self, c: &str, e: &[Event], x: Option<u64>, f: Option<u64>) -> Result<u64> {
        self.inner.append_batch(c, e, x, f)
    }
    fn put_packet(&self, c: &str, p: &Packet) -> Result<()> {
        self.inner.put_packet(c, p)
    }
    fn get_packet(&self, c: &str, id: &str) -> Result<Option<Packet>> {
        self.inner.get_packet(c, id)
    }
    fn list_packets(&self, c: &str) -> Result<Vec<Packet>> {
        self.inner.list_packets(c)
    }
    fn acquire_lease(&self, c: &str, h: &str, n: u64, t: u64) -> Result<Option<u64>> {
        self.inner.acquire_lease(c, h, n, t)
    }
    fn release_lease(&self, c: &str, h: &str) -> Result<()> {
        self.inner.release_lease(c, h)
    }
}
