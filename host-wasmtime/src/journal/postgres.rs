//! The Postgres journal: the same contract as the SQLite one, on a database
//! many replicas share. Appends of one conversation are ordered by the row
//! lock of its head; a batch is written only at the expected position and
//! under the current fencing token (the lease row is locked for the
//! append's transaction, so a new grant waits for it); the database itself
//! refuses a second boundary on one chain slot and any UPDATE, DELETE or
//! TRUNCATE of events.

use foldline_core::event::Event;
use foldline_core::packet::Packet;
use postgres::NoTls;
use r2d2_postgres::PostgresConnectionManager;

use super::{chain_slot, check_batch, decode, fork, type_of, Journal, StoredEvent};
use crate::error::{HostError, Result};

/// The schema, applied at open (idempotent).
pub const MIGRATION: &str = include_str!("../../migrations/postgres.sql");

/// A pool of connections to one database.
pub type PgPool = r2d2::Pool<PostgresConnectionManager<NoTls>>;

/// The journal on PostgreSQL.
pub struct PgJournal {
    pool: PgPool,
}

fn pool_error(e: r2d2::Error) -> HostError {
    HostError::Storage(format!("postgres pool: {e}"))
}

impl From<postgres::Error> for HostError {
    fn from(e: postgres::Error) -> HostError {
        HostError::Storage(format!("postgres: {e}"))
    }
}

/// Connect a pool to `url` (`postgres://user@host:port/db`) and apply the
/// schema under an advisory lock.
///
/// # Errors
/// `journal` when the database cannot be reached or the schema not applied.
pub fn connect(url: &str) -> Result<PgPool> {
    let config: postgres::Config = url
        .parse()
        .map_err(|e| HostError::Input(format!("{url}: not a postgres URL: {e}")))?;
    let pool = r2d2::Pool::builder()
        .max_size(8)
        .connection_timeout(std::time::Duration::from_secs(10))
        .build(PostgresConnectionManager::new(config, NoTls))
        .map_err(pool_error)?;
    let mut c = pool.get().map_err(pool_error)?;
    let mut tx = c.transaction()?;
    tx.execute("SELECT pg_advisory_xact_lock(7261746564)", &[])?;
    tx.batch_execute(MIGRATION)?;
    tx.commit()?;
    Ok(pool)
}

impl PgJournal {
    /// Open the journal at `url`.
    ///
    /// # Errors
    /// As [`connect`].
    pub fn open(url: &str) -> Result<PgJournal> {
        Ok(PgJournal {
            pool: connect(url)?,
        })
    }

    /// The journal over an existing pool.
    pub fn with_pool(pool: PgPool) -> PgJournal {
        PgJournal { pool }
    }

    /// The pool (the server keeps its tables in the same database).
    pub fn pool(&self) -> &PgPool {
        &self.pool
    }

    fn conn(&self) -> Result<r2d2::PooledConnection<PostgresConnectionManager<NoTls>>> {
        self.pool.get().map_err(pool_error)
    }
}

impl Journal for PgJournal {
    fn read_events(&self, conversation: &str, since: u64) -> Result<Vec<StoredEvent>> {
        let rows = self.conn()?.query(
            "SELECT seq, body FROM foldline_events WHERE conversation = $1 AND seq > $2 ORDER BY seq",
            &[&conversation, &(since as i64)],
        )?;
        rows.iter()
            .map(|r| {
                let seq: i64 = r.get(0);
                let body: &str = r.get(1);
                Ok(StoredEvent {
                    seq: seq as u64,
                    event: decode(
                        body,
                        &format!("event at journal position {seq} of {conversation}"),
                    )?,
                })
            })
            .collect()
    }

