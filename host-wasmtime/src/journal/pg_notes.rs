//! The progress watermark on PostgreSQL, written behind the message path.
//!
//! Every automatic check that skips (most messages) notes its record. On
//! SQLite that is a local write; on PostgreSQL it was one more round trip
//! on every message. Here a note is merged into a pending set at once (the
//! count grown, the record kept unless it checked less far) and a writer
//! thread of the journal writes everything pending in one statement, so a
//! burst of messages costs one write, off the caller's path: after the
//! first note it gathers the others made within [`GATHER`] (a steady stream
//! of messages costs one write per [`GATHER`], not one each, and the
//! database is not writing notes while the next message's reads wait),
//! unless a flush or the journal's drop is waiting. Nothing is
//! dropped: a write that fails leaves its notes pending (tried again after
//! [`RETRY_AFTER`]) and the failure is answered by the next `note` and by
//! [`Notes::flush`]; `progress` flushes first, so a reader in this process
//! sees every note made before it; the journal's drop writes what is left
//! (one try: a database refusing it then loses those notes).
//! Another replica sees a note once written (milliseconds; a process that
//! dies loses at most its pending notes — the watermark is a report, not a
//! part of the journal).

use std::collections::btree_map::Entry;
use std::collections::BTreeMap;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use foldline_core::plan::SkipRecord;

use super::pg_pool::{pool_error, PgPool};
use crate::error::{HostError, Result};
use crate::sync::lock;

/// How long the writer gathers notes after the first before it writes them.
pub const GATHER: Duration = Duration::from_millis(20);

/// How long the writer waits before trying a failed write again.
pub const RETRY_AFTER: Duration = Duration::from_millis(200);

/// The upsert of many notes in one statement: each conversation's count
/// grown by its pending runs, its record replaced unless it checked less
/// far than the one kept (the SQLite journal's `NOTE_SKIPPED` rule).
const WRITE: &str = "INSERT INTO foldline_progress AS p (conversation, skipped_runs, checked_through_seq, last)
 SELECT * FROM unnest($1::text[], $2::int8[], $3::int8[], $4::text[])
 ON CONFLICT (conversation) DO UPDATE SET skipped_runs = p.skipped_runs + excluded.skipped_runs,
   checked_through_seq = GREATEST(p.checked_through_seq, excluded.checked_through_seq),
   last = CASE WHEN excluded.checked_through_seq >= p.checked_through_seq THEN excluded.last ELSE p.last END";

/// Notes not yet written: per conversation, the runs and the record to keep.
type Pending = BTreeMap<String, (u64, SkipRecord)>;

#[derive(Default)]
struct State {
    pending: Pending,
    /// A flush waits: write what is pending without gathering.
    hurry: bool,
    writing: bool,
    failed: Option<String>,
    stop: bool,
}

#[derive(Default)]
struct Shared {
    state: Mutex<State>,
    changed: Condvar,
}

impl Shared {
    fn wait<'a>(&self, s: MutexGuard<'a, State>) -> MutexGuard<'a, State> {
        self.changed.wait(s).unwrap_or_else(|p| p.into_inner())
    }

    /// Wait for a change, or at most [`RETRY_AFTER`].
    fn wait_a_while<'a>(&self, s: MutexGuard<'a, State>) -> MutexGuard<'a, State> {
        self.changed
            .wait_timeout(s, RETRY_AFTER)
            .unwrap_or_else(|p| p.into_inner())
            .0
    }
}

/// The pending notes and their writer thread.
pub(crate) struct Notes {
    shared: Arc<Shared>,
    writer: Option<JoinHandle<()>>,
}

/// Add `runs` skipped runs ending at `record` to `pending`.
fn merge(pending: &mut Pending, conversation: String, runs: u64, record: SkipRecord) {
    match pending.entry(conversation) {
        Entry::Vacant(slot) => {
            slot.insert((runs, record));
        }
        Entry::Occupied(mut kept) => {
            let (n, last) = kept.get_mut();
            *n += runs;
            if record.checked_through_seq >= last.checked_through_seq {
                *last = record;
            }
        }
    }
}

fn failure(e: &str) -> HostError {
    HostError::Storage(format!(
        "progress notes are waiting to be written (kept, tried again): {e}"
    ))
}

