//! The Postgres journal: the same contract as the SQLite one, on a database
//! many replicas share. Appends of one conversation are ordered by the row
//! lock of its head; a batch is written only at the expected position and
//! under the current fencing token (the lease row is locked for the
//! append's transaction, so a new grant waits for it); the database itself
//! refuses a second boundary on one chain slot and any UPDATE, DELETE or
//! TRUNCATE of events.

use foldline_core::event::Event;
use foldline_core::packet::Packet;
use foldline_core::plan::SkipRecord;

use super::pg_notes::Notes;
pub(crate) use super::pg_pool::PgPool;
use super::pg_pool::{pool_error, Manager};
use super::pg_watch::PgWatch;
use super::{
    backfill_claims, chain_slot, check_batch, conflicting_turn, decode, fork, legacy_claim,
    turn_claims, type_of, Journal, Progress, StoredEvent, Watch,
};
use crate::error::{HostError, Result};

/// The schema, applied at open (idempotent).
pub const MIGRATION: &str = include_str!("../../migrations/postgres.sql");

/// The journal on PostgreSQL: a pool of up to 8 connections and one thread
/// that writes the progress notes behind the message path (`pg_notes.rs`);
/// open it once per process and share it.
pub struct PgJournal {
    pool: PgPool,
    notes: Notes,
    /// How the pool connects: a [`Watch`] listens on a connection of its own.
    config: postgres::Config,
}

/// Session settings of every connection, so that no paused process can
/// stall another replica: a statement waits at most 2 s for a lock (then
/// `busy`, rolled back, nothing written), and a session idle inside a
/// transaction for 5 s (a process paused mid-write: a GC pause, a frozen
/// VM, `SIGSTOP`) is ended by the server, which releases its locks. As a
/// startup `options` parameter, for a tool connecting beside the journal;
/// the journal itself runs [`SESSION_SETTINGS`].
pub const SESSION_OPTIONS: &str =
    "-c lock_timeout=2000 -c idle_in_transaction_session_timeout=5000";

pub use super::pg_pool::SESSION_SETTINGS;

impl From<postgres::Error> for HostError {
    fn from(e: postgres::Error) -> HostError {
        use postgres::error::SqlState;
        let Some(db) = e.as_db_error() else {
            return HostError::Storage(format!("postgres: {e}"));
        };
        let code = db.code();
        if *code == SqlState::LOCK_NOT_AVAILABLE || *code == SqlState::QUERY_CANCELED {
            return HostError::Busy(format!(
                "the database could not take the write in time ({}: {})",
                code.code(),
                db.message()
            ));
        }
        // The database's own words, for the log (members see the code only).
        let detail = db.detail().map(|d| format!("; {d}")).unwrap_or_default();
        HostError::Storage(format!(
            "postgres {}: {}{detail}",
            code.code(),
            db.message()
        ))
    }
}

/// The schema's version: the migration's own hash, so a changed migration
/// is applied again and an applied one is recognized without a lock.
fn schema_version() -> String {
    use sha2::Digest;
    let d = sha2::Sha256::digest(MIGRATION.as_bytes());
    d.iter().map(|b| format!("{b:02x}")).collect()
}

/// Whether this schema version is already applied: a plain read, which
/// takes no lock any writer waits for.
fn applied(c: &mut postgres::Client, version: &str) -> Result<bool> {
    let exists: bool = c
        .query_one("SELECT to_regclass('foldline_schema') IS NOT NULL", &[])?
        .get(0);
    if !exists {
        return Ok(false);
    }
    Ok(c.query_opt(
        "SELECT 1 FROM foldline_schema WHERE version = $1",
        &[&version],
    )?
    .is_some())
}

/// How long opening a connection may take, unless the URL says
/// (`connect_timeout`); and how long the pool waits for a free one.
const CONNECT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// A database that could not be reached, with every reason the client gave
/// (`Connection refused`, `password authentication failed for user …`,
/// `database "…" does not exist`), and where: the URL without its password.
fn unreachable(url: &str, e: &postgres::Error) -> HostError {
    let mut reason = e.to_string();
    let mut cause = std::error::Error::source(e);
    while let Some(c) = cause {
        let more = c.to_string();
        if !reason.ends_with(&more) {
            reason = format!("{reason}: {more}");
        }
        cause = c.source();
    }
    HostError::Storage(format!("{}: {reason}", without_password(url)))
}

