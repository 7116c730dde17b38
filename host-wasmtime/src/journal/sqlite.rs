//! The embedded default journal: one SQLite file (the `sqlite` feature).

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use foldline_core::event::Event;
use foldline_core::packet::Packet;
use foldline_core::plan::SkipRecord;
use rusqlite::{params, Connection, OptionalExtension, TransactionBehavior};

use super::{
    backfill_claims, chain_slot, check_batch, conflicting_turn, decode, fork, is_legacy,
    legacy_claim, turn_claims, type_of, Journal, Progress, StoredEvent, Watch, Written,
};
use crate::error::{HostError, Result};
use crate::sync::lock;

/// The embedded default journal: one SQLite file.
///
/// Events live in an append-only table (triggers refuse UPDATE and DELETE);
/// every boundary takes a unique chain slot (its previous boundary, or its
/// frontier for the first), so two writers can never append a fork.
pub struct SqliteJournal {
    conn: Mutex<Connection>,
    /// The writer leases and the progress watermark, on a second connection
    /// to the same file with `synchronous = NORMAL`: their commits are not
    /// flushed to disk one by one (the next journal commit, or a checkpoint,
    /// carries them), so a message costs one flush, not four (append, lease
    /// taken, lease given back, progress). Safe on one machine: a commit
    /// survives a crash of the process; only a power loss or an operating
    /// system crash can take back the latest lease or watermark commits —
    /// and then every process that held a lease is gone too. (WAL mode
    /// keeps the file consistent either way.) `None` in memory, where both
    /// use `conn`.
    meta: Option<Mutex<Connection>>,
    /// The file, for a [`Watch`] on a connection of its own (`None` in
    /// memory, which no other connection can see).
    path: Option<PathBuf>,
}

const SCHEMA: &str = "
PRAGMA journal_mode = WAL;
PRAGMA busy_timeout = 10000;
CREATE TABLE IF NOT EXISTS events (
  conversation TEXT NOT NULL,
  seq INTEGER NOT NULL,
  type TEXT NOT NULL,
  body TEXT NOT NULL,
  chain_slot TEXT,
  PRIMARY KEY (conversation, seq)
);
CREATE UNIQUE INDEX IF NOT EXISTS events_chain_slot ON events(conversation, chain_slot) WHERE chain_slot IS NOT NULL;
CREATE TRIGGER IF NOT EXISTS events_no_update BEFORE UPDATE ON events BEGIN SELECT RAISE(ABORT, 'the journal is append-only'); END;
CREATE TRIGGER IF NOT EXISTS events_no_delete BEFORE DELETE ON events BEGIN SELECT RAISE(ABORT, 'the journal is append-only'); END;
CREATE TABLE IF NOT EXISTS packets (conversation TEXT NOT NULL, id TEXT NOT NULL, body TEXT NOT NULL, PRIMARY KEY (conversation, id));
CREATE TABLE IF NOT EXISTS writer_leases (conversation TEXT PRIMARY KEY, holder TEXT NOT NULL, until_ms INTEGER NOT NULL, fence INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS foldline_progress (conversation TEXT PRIMARY KEY, skipped_runs INTEGER NOT NULL, checked_through_seq INTEGER NOT NULL, last TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS turns (conversation TEXT NOT NULL, turn_id TEXT NOT NULL, claim TEXT NOT NULL, PRIMARY KEY (conversation, turn_id));
";

/// The progress watermark's upsert: one row per conversation, the count
/// grown, the record replaced unless it checked less far than the one kept
/// (PostgreSQL writes many at once by the same rule: `pg_notes.rs`).
const NOTE_SKIPPED: &str = "INSERT INTO foldline_progress (conversation, skipped_runs, checked_through_seq, last) VALUES (?1, 1, ?2, ?3)
 ON CONFLICT (conversation) DO UPDATE SET skipped_runs = foldline_progress.skipped_runs + 1,
   checked_through_seq = CASE WHEN excluded.checked_through_seq >= foldline_progress.checked_through_seq THEN excluded.checked_through_seq ELSE foldline_progress.checked_through_seq END,
   last = CASE WHEN excluded.checked_through_seq >= foldline_progress.checked_through_seq THEN excluded.last ELSE foldline_progress.last END";

/// The schema's version in `PRAGMA user_version`: 1 once the turn claims
/// of events written before the `turns` table existed are filled in; 2
/// once every claim is of the shared form (`claims.rs`), those of the
/// earlier form written again from the events.
const SQLITE_VERSION: i64 = 2;

/// Bring a SQLite journal up to [`SQLITE_VERSION`] (once, in one transaction).
fn migrate(conn: &mut Connection) -> Result<()> {
    let version: i64 = conn.query_row("PRAGMA user_version", [], |r| r.get(0))?;
    if version >= SQLITE_VERSION {
        return Ok(());
    }
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    // Another process opening the file at the same time may have migrated
    // it while this one waited for the write lock.
    let version: i64 = tx.query_row("PRAGMA user_version", [], |r| r.get(0))?;
    if version >= SQLITE_VERSION {
        return Ok(());
    }
    tx.execute("DELETE FROM turns WHERE claim NOT LIKE '[%'", [])?;
    {
        let mut st = tx.prepare(
            "SELECT conversation, body FROM events WHERE type IN ('message', 'lateDelivery') ORDER BY conversation, seq",
        )?;
        let rows = st
            .query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)))?
            .collect::<rusqlite::Result<Vec<_>>>()?;
        let mut put = tx.prepare(
            "INSERT OR IGNORE INTO turns (conversation, turn_id, claim) VALUES (?1, ?2, ?3)",
        )?;
        backfill_claims(rows.into_iter(), |c, t, claim| {
            put.execute(params![c, t, claim])?;
            Ok(())
        })?;
    }
    tx.execute_batch(&format!("PRAGMA user_version = {SQLITE_VERSION}"))?;
    tx.commit()?;
    Ok(())
}

