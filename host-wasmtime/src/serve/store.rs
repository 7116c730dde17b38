//! What the server keeps beside the journal, in the same database: who owns
//! each conversation, the pointers of manual tasks (so a task a server was
//! running when it stopped is ended when it starts again, and a member
//! reloading a page finds their task by its id), and the answers holding a
//! session — shared by every replica on a Postgres journal.
//!
//! Each query is written once (`$1` placeholders, `ON CONFLICT`, which
//! SQLite and PostgreSQL both speak) and run on either backend.

use std::path::PathBuf;
use std::sync::Mutex;

use rusqlite::types::ValueRef;

use crate::error::{HostError, Result};
#[cfg(feature = "postgres")]
use crate::journal::postgres::PgPool;
use foldline_core::member::seams::{Pass, PassTool};
use foldline_core::member::settings::Preferences;
use foldline_core::member::Status;

/// Where a server's journal lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Location {
    /// A SQLite file (one machine).
    Sqlite(PathBuf),
    /// A PostgreSQL database URL (any number of replicas).
    Postgres(String),
}

impl Location {
    /// `postgres://…` or `postgresql://…` is a database; anything else a file.
    pub fn parse(s: &str) -> Location {
        if s.starts_with("postgres://") || s.starts_with("postgresql://") {
            Location::Postgres(s.to_owned())
        } else {
            Location::Sqlite(PathBuf::from(s))
        }
    }
}

/// The refusal of a database URL by a build without PostgreSQL.
#[cfg(not(feature = "postgres"))]
pub(crate) const NO_POSTGRES: &str =
    "a postgres:// journal needs foldline-wasmtime's `postgres` feature, which this build leaves out";

/// A manual task's pointer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskPointer {
    /// The conversation.
    pub conversation: String,
    /// The task id.
    pub task: String,
    /// The member who asked.
    pub member: String,
    /// The journal position of its `requested` event (0 until accepted).
    pub requested_seq: u64,
    /// `pending`, `accepted`, `refused` or `done`.
    pub state: String,
}

/// A query parameter or column value.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Val {
    Text(String),
    Int(i64),
}

impl Val {
    fn text(&self) -> String {
        match self {
            Val::Text(s) => s.clone(),
            Val::Int(i) => i.to_string(),
        }
    }
    fn int(&self) -> i64 {
        match self {
            Val::Int(i) => *i,
            Val::Text(s) => s.parse().unwrap_or(0),
        }
    }
}

fn t(s: &str) -> Val {
    Val::Text(s.to_owned())
}

enum Backend {
    Sqlite(Mutex<rusqlite::Connection>),
    #[cfg(feature = "postgres")]
    Postgres(PgPool),
}

/// Ownership, task pointers and answers.
pub struct Store {
    db: Backend,
}

