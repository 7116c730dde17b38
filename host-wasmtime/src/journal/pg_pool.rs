//! The pool of PostgreSQL connections the journal and the server share.
//!
//! `r2d2_postgres` checks every connection on checkout with an empty query:
//! one more round trip before each statement (about a fifth of what a
//! message cost on Postgres: BENCHMARKS.md, session 18). Here a connection is checked on
//! checkout only when it was last handed out more than [`RECHECK_AFTER`]
//! ago — a connection that sat in the pool for a while (a server restart or
//! an administrator's kill may have ended it) is still checked and replaced
//! before any statement meets it; one in steady use is not. A connection
//! found closed when it comes back is dropped, as before (`has_broken`).
//!
//! Each connection also keeps the statements prepared on it
//! ([`Conn::statement`]): a statement is parsed and planned by the server
//! once per connection, and each later use is one round trip (Bind,
//! Execute, Sync) — where an unprepared statement text costs a prepare
//! round trip first, and one sent with its types (`query_typed`) is parsed
//! and planned again on every use.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use postgres::{Client, NoTls, Statement};
use r2d2_postgres::PostgresConnectionManager;

/// The session settings of the journal's connections (`postgres.rs`'s
/// `SESSION_OPTIONS`) as the statements each runs when it opens: a pooler
/// in front of the database (PgBouncer) refuses the `options` startup
/// parameter (`unsupported startup parameter: options`), and keeps what a
/// session sets in session mode.
pub const SESSION_SETTINGS: &str =
    "SET lock_timeout = 2000; SET idle_in_transaction_session_timeout = 5000";

/// How long a connection may rest in the pool before its next checkout
/// checks it with an empty query.
pub const RECHECK_AFTER: Duration = Duration::from_secs(1);

/// A pool of connections to one database.
pub type PgPool = r2d2::Pool<Manager>;

/// A connection the pool could not give (none free in time, or none could
/// be opened).
pub fn pool_error(e: r2d2::Error) -> crate::error::HostError {
    crate::error::HostError::Storage(format!("postgres pool: {e}"))
}

/// A pooled connection: the client, when it was last handed out, and the
/// statements prepared on it.
pub struct Conn {
    client: Client,
    handed_out: Instant,
    statements: HashMap<String, Statement>,
}

impl Conn {
    /// `sql` prepared on this connection: the first use prepares it, every
    /// later use reuses it. foldline's statements are a fixed set of texts
    /// (the server's compression statistics insert has one per row count,
    /// up to 100), so what a connection keeps stays small.
    ///
    /// # Errors
    /// The server's refusal of the statement, or a lost connection.
    pub fn statement(&mut self, sql: &str) -> Result<Statement, postgres::Error> {
        if let Some(s) = self.statements.get(sql) {
            return Ok(s.clone());
        }
        let s = self.client.prepare(sql)?;
        self.statements.insert(sql.to_owned(), s.clone());
        Ok(s)
    }

    /// Run `sql`, prepared on this connection, with `params`; its rows.
    ///
    /// # Errors
    /// The server's refusal, or a lost connection.
    pub fn rows(
        &mut self,
        sql: &str,
        params: &[&(dyn postgres::types::ToSql + Sync)],
    ) -> Result<Vec<postgres::Row>, postgres::Error> {
        let statement = self.statement(sql)?;
        self.client.query(&statement, params)
    }
}

impl std::ops::Deref for Conn {
    type Target = Client;
    fn deref(&self) -> &Client {
        &self.client
    }
}

impl std::ops::DerefMut for Conn {
    fn deref_mut(&mut self) -> &mut Client {
        &mut self.client
    }
}

/// `r2d2_postgres`'s manager, with the recent-use rule above.
pub struct Manager(PostgresConnectionManager<NoTls>);

impl Manager {
    /// A manager connecting with `config`.
    pub fn new(config: postgres::Config) -> Manager {
        Manager(PostgresConnectionManager::new(config, NoTls))
    }
}

impl r2d2::ManageConnection for Manager {
    type Connection = Conn;
    type Error = postgres::Error;

    /// A new connection, with the journal's [`SESSION_SETTINGS`].
    fn connect(&self) -> Result<Conn, postgres::Error> {
        let mut client = self.0.connect()?;
        client.batch_execute(SESSION_SETTINGS)?;
        Ok(Conn {
            client,
            handed_out: Instant::now(),
            statements: HashMap::new(),
        })
    }

    /// Called by the pool on checkout; also marks the connection handed out.
    fn is_valid(&self, conn: &mut Conn) -> Result<(), postgres::Error> {
        let rested = conn.handed_out.elapsed();
        conn.handed_out = Instant::now();
        if rested < RECHECK_AFTER {
            return Ok(());
        }
        self.0.is_valid(&mut conn.client)
    }

    fn has_broken(&self, conn: &mut Conn) -> bool {
        self.0.has_broken(&mut conn.client)
    }
}