/// Prepared statements kept per connection: every statement of the journal
/// and of the server's store is prepared once and reused (parsing SQL was
/// ~7 % of `foldline serve`'s CPU under load before, BENCHMARKS.md).
const STATEMENT_CACHE: usize = 64;

/// Open a SQLite connection with the statement cache sized for foldline's
/// statements.
fn connect(path: impl AsRef<Path>) -> Result<Connection> {
    let conn = Connection::open(path)?;
    conn.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
    Ok(conn)
}

/// Open (or create) a SQLite file and apply `schema` to it.
pub(crate) fn open_with(path: impl AsRef<Path>, schema: &str) -> Result<Mutex<Connection>> {
    let conn = connect(&path)?;
    // The file named: "file is not a database" alone does not say which.
    conn.execute_batch(schema)
        .map_err(|e| match HostError::from(e) {
            HostError::Storage(m) => {
                HostError::Storage(format!("{m}: {}", path.as_ref().display()))
            }
            other => other,
        })?;
    Ok(Mutex::new(conn))
}

impl SqliteJournal {
    /// Open or create the journal file.
    ///
    /// # Errors
    /// SQLite failures.
    pub fn open(path: impl AsRef<Path>) -> Result<SqliteJournal> {
        let conn = open_with(&path, SCHEMA)?;
        migrate(&mut lock(&conn))?;
        let meta = connect(&path)?;
        meta.execute_batch("PRAGMA busy_timeout = 10000; PRAGMA synchronous = NORMAL;")?;
        Ok(SqliteJournal {
            conn,
            meta: Some(Mutex::new(meta)),
            path: Some(path.as_ref().to_owned()),
        })
    }

    /// An in-memory journal (tests).
    ///
    /// # Errors
    /// SQLite failures.
    pub fn in_memory() -> Result<SqliteJournal> {
        let mut conn = Connection::open_in_memory()?;
        conn.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
        conn.execute_batch(SCHEMA)?;
        migrate(&mut conn)?;
        Ok(SqliteJournal {
            conn: Mutex::new(conn),
            meta: None,
            path: None,
        })
    }

    fn conn(&self) -> std::sync::MutexGuard<'_, Connection> {
        lock(&self.conn)
    }

    /// The connection of leases and progress (see [`SqliteJournal`]).
    fn meta(&self) -> std::sync::MutexGuard<'_, Connection> {
        lock(self.meta.as_ref().unwrap_or(&self.conn))
    }
}

impl Journal for SqliteJournal {
    fn read_events(&self, conversation: &str, since: u64) -> Result<Vec<StoredEvent>> {
        self.read_events_page(conversation, since, usize::MAX)
    }