impl Notes {
    /// Start the writer on `pool`.
    ///
    /// # Errors
    /// `journal` when the writer thread cannot be started.
    pub fn start(pool: PgPool) -> Result<Notes> {
        let shared = Arc::new(Shared::default());
        let s = shared.clone();
        let writer = std::thread::Builder::new()
            .name("foldline-progress".into())
            .spawn(move || write_behind(&s, &pool))
            .map_err(|e| HostError::Storage(format!("the progress writer did not start: {e}")))?;
        Ok(Notes {
            shared,
            writer: Some(writer),
        })
    }

    /// Note a skipped run of `conversation`. Answers the last write's
    /// failure, if the writer has not got through since (the note is kept).
    pub fn note(&self, conversation: &str, record: &SkipRecord) -> Result<()> {
        let mut s = lock(&self.shared.state);
        // Only the first note wakes the writer; the others join its gathering.
        let first = s.pending.is_empty();
        merge(&mut s.pending, conversation.to_owned(), 1, record.clone());
        let failed = s.failed.clone();
        drop(s);
        if first {
            self.shared.changed.notify_all();
        }
        match failed {
            Some(e) => Err(failure(&e)),
            None => Ok(()),
        }
    }

    /// Wait until every note made so far is written, or the writer failed
    /// (or stopped: it never does while the journal lives, but a wait must
    /// not outlive it).
    pub fn flush(&self) -> Result<()> {
        let mut s = lock(&self.shared.state);
        if !s.pending.is_empty() {
            s.hurry = true;
            self.shared.changed.notify_all();
        }
        loop {
            if let Some(e) = &s.failed {
                return Err(failure(e));
            }
            if s.pending.is_empty() && !s.writing {
                return Ok(());
            }
            if self.writer.as_ref().is_none_or(|w| w.is_finished()) {
                return Err(HostError::Storage(
                    "the progress writer stopped: notes made since are not written".into(),
                ));
            }
            s = self.shared.wait_a_while(s);
        }
    }
}

impl Drop for Notes {
    fn drop(&mut self) {
        lock(&self.shared.state).stop = true;
        self.shared.changed.notify_all();
        if let Some(w) = self.writer.take() {
            let _ = w.join();
        }
    }
}

/// The writer: everything pending in one statement, [`GATHER`] after the
/// first note (at once for a flush or the drop); on a failure the notes go
/// back and are tried again.
fn write_behind(shared: &Shared, pool: &PgPool) {
    loop {
        let batch = {
            let mut s = lock(&shared.state);
            while s.pending.is_empty() && !s.stop {
                s = shared.wait(s);
            }
            let until = Instant::now() + GATHER;
            while !s.stop && !s.hurry {
                let Some(left) = until.checked_duration_since(Instant::now()) else {
                    break;
                };
                s = shared
                    .changed
                    .wait_timeout(s, left)
                    .unwrap_or_else(|p| p.into_inner())
                    .0;
            }
            if s.pending.is_empty() {
                return;
            }
            s.hurry = false;
            s.writing = true;
            std::mem::take(&mut s.pending)
        };
        let result = write(pool, &batch);
        let mut s = lock(&shared.state);
        s.writing = false;
        match result {
            Ok(()) => s.failed = None,
            Err(e) => {
                for (c, (runs, record)) in batch {
                    merge(&mut s.pending, c, runs, record);
                }
                s.failed = Some(e.to_string());
                shared.changed.notify_all();
                if s.stop {
                    return;
                }
                drop(shared.wait_a_while(s));
                continue;
            }
        }
        drop(s);
        shared.changed.notify_all();
    }
}

fn write(pool: &PgPool, batch: &Pending) -> Result<()> {
    let mut conversations = Vec::with_capacity(batch.len());
    let mut runs = Vec::with_capacity(batch.len());
    let mut through = Vec::with_capacity(batch.len());
    let mut last = Vec::with_capacity(batch.len());
    for (c, (n, record)) in batch {
        conversations.push(c.as_str());
        runs.push(i64::try_from(*n).unwrap_or(i64::MAX));
        through.push(i64::try_from(record.checked_through_seq).unwrap_or(i64::MAX));
        last.push(serde_json::to_string(record).map_err(|e| HostError::Storage(e.to_string()))?);
    }
    let mut c = pool.get().map_err(pool_error)?;
    c.rows(WRITE, &[&conversations, &runs, &through, &last])?;
    Ok(())
}
