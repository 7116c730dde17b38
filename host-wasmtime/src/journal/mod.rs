//! The journal: an append-only event log per conversation, packet documents
//! and a per-conversation writer lease. foldline never edits or deletes an
//! event.

//!
//! The stores: [`SqliteJournal`] (feature `sqlite`, on by default) and
//! [`PgJournal`] (feature `postgres`); any other store implements
//! [`Journal`] and checks itself with [`contract`].

use foldline_core::event::Event;
use foldline_core::packet::Packet;
use foldline_core::plan::SkipRecord;

use crate::error::{HostError, Result};

mod claims;
pub mod contract;
#[cfg(feature = "postgres")]
pub(crate) mod pg_notes;
#[cfg(feature = "postgres")]
pub(crate) mod pg_pool;
#[cfg(feature = "postgres")]
pub(crate) mod pg_watch;
#[cfg(feature = "postgres")]
pub mod postgres;
#[cfg(feature = "sqlite")]
pub(crate) mod sqlite;
pub mod watch;
#[cfg(any(feature = "sqlite", feature = "postgres"))]
pub(crate) use self::claims::{backfill_claims, is_legacy, legacy_claim};
pub use self::claims::{turn_claim, turn_claims};
#[cfg(feature = "postgres")]
pub use self::postgres::PgJournal;
#[cfg(feature = "sqlite")]
pub use self::sqlite::SqliteJournal;
pub use self::watch::{Watch, Written};

/// An event with its journal position.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredEvent {
    /// Position in the conversation's journal (1-based).
    pub seq: u64,
    /// The event.
    pub event: Event,
}

/// What foldline needs from a journal.
pub trait Journal: Send + Sync {
    /// Events with a position greater than `since`, in order.
    ///
    /// # Errors
    /// Storage failures.
    fn read_events(&self, conversation: &str, since: u64) -> Result<Vec<StoredEvent>>;
    /// At most `limit` of the events [`Journal::read_events`] reads, the
    /// first of them: a page, so that a reader of a long conversation does
    /// not hold all of it at once. The default reads all and keeps the
    /// page; the SQLite and PostgreSQL journals read only the page.
    ///
    /// # Errors
    /// Storage failures.
    fn read_events_page(
        &self,
        conversation: &str,
        since: u64,
        limit: usize,
    ) -> Result<Vec<StoredEvent>> {
        let mut all = self.read_events(conversation, since)?;
        all.truncate(limit);
        Ok(all)
    }
    /// The one write: append events atomically (all or none), checked
    /// first ([`check_batch`]); at position `expected` when given
    /// (compare-and-append) and, with `fence`, only if no newer writer lease
    /// was granted since that fencing token. Returns the last position.
    ///
    /// # Errors
    /// Events that fail the append check (`invalid_request`, `wrong_route`);
    /// [`HostError::Conflict`] when the head moved; [`HostError::LeaseLost`]
    /// when the fence is stale; `fork` for a second boundary on one chain
    /// slot; storage failures. Nothing is written on any error.
    fn append_batch(
        &self,
        conversation: &str,
        events: &[Event],
        expected: Option<u64>,
        fence: Option<u64>,
    ) -> Result<u64>;
    /// Append at the end (a new message).
    ///
    /// # Errors
    /// As [`Journal::append_batch`].
    fn append(&self, conversation: &str, events: &[Event]) -> Result<u64> {
        self.append_batch(conversation, events, None, None)
    }
    /// Compare-and-append at `expected`, fenced by `fence` when given.
    ///
    /// # Errors
    /// As [`Journal::append_batch`].
    fn append_at(
        &self,
        conversation: &str,
        events: &[Event],
        expected: u64,
        fence: Option<u64>,
    ) -> Result<u64> {
        self.append_batch(conversation, events, Some(expected), fence)
    }
    /// Store a packet document (idempotent by id).
    ///
    /// # Errors
    /// Storage failures.
    fn put_packet(&self, conversation: &str, packet: &Packet) -> Result<()>;
    /// A stored packet.
    ///
    /// # Errors
    /// Storage failures.
    fn get_packet(&self, conversation: &str, id: &str) -> Result<Option<Packet>>;
    /// Every stored packet of a conversation.
    ///
    /// # Errors
    /// Storage failures.
    fn list_packets(&self, conversation: &str) -> Result<Vec<Packet>>;
    /// Take (or renew, for the same live holder) the writer lease until
    /// `now_ms + ttl_ms`: its fencing token, which grows with every new
    /// grant, or `None` while another holder has it.
    ///
    /// # Errors
    /// Storage failures.
    fn acquire_lease(
        &self,
        conversation: &str,
        holder: &str,
        now_ms: u64,
        ttl_ms: u64,
    ) -> Result<Option<u64>>;
    /// Release the lease if `holder` has it.
    ///
    /// # Errors
    /// Storage failures.
    fn release_lease(&self, conversation: &str, holder: &str) -> Result<()>;