    fn read_events_page(
        &self,
        conversation: &str,
        since: u64,
        limit: usize,
    ) -> Result<Vec<StoredEvent>> {
        let conn = self.conn();
        let mut st = conn.prepare_cached(
            "SELECT seq, body FROM events WHERE conversation = ?1 AND seq > ?2 ORDER BY seq LIMIT ?3",
        )?;
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let rows = st.query_map(params![conversation, since as i64, limit], |r| {
            Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?))
        })?;
        let mut out = Vec::new();
        for row in rows {
            let (seq, body) = row?;
            out.push(StoredEvent {
                seq: seq as u64,
                event: decode(
                    &body,
                    &format!("event at journal position {seq} of {conversation}"),
                )?,
            });
        }
        Ok(out)
    }

    fn append_batch(
        &self,
        conversation: &str,
        events: &[Event],
        expected: Option<u64>,
        fence: Option<u64>,
    ) -> Result<u64> {
        let events = check_batch(conversation, events)?;
        let claims = turn_claims(&events)?;
        let mut conn = self.conn();
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let mut seq: i64 = tx
            .prepare_cached("SELECT COALESCE(MAX(seq), 0) FROM events WHERE conversation = ?1")?
            .query_row(params![conversation], |r| r.get(0))?;
        if let Some(fence) = fence {
            let current: Option<i64> = tx
                .prepare_cached("SELECT fence FROM writer_leases WHERE conversation = ?1")?
                .query_row(params![conversation], |r| r.get(0))
                .optional()?;
            if current != Some(fence as i64) {
                return Err(HostError::LeaseLost { fence });
            }
        }
        if let Some(expected) = expected {
            if expected != seq as u64 {
                return Err(HostError::Conflict {
                    expected,
                    found: seq as u64,
                });
            }
        }
        for (turn_id, claim) in &claims {
            let put = tx
                .prepare_cached(
                    "INSERT OR IGNORE INTO turns (conversation, turn_id, claim) VALUES (?1, ?2, ?3)",
                )?
                .execute(params![conversation, turn_id, claim])?;
            if put == 0 {
                let stored: String = tx
                    .prepare_cached(
                        "SELECT claim FROM turns WHERE conversation = ?1 AND turn_id = ?2",
                    )?
                    .query_row(params![conversation, turn_id], |r| r.get(0))?;
                if stored != *claim {
                    // A claim of the earlier form an older writer kept: the
                    // same message again takes the turn's claim up to this
                    // form; other content is refused.
                    if !is_legacy(&stored) || legacy_claim(&events, turn_id) != Some(stored) {
                        // Dropping the transaction rolls the batch back.
                        return Err(conflicting_turn(turn_id));
                    }
                    tx.prepare_cached(
                        "UPDATE turns SET claim = ?3 WHERE conversation = ?1 AND turn_id = ?2",
                    )?
                    .execute(params![conversation, turn_id, claim])?;
                }
            }
        }
        for e in &events {
            seq += 1;
            let body = serde_json::to_string(e).map_err(|err| HostError::Input(err.to_string()))?;
            tx.prepare_cached(
                "INSERT INTO events (conversation, seq, type, body, chain_slot) VALUES (?1, ?2, ?3, ?4, ?5)",
            )?
            .execute(params![conversation, seq, type_of(e), body, chain_slot(e)])
            .map_err(|err| match &err {
                rusqlite::Error::SqliteFailure(f, _) if f.code == rusqlite::ErrorCode::ConstraintViolation => fork(),
                _ => HostError::from(err),
            })?;
        }
        tx.commit()?;
        Ok(seq as u64)
    }

    fn put_packet(&self, conversation: &str, packet: &Packet) -> Result<()> {
        let body = serde_json::to_string(packet).map_err(|e| HostError::Input(e.to_string()))?;
        self.conn()
            .prepare_cached(
                "INSERT OR IGNORE INTO packets (conversation, id, body) VALUES (?1, ?2, ?3)",
            )?
            .execute(params![conversation, packet.id, body])?;
        Ok(())
    }

    fn get_packet(&self, conversation: &str, id: &str) -> Result<Option<Packet>> {
        let body: Option<String> = self
            .conn()
            .prepare_cached("SELECT body FROM packets WHERE conversation = ?1 AND id = ?2")?
            .query_row(params![conversation, id], |r| r.get(0))
            .optional()?;
        body.map(|b| decode(&b, "packet")).transpose()
    }

    fn list_packets(&self, conversation: &str) -> Result<Vec<Packet>> {
        let conn = self.conn();
        let mut st =
            conn.prepare_cached("SELECT body FROM packets WHERE conversation = ?1 ORDER BY id")?;
        let rows = st.query_map(params![conversation], |r| r.get::<_, String>(0))?;
        rows.map(|b| decode(&b?, "packet")).collect()
    }

    fn acquire_lease(
        &self,
        conversation: &str,
        holder: &str,
        now_ms: u64,
        ttl_ms: u64,
    ) -> Result<Option<u64>> {
        let mut conn = self.meta();
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let cur: Option<(String, i64, i64)> = tx
            .prepare_cached(
                "SELECT holder, until_ms, fence FROM writer_leases WHERE conversation = ?1",
            )?
            .query_row(params![conversation], |r| {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?))
            })
            .optional()?;
        let live = |until: i64| until as u64 > now_ms;
        let fence = match &cur {
            Some((h, until, _)) if h != holder && live(*until) => return Ok(None),
            // The same live holder renews under its token.
            Some((h, until, fence)) if h == holder && live(*until) => *fence,
            // A new grant: a newer token, so the previous holder's appends are refused.
            Some((_, _, fence)) => fence + 1,
            None => 1,
        };
        tx.prepare_cached(
            "INSERT INTO writer_leases (conversation, holder, until_ms, fence) VALUES (?1, ?2, ?3, ?4)
             ON CONFLICT(conversation) DO UPDATE SET holder = excluded.holder, until_ms = excluded.until_ms, fence = excluded.fence",
        )?
        .execute(params![conversation, holder, now_ms.saturating_add(ttl_ms) as i64, fence])?;
        tx.commit()?;
        Ok(Some(fence as u64))
    }

    fn release_lease(&self, conversation: &str, holder: &str) -> Result<()> {
        // The row stays, so the next grant's token is still newer.
        self.meta()
            .prepare_cached(
                "UPDATE writer_leases SET holder = '', until_ms = 0 WHERE conversation = ?1 AND holder = ?2",
            )?
            .execute(params![conversation, holder])?;
        Ok(())
    }
    fn note_skipped(&self, conversation: &str, record: &SkipRecord) -> Result<()> {
        let last = serde_json::to_string(record).map_err(|e| HostError::Storage(e.to_string()))?;
        self.meta().prepare_cached(NOTE_SKIPPED)?.execute(params![
            conversation,
            i64::try_from(record.checked_through_seq).unwrap_or(i64::MAX),
            last
        ])?;
        Ok(())
    }
    fn progress(&self, conversation: &str) -> Result<Option<Progress>> {
        let row: Option<(i64, String)> = self
            .meta()
            .prepare_cached(
                "SELECT skipped_runs, last FROM foldline_progress WHERE conversation = ?1",
            )?
            .query_row(params![conversation], |r| Ok((r.get(0)?, r.get(1)?)))
            .optional()?;
        row.map(|(n, last)| {
            Ok(Progress {
                skipped_runs: n as u64,
                last: decode(&last, "progress record")?,
            })
        })
        .transpose()
    }
    fn watch(&self) -> Result<Option<Box<dyn Watch>>> {
        let Some(path) = &self.path else {
            return Ok(None);
        };
        let conn = connect(path)?;
        conn.execute_batch("PRAGMA busy_timeout = 10000;")?;
        let seen = conn.query_row("SELECT coalesce(max(rowid), 0) FROM events", [], |r| {
            r.get(0)
        })?;
        Ok(Some(Box::new(RowWatch { conn, seen })))
    }
}

