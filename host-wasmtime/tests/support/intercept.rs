//! A journal around another that can fail its writes on cue, as a crash of
//! the process would: the fuzzer's and the journey program's crashes.

use foldline_core::event::Event;
use foldline_core::packet::Packet;
use foldline_wasmtime::error::{HostError, Result};
use foldline_wasmtime::journal::{Journal, StoredEvent};

/// What a write is about to do; the hook answers whether it crashes there.
pub enum Write<'a> {
    /// A batch is about to be appended.
    Append(&'a [Event]),
    /// A packet is about to be stored.
    Packet,
    /// The writer lease is about to be released (a dead process releases nothing).
    Release,
}

/// `inner`, with `crash` asked before every write: `true` fails it (nothing
/// is written) — an append or a packet store with a storage error naming the
/// injected crash, a release by doing nothing. Reads of events and of
/// packets are counted (what a message costs in round trips on a remote
/// journal).
pub struct Intercept<J> {
    /// The journal written to.
    pub inner: J,
    /// Whether the write crashes.
    pub crash: Box<dyn Fn(Write<'_>) -> bool + Send + Sync>,
    /// Reads of events so far (shared, as `whole_reads`).
    pub reads: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    /// Reads of a whole conversation (from position 0) so far (shared: a
    /// test keeps a handle on it after the journal moved into a driver).
    pub whole_reads: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    /// Reads of packets so far.
    pub packet_reads: std::sync::atomic::AtomicUsize,
    /// Events read so far, by either read (shared, as `whole_reads`).
    pub events_read: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    /// Whole reads so far, by conversation (shared, as `whole_reads`).
    pub whole_reads_of: std::sync::Arc<std::sync::Mutex<std::collections::BTreeMap<String, usize>>>,
}

impl<J> Intercept<J> {
    /// `inner` with its reads counted and no crash.
    pub fn counting(inner: J) -> Self {
        Intercept {
            inner,
            crash: Box::new(|_| false),
            reads: Default::default(),
            whole_reads: Default::default(),
            packet_reads: Default::default(),
            events_read: Default::default(),
            whole_reads_of: Default::default(),
        }
    }
}

/// The text of an injected crash's error.
pub const CRASH: &str = "injected crash";

impl<J: Journal> Journal for Intercept<J> {
    fn read_events(&self, c: &str, since: u64) -> Result<Vec<StoredEvent>> {
        self.reads
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        if since == 0 {
            self.whole_reads
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            *self
                .whole_reads_of
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .entry(c.to_owned())
                .or_default() += 1;
        }
        let events = self.inner.read_events(c, since)?;
        self.events_read
            .fetch_add(events.len(), std::sync::atomic::Ordering::Relaxed);
        Ok(events)
    }
    fn read_events_page(&self, c: &str, since: u64, limit: usize) -> Result<Vec<StoredEvent>> {
        self.reads
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let events = self.inner.read_events_page(c, since, limit)?;
        self.events_read
            .fetch_add(events.len(), std::sync::atomic::Ordering::Relaxed);
        Ok(events)
    }
    fn append_batch(
        &self,
        c: &str,
        events: &[Event],
        expected: Option<u64>,
        fence: Option<u64>,
    ) -> Result<u64> {
        if (self.crash)(Write::Append(events)) {
            return Err(HostError::Storage(format!("{CRASH} before the append")));
        }
        self.inner.append_batch(c, events, expected, fence)
    }
    fn put_packet(&self, c: &str, p: &Packet) -> Result<()> {
        if (self.crash)(Write::Packet) {
            return Err(HostError::Storage(format!(
                "{CRASH} before the packet store"
            )));
        }
        self.inner.put_packet(c, p)
    }
    fn get_packet(&self, c: &str, id: &str) -> Result<Option<Packet>> {
        self.packet_reads
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.inner.get_packet(c, id)
    }
    fn list_packets(&self, c: &str) -> Result<Vec<Packet>> {
        self.inner.list_packets(c)
    }
    fn acquire_lease(&self, c: &str, holder: &str, now: u64, ttl: u64) -> Result<Option<u64>> {
        self.inner.acquire_lease(c, holder, now, ttl)
    }
    fn release_lease(&self, c: &str, holder: &str) -> Result<()> {
        if (self.crash)(Write::Release) {
            return Ok(());
        }
        self.inner.release_lease(c, holder)
    }
    fn note_skipped(&self, c: &str, r: &foldline_core::plan::SkipRecord) -> Result<()> {
        self.inner.note_skipped(c, r)
    }
    fn progress(&self, c: &str) -> Result<Option<foldline_wasmtime::journal::Progress>> {
        self.inner.progress(c)
    }
    fn watch(&self) -> Result<Option<Box<dyn foldline_wasmtime::journal::Watch>>> {
        self.inner.watch()
    }
}