    /// Record a skipped run (below the trigger, no model call): the
    /// conversation's compactor progress advances to the record's
    /// `checkedThroughSeq` and its skipped-run count grows by one. A
    /// watermark beside the journal, overwritten in place — never an event,
    /// so checks below the trigger do not double the journal. (Default: not
    /// kept.)
    ///
    /// # Errors
    /// Storage failures.
    fn note_skipped(&self, conversation: &str, record: &SkipRecord) -> Result<()> {
        let _ = (conversation, record);
        Ok(())
    }

    /// The conversation's compactor progress, when kept.
    ///
    /// # Errors
    /// Storage failures.
    fn progress(&self, conversation: &str) -> Result<Option<Progress>> {
        let _ = conversation;
        Ok(None)
    }

    /// A [`Watch`] of the writes to this journal, by any process, when it
    /// can keep one (the SQLite file and PostgreSQL journals do; the
    /// default, and an in-memory SQLite journal, answer `None`: a server
    /// then has its waiting requests read again every poll interval).
    ///
    /// # Errors
    /// Storage failures (the server tries again).
    fn watch(&self) -> Result<Option<Box<dyn Watch>>> {
        Ok(None)
    }
}

/// How far the compactor got without inference: the skipped runs (content-
/// dark checks below the trigger) and the latest one's record.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Progress {
    /// Skipped runs recorded.
    pub skipped_runs: u64,
    /// The latest skipped run (sizes only, and how far it checked).
    pub last: SkipRecord,
}

/// An event's type as the journals store it beside the body (the `type`
/// column).
pub fn type_of(e: &Event) -> &'static str {
    match e {
        Event::Message(_) => "message",
        Event::LateDelivery(_) => "lateDelivery",
        Event::Correction(_) => "correction",
        Event::Boundary(_) => "boundary",
        Event::Frontier(_) => "frontier",
        Event::CompactionTask(_) => "compactionTask",
        Event::CompactionFailed(_) => "compactionFailed",
        Event::TurnMeta(_) => "turnMeta",
    }
}

/// A boundary's chain slot — its declaration fingerprint with its previous
/// boundary, or its frontier for the first; `None` for every other event. A
/// journal keeps slots unique (a second boundary on one is a [`fork`]).
pub fn chain_slot(e: &Event) -> Option<String> {
    match e {
        Event::Boundary(b) => Some(format!(
            "{}|{}",
            b.declaration_fingerprint,
            b.previous
                .as_ref()
                .map(|p| p.boundary_id.as_str())
                .unwrap_or(b.frontier.id.as_str())
        )),
        _ => None,
    }
}

#[cfg(any(feature = "sqlite", feature = "postgres"))]
pub(crate) fn decode<T: serde::de::DeserializeOwned>(body: &str, what: &str) -> Result<T> {
    serde_json::from_str(body)
        .map_err(|e| HostError::Input(format!("stored {what} is not valid: {e}")))
}