    fn append_batch(
        &self,
        conversation: &str,
        events: &[Event],
        expected: Option<u64>,
        fence: Option<u64>,
    ) -> Result<u64> {
        let events = check_batch(conversation, events)?;
        let mut bodies = Vec::with_capacity(events.len());
        for e in &events {
            bodies.push(serde_json::to_string(e).map_err(|err| HostError::Input(err.to_string()))?);
        }
        let mut c = self.conn()?;
        let mut tx = c.transaction()?;
        if let Some(fence) = fence {
            let current: Option<i64> = tx
                .query_opt(
                    "SELECT fence FROM foldline_leases WHERE conversation = $1 FOR SHARE",
                    &[&conversation],
                )?
                .map(|r| r.get(0));
            if current != Some(fence as i64) {
                return Err(HostError::LeaseLost { fence });
            }
        }
        tx.execute(
            "INSERT INTO foldline_heads (conversation, seq) VALUES ($1, 0) ON CONFLICT DO NOTHING",
            &[&conversation],
        )?;
        let mut seq: i64 = tx
            .query_one(
                "SELECT seq FROM foldline_heads WHERE conversation = $1 FOR UPDATE",
                &[&conversation],
            )?
            .get(0);
        if let Some(expected) = expected {
            if expected != seq as u64 {
                return Err(HostError::Conflict {
                    expected,
                    found: seq as u64,
                });
            }
        }
        for (e, body) in events.iter().zip(&bodies) {
            seq += 1;
            let r = tx.execute(
                "INSERT INTO foldline_events (conversation, seq, type, body, chain_slot) VALUES ($1, $2, $3, $4, $5)",
                &[&conversation, &seq, &type_of(e), body, &chain_slot(e)],
            );
            if let Err(err) = r {
                if err.code() == Some(&postgres::error::SqlState::UNIQUE_VIOLATION) {
                    return Err(fork());
                }
                return Err(err.into());
            }
        }
        tx.execute(
            "UPDATE foldline_heads SET seq = $2 WHERE conversation = $1",
            &[&conversation, &seq],
        )?;
        tx.commit()?;
        Ok(seq as u64)
    }

    fn put_packet(&self, conversation: &str, packet: &Packet) -> Result<()> {
        let body = serde_json::to_string(packet).map_err(|e| HostError::Input(e.to_string()))?;
        self.conn()?.execute(
            "INSERT INTO foldline_packets (conversation, id, body) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING",
            &[&conversation, &packet.id, &body],
        )?;
        Ok(())
    }

    fn get_packet(&self, conversation: &str, id: &str) -> Result<Option<Packet>> {
        let row = self.conn()?.query_opt(
            "SELECT body FROM foldline_packets WHERE conversation = $1 AND id = $2",
            &[&conversation, &id],
        )?;
        row.map(|r| decode(r.get::<_, &str>(0), "packet"))
            .transpose()
    }

    fn list_packets(&self, conversation: &str) -> Result<Vec<Packet>> {
        let rows = self.conn()?.query(
            "SELECT body FROM foldline_packets WHERE conversation = $1 ORDER BY id",
            &[&conversation],
        )?;
        rows.iter()
            .map(|r| decode(r.get::<_, &str>(0), "packet"))
            .collect()
    }

    fn acquire_lease(
        &self,
        conversation: &str,
        holder: &str,
        now_ms: u64,
        ttl_ms: u64,
    ) -> Result<Option<u64>> {
        let mut c = self.conn()?;
        let mut tx = c.transaction()?;
        tx.execute(
            "INSERT INTO foldline_leases (conversation, holder, until_ms, fence) VALUES ($1, '', 0, 0) ON CONFLICT DO NOTHING",
            &[&conversation],
        )?;
        let row = tx.query_one(
            "SELECT holder, until_ms, fence FROM foldline_leases WHERE conversation = $1 FOR UPDATE",
            &[&conversation],
        )?;
        let (h, until, fence): (String, i64, i64) = (row.get(0), row.get(1), row.get(2));
        let live = until as u64 > now_ms;
        let fence = if h != holder && live {
            return Ok(None);
        } else if h == holder && live {
            fence
        } else {
            fence + 1
        };
        tx.execute(
            "UPDATE foldline_leases SET holder = $2, until_ms = $3, fence = $4 WHERE conversation = $1",
            &[&conversation, &holder, &(now_ms.saturating_add(ttl_ms) as i64), &fence],
        )?;
        tx.commit()?;
        Ok(Some(fence as u64))
    }

    fn release_lease(&self, conversation: &str, holder: &str) -> Result<()> {
        self.conn()?.execute(
            "UPDATE foldline_leases SET holder = '', until_ms = 0 WHERE conversation = $1 AND holder = $2",
            &[&conversation, &holder],
        )?;
        Ok(())
    }
}