/// The conversations written past a row id, and the last row id: one
/// statement, so both are read at one moment of the file.
const WRITTEN_SINCE: &str =
    "SELECT conversation, max(rowid) FROM events WHERE rowid > ?1 GROUP BY conversation
 UNION ALL SELECT NULL, coalesce(max(rowid), 0) FROM events";

/// The SQLite journal's [`Watch`]: events are never updated or deleted and
/// SQLite commits one writer at a time, so the rows past the last row id
/// seen are exactly what was written since, by any connection to the file.
/// One read per call, after the call's wait.
struct RowWatch {
    conn: Connection,
    seen: i64,
}

impl Watch for RowWatch {
    fn next(&mut self, timeout: Duration) -> Result<Written> {
        std::thread::sleep(timeout);
        let mut st = self.conn.prepare_cached(WRITTEN_SINCE)?;
        let rows = st.query_map(params![self.seen], |r| {
            Ok((r.get::<_, Option<String>>(0)?, r.get::<_, i64>(1)?))
        })?;
        let (mut written, mut last) = (Vec::new(), 0);
        for row in rows {
            match row? {
                (Some(conversation), _) => written.push(conversation),
                (None, max) => last = max,
            }
        }
        // Row ids renumbered (a VACUUM of the file): start from here, and
        // let every waiting request look.
        let renumbered = last < self.seen;
        self.seen = last;
        if renumbered {
            return Ok(Written::Unknown);
        }
        written.sort_unstable();
        Ok(Written::These(written))
    }
}

#[cfg(test)]
mod tests {
    use super::SqliteJournal;

    /// A file that is not a SQLite database is refused naming it.
    #[test]
    fn a_file_that_is_not_a_journal_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("notes.txt");
        std::fs::write(
            &path,
            "hello, not a database, but long enough to have a header",
        )
        .unwrap();
        let Err(e) = SqliteJournal::open(&path) else {
            panic!("opened")
        };
        assert_eq!(e.code(), "journal");
        let said = e.to_string();
        assert!(
            said.contains("not a database") && said.contains("notes.txt"),
            "{said}"
        );
    }
}