const SQLITE_SCHEMA: &str = "
PRAGMA journal_mode = WAL;
PRAGMA busy_timeout = 10000;
CREATE TABLE IF NOT EXISTS serve_owners (conversation TEXT PRIMARY KEY, member TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS serve_tasks (
  conversation TEXT NOT NULL, task TEXT NOT NULL, member TEXT NOT NULL,
  requested_seq INTEGER NOT NULL DEFAULT 0, state TEXT NOT NULL,
  PRIMARY KEY (conversation, task)
);
CREATE TABLE IF NOT EXISTS serve_answers (conversation TEXT PRIMARY KEY, answer TEXT NOT NULL, until_ms INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS serve_room (conversation TEXT NOT NULL, member TEXT NOT NULL, PRIMARY KEY (conversation, member));
CREATE TABLE IF NOT EXISTS serve_compression (member TEXT PRIMARY KEY, preferences TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS serve_answer_state (conversation TEXT NOT NULL, answer TEXT NOT NULL, preferences TEXT NOT NULL, PRIMARY KEY (conversation, answer));
CREATE TABLE IF NOT EXISTS serve_condense_starts (member TEXT NOT NULL, at_ms INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS serve_condense_starts_member ON serve_condense_starts (member, at_ms);
CREATE TABLE IF NOT EXISTS serve_compression_stats (
  member TEXT NOT NULL, conversation TEXT NOT NULL, pass TEXT NOT NULL, tool TEXT NOT NULL, status TEXT NOT NULL,
  eligible_bytes INTEGER NOT NULL, delivered_bytes INTEGER NOT NULL,
  PRIMARY KEY (member, conversation, pass)
);
";

impl Store {
    /// Open (and create) the tables where the journal lives (on Postgres the
    /// journal's migration made them).
    ///
    /// # Errors
    /// Storage failures.
    pub fn open(at: &Location) -> Result<Store> {
        Ok(Store {
            db: match at {
                Location::Sqlite(p) => {
                    Backend::Sqlite(crate::journal::sqlite::open_with(p, SQLITE_SCHEMA)?)
                }
                #[cfg(feature = "postgres")]
                Location::Postgres(url) => {
                    Backend::Postgres(crate::journal::postgres::connect(url)?)
                }
                #[cfg(not(feature = "postgres"))]
                Location::Postgres(_) => return Err(HostError::Input(NO_POSTGRES.to_owned())),
            },
        })
    }

    /// Run a statement; the rows it changed.
    fn exec(&self, sql: &str, params: &[Val]) -> Result<u64> {
        match &self.db {
            Backend::Sqlite(c) => {
                let p: Vec<Box<dyn rusqlite::ToSql>> = params.iter().map(sqlite_param).collect();
                let n = crate::sync::lock(c)
                    .prepare_cached(&sql.replace('$', "?"))?
                    .execute(rusqlite::params_from_iter(p.iter()))?;
                Ok(n as u64)
            }
            #[cfg(feature = "postgres")]
            Backend::Postgres(pool) => with_pg(pool, params, |c, p| {
                let statement = c.statement(sql)?;
                Ok(c.execute(&statement, p)?)
            }),
        }
    }

    /// Run a query; its rows as values.
    fn rows(&self, sql: &str, params: &[Val]) -> Result<Vec<Vec<Val>>> {
        match &self.db {
            Backend::Sqlite(c) => {
                let c = crate::sync::lock(c);
                let p: Vec<Box<dyn rusqlite::ToSql>> = params.iter().map(sqlite_param).collect();
                let mut st = c.prepare_cached(&sql.replace('$', "?"))?;
                let n = st.column_count();
                let rows = st.query_map(rusqlite::params_from_iter(p.iter()), |r| {
                    (0..n)
                        .map(|i| {
                            Ok(match r.get_ref(i)? {
                                ValueRef::Integer(v) => Val::Int(v),
                                ValueRef::Text(b) => Val::Text(String::from_utf8_lossy(b).into()),
                                _ => Val::Text(String::new()),
                            })
                        })
                        .collect::<rusqlite::Result<Vec<Val>>>()
                })?;
                Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
            }
            #[cfg(feature = "postgres")]
            Backend::Postgres(pool) => with_pg(pool, params, |c, p| {
                Ok(c.rows(sql, p)?
                    .iter()
                    .map(|r| {
                        (0..r.len())
                            .map(|i| match r.try_get::<_, i64>(i) {
                                Ok(v) => Val::Int(v),
                                Err(_) => Val::Text(r.try_get::<_, String>(i).unwrap_or_default()),
                            })
                            .collect()
                    })
                    .collect())
            }),
        }
    }

    /// The owner of a conversation, if it exists.
    ///
    /// # Errors
    /// Storage failures.
    pub fn owner(&self, conversation: &str) -> Result<Option<String>> {
        Ok(self
            .rows(
                "SELECT member FROM serve_owners WHERE conversation = $1",
                &[t(conversation)],
            )?
            .first()
            .map(|r| r[0].text()))
    }

    /// The owner, making `member` the owner of a new conversation.
    ///
    /// # Errors
    /// Storage failures.
    pub fn claim(&self, conversation: &str, member: &str) -> Result<String> {
        // Read first: on every append but a conversation's first, the owner
        // is there, and a read takes no write lock. Two first claims at once
        // both insert-or-ignore and read the same winner.
        if let Some(owner) = self.owner(conversation)? {
            return Ok(owner);
        }
        self.exec(
            "INSERT INTO serve_owners (conversation, member) VALUES ($1, $2) ON CONFLICT DO NOTHING",
            &[t(conversation), t(member)],
        )?;
        Ok(self.owner(conversation)?.unwrap_or_default())
    }

    /// Let `member` into the conversation's room (idempotent).
    ///
    /// # Errors
    /// Storage failures.
    pub fn admit(&self, conversation: &str, member: &str) -> Result<()> {
        self.exec(
            "INSERT INTO serve_room (conversation, member) VALUES ($1, $2) ON CONFLICT DO NOTHING",
            &[t(conversation), t(member)],
        )?;
        Ok(())
    }

    /// Take `member` out of the conversation's room; whether they were in it.
    ///
    /// # Errors
    /// Storage failures.
    pub fn dismiss(&self, conversation: &str, member: &str) -> Result<bool> {
        Ok(self.exec(
            "DELETE FROM serve_room WHERE conversation = $1 AND member = $2",
            &[t(conversation), t(member)],
        )? > 0)
    }

    /// The members of the conversation's room (its owner not included), in order.
    ///
    /// # Errors
    /// Storage failures.
    pub fn room(&self, conversation: &str) -> Result<Vec<String>> {
        Ok(self
            .rows(
                "SELECT member FROM serve_room WHERE conversation = $1 ORDER BY member",
                &[t(conversation)],
            )?
            .iter()
            .map(|r| r[0].text())
            .collect())
    }

    /// Whether `member` is in the conversation's room.
    ///
    /// # Errors
    /// Storage failures.
    pub fn in_room(&self, conversation: &str, member: &str) -> Result<bool> {
        Ok(!self
            .rows(
                "SELECT 1 FROM serve_room WHERE conversation = $1 AND member = $2",
                &[t(conversation), t(member)],
            )?
            .is_empty())
    }

    /// Record a new task pointer (`pending`).
    ///
    /// # Errors
    /// Storage failures.
    pub fn add_task(&self, conversation: &str, task: &str, member: &str) -> Result<()> {
        self.exec(
            "INSERT INTO serve_tasks (conversation, task, member, state) VALUES ($1, $2, $3, 'pending')",
            &[t(conversation), t(task), t(member)],
        )?;
        Ok(())
    }

    /// Move a task pointer to `state` (and its `requested` position, when known).
    ///
    /// # Errors
    /// Storage failures.
    pub fn set_task(
        &self,
        conversation: &str,
        task: &str,
        state: &str,
        requested_seq: Option<u64>,
    ) -> Result<()> {
        match requested_seq {
            Some(seq) => self.exec(
                "UPDATE serve_tasks SET state = $3, requested_seq = $4 WHERE conversation = $1 AND task = $2",
                &[t(conversation), t(task), t(state), Val::Int(seq as i64)],
            )?,
            None => self.exec(
                "UPDATE serve_tasks SET state = $3 WHERE conversation = $1 AND task = $2",
                &[t(conversation), t(task), t(state)],
            )?,
        };
        Ok(())
    }

    /// A task pointer.
    ///
    /// # Errors
    /// Storage failures.
    pub fn task(&self, conversation: &str, task: &str) -> Result<Option<TaskPointer>> {
        Ok(self
            .rows(
                "SELECT conversation, task, member, requested_seq, state FROM serve_tasks
                 WHERE conversation = $1 AND task = $2",
                &[t(conversation), t(task)],
            )?
            .first()
            .map(|r| pointer(r)))
    }

    /// Tasks that were pending or accepted and never ended (a server stopped
    /// while running them).
    ///
    /// # Errors
    /// Storage failures.
    pub fn open_tasks(&self) -> Result<Vec<TaskPointer>> {
        Ok(self
            .rows(
                "SELECT conversation, task, member, requested_seq, state FROM serve_tasks
                 WHERE state IN ('pending', 'accepted') ORDER BY conversation, task",
                &[],
            )?
            .iter()
            .map(|r| pointer(r))
            .collect())
    }

    /// Record `answer` as holding the session until `until_ms`, unless a
    /// live answer already does; true when recorded.
    ///
    /// # Errors
    /// Storage failures.
    pub fn start_answer(
        &self,
        conversation: &str,
        answer: &str,
        now_ms: u64,
        until_ms: u64,
    ) -> Result<bool> {
        Ok(self.exec(
            "INSERT INTO serve_answers (conversation, answer, until_ms) VALUES ($1, $2, $3)
             ON CONFLICT (conversation) DO UPDATE SET answer = excluded.answer, until_ms = excluded.until_ms
             WHERE serve_answers.until_ms <= $4",
            &[t(conversation), t(answer), Val::Int(until_ms as i64), Val::Int(now_ms as i64)],
        )? == 1)
    }

    /// The live answer holding the session, if any.
    ///
    /// # Errors
    /// Storage failures.
    pub fn answer(&self, conversation: &str, now_ms: u64) -> Result<Option<String>> {
        Ok(self
            .rows(
                "SELECT answer FROM serve_answers WHERE conversation = $1 AND until_ms > $2",
                &[t(conversation), Val::Int(now_ms as i64)],
            )?
            .first()
            .map(|r| r[0].text()))
    }

    /// End `answer`; true when it held the session.
    ///
    /// # Errors
    /// Storage failures.
    pub fn end_answer(&self, conversation: &str, answer: &str) -> Result<bool> {
        Ok(self.exec(
            "UPDATE serve_answers SET until_ms = 0 WHERE conversation = $1 AND answer = $2 AND until_ms > 0",
            &[t(conversation), t(answer)],
        )? == 1)
    }
}

/// The window of a member's manual compactions.
const RATE_WINDOW_MS: i64 = 60_000;

/// The per-minute limit of manual compactions, shared by every server on
/// the store (replicas on one PostgreSQL database, processes on one SQLite
/// file): a member's starts are rows, so a replica counts the others'.
impl Store {
    /// Take one of `member`'s `per_minute` manual compactions at `now_ms`:
    /// `None` when taken, or the seconds until one is free again. Exact
    /// under concurrency: one statement on SQLite (its writes are
    /// serialized), the same under a per-member transaction lock on
    /// PostgreSQL.
    ///
    /// # Errors
    /// Storage failures.
    pub fn take_condense(&self, member: &str, now_ms: u64, per_minute: u32) -> Result<Option<u64>> {
        const FORGET: &str = "DELETE FROM serve_condense_starts WHERE at_ms <= $1";
        const TAKE: &str = "INSERT INTO serve_condense_starts (member, at_ms) SELECT $1, $2
             WHERE (SELECT count(*) FROM serve_condense_starts WHERE member = $1 AND at_ms > $3) < $4";
        let now = i64::try_from(now_ms).unwrap_or(i64::MAX);
        let since = now.saturating_sub(RATE_WINDOW_MS);
        let take = [
            t(member),
            Val::Int(now),
            Val::Int(since),
            Val::Int(i64::from(per_minute)),
        ];
        let taken = match &self.db {
            Backend::Sqlite(_) => {
                self.exec(FORGET, &[Val::Int(since)])?;
                self.exec(TAKE, &take)?
            }
            #[cfg(feature = "postgres")]
            Backend::Postgres(pool) => with_pg(pool, &take, |c, p| {
                let mut tx = c.transaction()?;
                tx.execute(
                    "SELECT pg_advisory_xact_lock(hashtextextended('condense:' || $1, 0))",
                    &[p[0]],
                )?;
                tx.execute(FORGET, &[p[2]])?;
                let n = tx.execute(TAKE, p)?;
                tx.commit()?;
                Ok(n)
            })?,
        };
        if taken == 1 {
            return Ok(None);
        }
        let oldest = self.rows(
            "SELECT min(at_ms) FROM serve_condense_starts WHERE member = $1 AND at_ms > $2",
            &[t(member), Val::Int(since)],
        )?;
        let free_at = oldest.first().map_or(now, |r| r[0].int()) + RATE_WINDOW_MS;
        Ok(Some(
            u64::try_from((free_at - now).max(1))
                .unwrap_or(1)
                .div_ceil(1000),
        ))
    }
}

/// Member compression: preferences, the state an answer captured at its
/// start, and the owner-bound stats recorder.
impl Store {
    /// A member's compression preferences (all off when never set).
    ///
    /// # Errors
    /// Storage failures.
    pub fn preferences(&self, member: &str) -> Result<Preferences> {
        self.rows(
            "SELECT preferences FROM serve_compression WHERE member = $1",
            &[t(member)],
        )?
        .first()
        .map_or(Ok(Preferences::default()), |r| {
            decode_preferences(&r[0].text())
        })
    }

    /// Store a member's preferences (they apply to runs started after this).
    ///
    /// # Errors
    /// Storage failures.
    pub fn set_preferences(&self, member: &str, p: &Preferences) -> Result<()> {
        self.exec(
            "INSERT INTO serve_compression (member, preferences) VALUES ($1, $2)
             ON CONFLICT (member) DO UPDATE SET preferences = excluded.preferences",
            &[t(member), t(&encode_preferences(p)?)],
        )?;
        Ok(())
    }

    /// Capture the preferences an answer runs with, at its start.
    ///
    /// # Errors
    /// Storage failures.
    pub fn capture(&self, conversation: &str, answer: &str, p: &Preferences) -> Result<()> {
        self.exec(
            "INSERT INTO serve_answer_state (conversation, answer, preferences) VALUES ($1, $2, $3)
             ON CONFLICT DO NOTHING",
            &[t(conversation), t(answer), t(&encode_preferences(p)?)],
        )?;
        Ok(())
    }

    /// The preferences `answer` captured at its start.
    ///
    /// # Errors
    /// Storage failures.
    pub fn captured(&self, conversation: &str, answer: &str) -> Result<Option<Preferences>> {
        self.rows(
            "SELECT preferences FROM serve_answer_state WHERE conversation = $1 AND answer = $2",
            &[t(conversation), t(answer)],
        )?
        .first()
        .map(|r| decode_preferences(&r[0].text()))
        .transpose()
    }

    /// Record each pass once (a pass is keyed by what it shaped, so asking
    /// for the same context again records nothing new). Content-dark: ids,
    /// tool, status and byte counts only.
    ///
    /// # Errors
    /// Storage failures.
    pub fn record_passes(&self, member: &str, conversation: &str, passes: &[Pass]) -> Result<()> {
        // One statement per hundred passes, not one per pass: a context with
        // many tool results costs one write, not one commit each.
        for chunk in passes.chunks(100) {
            let mut sql = String::from(
                "INSERT INTO serve_compression_stats
                 (member, conversation, pass, tool, status, eligible_bytes, delivered_bytes) VALUES ",
            );
            let mut params = Vec::with_capacity(chunk.len() * 7);
            for (i, p) in chunk.iter().enumerate() {
                let tool = match p.tool {
                    PassTool::PromptTrim => "promptTrim",
                    PassTool::ToolResult => "toolResult",
                };
                let status = match p.measurement.status {
                    Status::Applied => "applied",
                    Status::Bypassed => "bypassed",
                    Status::Failed => "failed",
                };
                let key = format!(
                    "{tool}:{}:{}",
                    p.turn_id.as_deref().unwrap_or("prompt"),
                    p.call_id.as_deref().unwrap_or("")
                );
                let n = i * 7;
                if i > 0 {
                    sql.push_str(", ");
                }
                sql.push_str(&format!(
                    "(${}, ${}, ${}, ${}, ${}, ${}, ${})",
                    n + 1,
                    n + 2,
                    n + 3,
                    n + 4,
                    n + 5,
                    n + 6,
                    n + 7
                ));
                params.extend([
                    t(member),
                    t(conversation),
                    t(&key),
                    t(tool),
                    t(status),
                    Val::Int(p.measurement.eligible_bytes.min(i64::MAX as u64) as i64),
                    Val::Int(p.measurement.delivered_bytes.min(i64::MAX as u64) as i64),
                ]);
            }
            sql.push_str(" ON CONFLICT DO NOTHING");
            self.exec(&sql, &params)?;
        }
        Ok(())
    }

    /// A member's passes, summed by tool and status.
    ///
    /// # Errors
    /// Storage failures.
    pub fn stats(&self, member: &str) -> Result<Vec<PassStats>> {
        Ok(self
            .rows(
                "SELECT tool, status, COUNT(*), CAST(COALESCE(SUM(eligible_bytes), 0) AS BIGINT),
                        CAST(COALESCE(SUM(delivered_bytes), 0) AS BIGINT)
                 FROM serve_compression_stats WHERE member = $1 GROUP BY tool, status ORDER BY tool, status",
                &[t(member)],
            )?
            .iter()
            .map(|r| PassStats {
                tool: r[0].text(),
                status: r[1].text(),
                passes: r[2].int() as u64,
                eligible_bytes: r[3].int() as u64,
                delivered_bytes: r[4].int() as u64,
            })
            .collect())
    }
}

/// A member's recorded passes of one tool and status, summed.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PassStats {
    /// `promptTrim` or `toolResult`.
    pub tool: String,
    /// `applied`, `bypassed` or `failed`.
    pub status: String,
    /// How many passes.
    pub passes: u64,
    /// Bytes they were offered.
    pub eligible_bytes: u64,
    /// Bytes they delivered.
    pub delivered_bytes: u64,
}

fn encode_preferences(p: &Preferences) -> Result<String> {
    serde_json::to_string(p).map_err(|e| HostError::Storage(e.to_string()))
}

fn decode_preferences(s: &str) -> Result<Preferences> {
    serde_json::from_str(s)
        .map_err(|e| HostError::Storage(format!("stored compression preferences: {e}")))
}

fn sqlite_param(v: &Val) -> Box<dyn rusqlite::ToSql> {
    match v {
        Val::Text(s) => Box::new(s.clone()),
        Val::Int(i) => Box::new(*i),
    }
}

/// Run `f` on a pooled Postgres connection with `params` bound.
#[cfg(feature = "postgres")]
fn with_pg<T>(
    pool: &PgPool,
    params: &[Val],
    f: impl FnOnce(
        &mut crate::journal::pg_pool::Conn,
        &[&(dyn postgres::types::ToSql + Sync)],
    ) -> Result<T>,
) -> Result<T> {
    let mut c = pool.get().map_err(crate::journal::pg_pool::pool_error)?;
    let owned: Vec<Box<dyn postgres::types::ToSql + Sync>> = params
        .iter()
        .map(|v| -> Box<dyn postgres::types::ToSql + Sync> {
            match v {
                Val::Text(s) => Box::new(s.clone()),
                Val::Int(i) => Box::new(*i),
            }
        })
        .collect();
    let refs: Vec<&(dyn postgres::types::ToSql + Sync)> =
        owned.iter().map(|b| b.as_ref()).collect();
    f(&mut c, &refs)
}

fn pointer(r: &[Val]) -> TaskPointer {
    TaskPointer {
        conversation: r[0].text(),
        task: r[1].text(),
        member: r[2].text(),
        requested_seq: r[3].int() as u64,
        state: r[4].text(),
    }
}