/// `url` as it may be printed: a password in it (`user:secret@`,
/// `password=secret` as a query parameter or a key-value pair) shown as
/// `***`.
fn without_password(url: &str) -> String {
    let mut shown = String::with_capacity(url.len());
    let mut rest = url;
    if let Some(after) = url.find("://").map(|i| i + 3) {
        let authority = url[after..]
            .find(['/', '?', '#'])
            .map_or(url.len(), |i| after + i);
        if let Some(at) = url[after..authority].rfind('@').map(|i| after + i) {
            if let Some(colon) = url[after..at].find(':').map(|i| after + i) {
                shown.push_str(&url[..=colon]);
                shown.push_str("***");
                rest = &url[at..];
            }
        }
    }
    for word in rest.split_inclusive(['&', ' ', '?']) {
        match word.strip_prefix("password=") {
            Some(value) => {
                shown.push_str("password=***");
                shown.extend(
                    value
                        .chars()
                        .last()
                        .filter(|c| matches!(c, '&' | ' ' | '?')),
                );
            }
            None => shown.push_str(word),
        }
    }
    shown
}

/// Connect a pool to `url` (`postgres://user@host:port/db`) with the
/// [`SESSION_SETTINGS`], and apply the schema unless this version is already
/// applied (checked without a lock first, so a replica starting beside a
/// stalled one never queues behind it on the events table; the migration
/// itself runs under an advisory lock, so replicas starting together do not
/// race).
///
/// # Errors
/// `journal` when the database cannot be reached or the schema not applied.
pub(crate) fn connect(url: &str) -> Result<PgPool> {
    let manager = Manager::new(session_config(url)?);
    // One connection first, outside the pool: the pool reports a database
    // it cannot reach only once its whole timeout has passed, and as
    // "timed out waiting for connection" without the reason.
    drop(r2d2::ManageConnection::connect(&manager).map_err(|e| unreachable(url, &e))?);
    let pool = r2d2::Pool::builder()
        .max_size(8)
        .connection_timeout(CONNECT_TIMEOUT)
        .build(manager)
        .map_err(pool_error)?;
    migrate(&pool)?;
    Ok(pool)
}

/// How foldline connects to `url`: its settings, with a connect timeout
/// unless the URL sets one (each pooled connection then runs
/// [`SESSION_SETTINGS`]: `pg_pool.rs`).
fn session_config(url: &str) -> Result<postgres::Config> {
    let mut config: postgres::Config = url.parse().map_err(|e| {
        HostError::Input(format!(
            "{}: not a postgres URL: {e}",
            without_password(url)
        ))
    })?;
    if config.get_connect_timeout().is_none() {
        // A host that never answers would otherwise wait out TCP's minutes.
        config.connect_timeout(CONNECT_TIMEOUT);
    }
    Ok(config)
}

/// Apply the schema unless this version is (under an advisory lock, so
/// replicas starting together do not race).
fn migrate(pool: &PgPool) -> Result<()> {
    let mut c = pool.get().map_err(pool_error)?;
    let version = schema_version();
    if applied(&mut c, &version)? {
        return Ok(());
    }
    let mut tx = c.transaction()?;
    // Waiting for the events table behind a stalled replica is no use here.
    tx.batch_execute("SET LOCAL lock_timeout = '30s'")?;
    tx.execute("SELECT pg_advisory_xact_lock(7261746564)", &[])?;
    tx.batch_execute(MIGRATION)?;
    // The turn claims of messages written before foldline_turns existed, or
    // whose claims of the earlier form the script removed.
    let rows = tx.query(
        "SELECT e.conversation, e.body FROM foldline_events e
         WHERE e.type IN ('message', 'lateDelivery') AND NOT EXISTS (
           SELECT 1 FROM foldline_turns t
           WHERE t.conversation = e.conversation AND t.turn_id = e.body::json->>'turnId')
         ORDER BY e.conversation, e.seq",
        &[],
    )?;
    let put = tx.prepare(
        "INSERT INTO foldline_turns (conversation, turn_id, claim) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING",
    )?;
    let mut puts = Vec::new();
    backfill_claims(
        rows.iter()
            .map(|r| (r.get::<_, String>(0), r.get::<_, String>(1))),
        |c, t, claim| {
            puts.push((c.to_owned(), t.to_owned(), claim.to_owned()));
            Ok(())
        },
    )?;
    for (c, t, claim) in &puts {
        tx.execute(&put, &[c, t, claim])?;
    }
    tx.execute(
        "INSERT INTO foldline_schema (version) VALUES ($1) ON CONFLICT DO NOTHING",
        &[&version],
    )?;
    tx.commit()?;
    Ok(())
}

