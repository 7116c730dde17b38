//! The pool of PostgreSQL connections the journal and the server share.
//!
//! `r2d2_postgres` checks every connection on checkout with an empty query:
//! one more round trip before each statement, which doubled what a message
//! costs on Postgres (`journal_bench`). Here a connection is checked on
//! checkout only when it was last handed out more than [`RECHECK_AFTER`]
//! ago — a connection that sat in the pool for a while (a server restart or
//! an administrator's kill may have ended it) is still checked and replaced
//! before any statement meets it; one in steady use is not. A connection
//! found closed when it comes back is dropped, as before (`has_broken`).

use std::time::{Duration, Instant};

use postgres::{Client, NoTls};
use r2d2_postgres::PostgresConnectionManager;

/// How long a connection may rest in the pool before its next checkout
/// checks it with an empty query.
pub const RECHECK_AFTER: Duration = Duration::from_secs(1);

/// A pool of connections to one database.
pub type PgPool = r2d2::Pool<Manager>;

/// A pooled connection: the client and when it was last handed out.
pub struct Conn {
    client: Client,
    handed_out: Instant,
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

    fn connect(&self) -> Result<Conn, postgres::Error> {
        Ok(Conn {
            client: self.0.connect()?,
            handed_out: Instant::now(),
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