/// The journal contract's append check: every event passes the core's
/// `check_events` (shape, route, content hash), named by its index in the
/// batch; turns get their content hash here, once, when they enter.
///
/// # Errors
/// The core's code, with "append refused, nothing written".
pub fn check_batch(conversation: &str, events: &[Event]) -> Result<Vec<Event>> {
    let mut out = Vec::with_capacity(events.len());
    for (i, e) in events.iter().enumerate() {
        let chat = match e {
            Event::Message(m) | Event::LateDelivery(m) => m.chat.clone(),
            Event::TurnMeta(t) => t.chat.clone(),
            _ => String::new(),
        };
        let hashes = foldline_core::validate::check_events(&foldline_core::validate::EventsCheck {
            route: foldline_core::turn::Route {
                conversation: conversation.to_owned(),
                chat,
                sender: String::new(),
            },
            events: vec![e.clone()],
            declaration: None,
            pinned: Vec::new(),
        })
        .map_err(|mut err| {
            err.message = format!(
                "append refused, nothing written: {}",
                err.message.replace("events[0]", &format!("events[{i}]"))
            );
            HostError::Core(err)
        })?;
        // Each turn is hashed once, when it enters the journal (by the
        // check, natively, where SHA-256 runs on the CPU's SHA instructions).
        let mut e = e.clone();
        if let (Event::Message(m) | Event::LateDelivery(m), Some(h)) =
            (&mut e, hashes.into_iter().next())
        {
            m.content_hash = Some(h);
        }
        out.push(e);
    }
    Ok(out)
}

/// The refusal of a turn id already used with other content.
pub fn conflicting_turn(turn_id: &str) -> HostError {
    HostError::Core(
        foldline_core::Error::new(
            foldline_core::Code::ConflictingTurn,
            format!(
                "append refused, nothing written: turn {turn_id:?} is already in the journal with other content; a turn id names one message"
            ),
        )
        .with_ids([turn_id.to_owned()]),
    )
}

/// The refusal of a second boundary on one chain slot.
pub fn fork() -> HostError {
    HostError::Core(foldline_core::Error::new(
        foldline_core::Code::Fork,
        "another boundary already extends this chain position",
    ))
}

/// A boxed journal is a journal, so a host can pick one at run time
/// (`--journal foldline.db` or `--journal postgres://…`).
impl<T: Journal + ?Sized> Journal for Box<T> {
    fn read_events(&self, conversation: &str, since: u64) -> Result<Vec<StoredEvent>> {
        (**self).read_events(conversation, since)
    }
    fn read_events_page(
        &self,
        conversation: &str,
        since: u64,
        limit: usize,
    ) -> Result<Vec<StoredEvent>> {
        (**self).read_events_page(conversation, since, limit)
    }
    fn append_batch(
        &self,
        conversation: &str,
        events: &[Event],
        expected: Option<u64>,
        fence: Option<u64>,
    ) -> Result<u64> {
        (**self).append_batch(conversation, events, expected, fence)
    }
    fn put_packet(&self, conversation: &str, packet: &Packet) -> Result<()> {
        (**self).put_packet(conversation, packet)
    }
    fn get_packet(&self, conversation: &str, id: &str) -> Result<Option<Packet>> {
        (**self).get_packet(conversation, id)
    }
    fn list_packets(&self, conversation: &str) -> Result<Vec<Packet>> {
        (**self).list_packets(conversation)
    }
    fn acquire_lease(
        &self,
        conversation: &str,
        holder: &str,
        now_ms: u64,
        ttl_ms: u64,
    ) -> Result<Option<u64>> {
        (**self).acquire_lease(conversation, holder, now_ms, ttl_ms)
    }
    fn release_lease(&self, conversation: &str, holder: &str) -> Result<()> {
        (**self).release_lease(conversation, holder)
    }
    fn note_skipped(&self, conversation: &str, record: &SkipRecord) -> Result<()> {
        (**self).note_skipped(conversation, record)
    }
    fn progress(&self, conversation: &str) -> Result<Option<Progress>> {
        (**self).progress(conversation)
    }
    fn watch(&self) -> Result<Option<Box<dyn Watch>>> {
        (**self).watch()
    }
}