impl PgJournal {
    /// Open the journal at `url`: a pool of connections, each with
    /// [`SESSION_SETTINGS`], and the schema applied unless this version is
    /// already (under an advisory lock, so replicas starting together do
    /// not race).
    ///
    /// # Errors
    /// `invalid_input` for a URL that is not a PostgreSQL one; `journal`
    /// when the database cannot be reached or the schema not applied.
    pub fn open(url: &str) -> Result<PgJournal> {
        let pool = connect(url)?;
        Ok(PgJournal {
            notes: Notes::start(pool.clone())?,
            pool,
            config: session_config(url)?,
        })
    }

    fn conn(&self) -> Result<r2d2::PooledConnection<Manager>> {
        self.pool.get().map_err(pool_error)
    }
}

impl PgJournal {
    /// Whether `id`'s stored claim was of the earlier form (an older
    /// replica kept it) and says what the batch's message says: then it is
    /// taken up to this form, and the refused batch may be tried again.
    fn heal_claim(
        &self,
        conversation: &str,
        events: &[Event],
        turn_ids: &[String],
        claims: &[String],
        id: &str,
    ) -> Result<bool> {
        let at = turn_ids.iter().position(|t| t == id);
        let (Some(at), Some(legacy)) = (at, legacy_claim(events, id)) else {
            return Ok(false);
        };
        let healed = self.conn()?.rows(
            "UPDATE foldline_turns SET claim = $3 WHERE conversation = $1 AND turn_id = $2 AND claim = $4 RETURNING 1",
            &[&conversation, &id, &claims[at], &legacy],
        )?;
        Ok(!healed.is_empty())
    }
}

impl Journal for PgJournal {
    fn read_events(&self, conversation: &str, since: u64) -> Result<Vec<StoredEvent>> {
        self.read_events_page(conversation, since, usize::MAX)
    }

    fn read_events_page(
        &self,
        conversation: &str,
        since: u64,
        limit: usize,
    ) -> Result<Vec<StoredEvent>> {
        // Prepared once per connection (`pg_pool.rs`): one round trip per
        // statement, as every statement of a message below.
        let since = i64::try_from(since).unwrap_or(i64::MAX);
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let rows = self.conn()?.rows(
            "SELECT seq, body FROM foldline_events WHERE conversation = $1 AND seq > $2 ORDER BY seq LIMIT $3",
            &[&conversation, &since, &limit],
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
        let (turn_ids, claims): (Vec<String>, Vec<String>) =
            turn_claims(&events)?.into_iter().unzip();
        let mut bodies = Vec::with_capacity(events.len());
        for e in &events {
            bodies.push(serde_json::to_string(e).map_err(|err| HostError::Input(err.to_string()))?);
        }
        let types: Vec<&str> = events.iter().map(type_of).collect();
        let slots: Vec<Option<String>> = events.iter().map(chain_slot).collect();
        let expected = expected.map(|e| i64::try_from(e).unwrap_or(i64::MAX));
        let fenced = fence.map(|f| i64::try_from(f).unwrap_or(i64::MAX));
        loop {
            // One round trip: the migration's `foldline_append` checks the
            // fence, the head and the turn claims and writes the batch, in
            // one statement (its own transaction), all or nothing.
            let err = match self.conn()?.rows(
                "SELECT foldline_append($1, $2, $3, $4, $5, $6, $7, $8)",
                &[
                    &conversation,
                    &expected,
                    &fenced,
                    &types,
                    &bodies,
                    &slots,
                    &turn_ids,
                    &claims,
                ],
            ) {
                Ok(r) => {
                    return match r.first() {
                        Some(r) => Ok(r.get::<_, i64>(0) as u64),
                        None => Err(HostError::Storage(
                            "postgres: foldline_append answered no row".into(),
                        )),
                    }
                }
                Err(err) => err,
            };
            let Some(db) = err.as_db_error() else {
                return Err(err.into());
            };
            return match db.code().code() {
                "FL001" => Err(HostError::LeaseLost {
                    fence: fence.unwrap_or_default(),
                }),
                "FL002" => Err(HostError::Conflict {
                    expected: expected.unwrap_or_default() as u64,
                    found: db.message().parse().unwrap_or_default(),
                }),
                "FL003" => {
                    let id = db.message().to_owned();
                    // Healed: the batch is tried again (each turn at most once).
                    if self.heal_claim(conversation, &events, &turn_ids, &claims, &id)? {
                        continue;
                    }
                    Err(conflicting_turn(&id))
                }
                "23505" => Err(fork()),
                _ => Err(err.into()),
            };
        }
    }

    fn put_packet(&self, conversation: &str, packet: &Packet) -> Result<()> {
        let body = serde_json::to_string(packet).map_err(|e| HostError::Input(e.to_string()))?;
        self.conn()?.rows(
            "INSERT INTO foldline_packets (conversation, id, body) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING",
            &[&conversation, &packet.id, &body],
        )?;
        Ok(())
    }

    fn get_packet(&self, conversation: &str, id: &str) -> Result<Option<Packet>> {
        let rows = self.conn()?.rows(
            "SELECT body FROM foldline_packets WHERE conversation = $1 AND id = $2",
            &[&conversation, &id],
        )?;
        rows.first()
            .map(|r| decode(r.get::<_, &str>(0), "packet"))
            .transpose()
    }

    fn list_packets(&self, conversation: &str) -> Result<Vec<Packet>> {
        let rows = self.conn()?.rows(
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
        // One statement: a first grant is token 1; the same live holder
        // renews under its token; a new holder, or any holder after a
        // lapse, gets the next token; another live holder leaves the row
        // as it is and no row comes back (`None`). The conflict's row lock
        // orders concurrent grants.
        let until = i64::try_from(now_ms.saturating_add(ttl_ms)).unwrap_or(i64::MAX);
        let now = i64::try_from(now_ms).unwrap_or(i64::MAX);
        let rows = self.conn()?.rows(
            "INSERT INTO foldline_leases AS l (conversation, holder, until_ms, fence) VALUES ($1, $2, $3, 1)
             ON CONFLICT (conversation) DO UPDATE SET holder = excluded.holder, until_ms = excluded.until_ms,
               fence = CASE WHEN l.holder = excluded.holder AND l.until_ms > $4 THEN l.fence ELSE l.fence + 1 END
             WHERE l.holder = excluded.holder OR l.until_ms <= $4
             RETURNING fence",
            &[&conversation, &holder, &until, &now],
        )?;
        Ok(rows.first().map(|r| r.get::<_, i64>(0) as u64))
    }

    fn release_lease(&self, conversation: &str, holder: &str) -> Result<()> {
        self.conn()?.rows(
            "UPDATE foldline_leases SET holder = '', until_ms = 0 WHERE conversation = $1 AND holder = $2",
            &[&conversation, &holder],
        )?;
        Ok(())
    }
    /// Written behind the message path (`pg_notes.rs`): merged into the
    /// pending notes at once, written with the others pending in one
    /// statement by the journal's writer thread.
    fn note_skipped(&self, conversation: &str, record: &SkipRecord) -> Result<()> {
        self.notes.note(conversation, record)
    }
    fn watch(&self) -> Result<Option<Box<dyn Watch>>> {
        Ok(Some(Box::new(PgWatch::open(&self.config)?)))
    }

    fn progress(&self, conversation: &str) -> Result<Option<Progress>> {
        self.notes.flush()?;
        self.conn()?
            .rows(
                "SELECT skipped_runs, last FROM foldline_progress WHERE conversation = $1",
                &[&conversation],
            )?
            .first()
            .map(|r| {
                Ok(Progress {
                    skipped_runs: r.get::<_, i64>(0) as u64,
                    last: decode(&r.get::<_, String>(1), "progress record")?,
                })
            })
            .transpose()
    }
}

#[cfg(test)]
mod tests {
    use super::without_password;

    #[test]
    fn a_url_is_printed_without_its_password() {
        for (url, shown) in [
            (
                "postgres://u:s3cret@h:5432/db",
                "postgres://u:***@h:5432/db",
            ),
            ("postgresql://u:p@ss@h/db", "postgresql://u:***@h/db"),
            ("postgres://u@h/db", "postgres://u@h/db"),
            (
                "postgres://h/db?password=s3cret&sslmode=disable",
                "postgres://h/db?password=***&sslmode=disable",
            ),
            (
                "postgres://h/db?user=u&password=s3cret",
                "postgres://h/db?user=u&password=***",
            ),
            (
                "host=h user=u password=s3cret dbname=db",
                "host=h user=u password=*** dbname=db",
            ),
            (
                "postgres://u:a@h/db?password=b",
                "postgres://u:***@h/db?password=***",
            ),
        ] {
            assert_eq!(without_password(url), shown, "{url}");
        }
    }
}
