//! The PostgreSQL journal's [`Watch`]: every append notifies the channel
//! [`CHANNEL`] with its conversation (the migration's statement trigger on
//! `foldline_events`, so the notification goes out when, and only if, the
//! append commits, costs no round trip of its own, and stays in place when
//! a replica of an older foldline applies its own `foldline_append`), and a
//! watch listens
//! on a connection of its own, outside the pool, named [`APPLICATION`] in
//! `pg_stat_activity`.
//!
//! A watch that stops hearing would look like a journal nobody writes to:
//! its connection cut without a word, or a pooler in transaction mode
//! between it and the database (the `LISTEN` stays on whichever server
//! connection ran it). So when it opens, and after [`CHECK_AFTER`] without
//! a notification, a watch notifies itself on [`PROBE`] and must hear that
//! back within [`PROBE_WAIT`]; if not, it is lost: `foldline serve` opens
//! another and meanwhile has its waiting requests read again each interval.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use postgres::fallible_iterator::FallibleIterator as _;
use postgres::{Client, NoTls};

use super::watch::{Watch, Written};
use crate::error::{HostError, Result};

/// The channel the appends notify.
pub const CHANNEL: &str = "foldline_events";

/// The channel a watch checks itself on (the payload: its backend's id).
pub const PROBE: &str = "foldline_watch_probe";

/// The watch's connection's `application_name`.
pub const APPLICATION: &str = "foldline watch";

/// How long a watch goes without a notification before it checks that it
/// still hears.
pub const CHECK_AFTER: Duration = Duration::from_secs(5);

/// How long a watch waits to hear its own check.
pub const PROBE_WAIT: Duration = Duration::from_secs(2);

/// The most notifications one call takes: a storm of writes is told over
/// several calls, never held back by one.
const AT_ONCE: usize = 4096;

/// A listening connection.
pub struct PgWatch {
    client: Client,
    /// This connection's backend process id, as its checks carry it.
    me: String,
    /// When it last heard anything.
    heard: Instant,
}

/// What one wait heard.
#[derive(Default)]
struct Heard {
    written: BTreeSet<String>,
    somewhere: bool,
    any: bool,
    itself: bool,
}

impl PgWatch {
    /// Listen on a new connection made with `config`, once it heard itself.
    ///
    /// # Errors
    /// `journal` when the database cannot be reached, or the connection
    /// does not hear its own notification.
    pub fn open(config: &postgres::Config) -> Result<PgWatch> {
        let mut config = config.clone();
        config.application_name(APPLICATION);
        let mut client = config.connect(NoTls).map_err(lost)?;
        client
            .batch_execute(&format!("LISTEN {CHANNEL}; LISTEN {PROBE}"))
            .map_err(lost)?;
        let me: String = client
            .query_one("SELECT pg_backend_pid()::text", &[])
            .map_err(lost)?
            .get(0);
        let mut watch = PgWatch {
            client,
            me,
            heard: Instant::now(),
        };
        // What it hears while checking is written after it listened: the
        // server wakes every waiting request once a watch opens anyway.
        watch.check(&mut Heard::default())?;
        Ok(watch)
    }

    /// Wait at most `timeout` for a first notification, then take what
    /// else came meanwhile without waiting.
    fn take(&mut self, timeout: Duration, heard: &mut Heard) -> Result<()> {
        let mut notes = self.client.notifications();
        let Some(first) = notes.timeout_iter(timeout).next().map_err(lost)? else {
            return Ok(());
        };
        let mut more = notes.iter();
        let mut next = Some(first);
        let mut n = 0;
        while let Some(note) = next {
            heard.any = true;
            match (note.channel(), note.payload()) {
                (PROBE, who) => heard.itself |= who == self.me,
                (_, "") => heard.somewhere = true,
                (_, conversation) => {
                    heard.written.insert(conversation.to_owned());
                }
            }
            n += 1;
            next = match n < AT_ONCE {
                true => more.next().map_err(lost)?,
                false => None,
            };
        }
        self.heard = Instant::now();
        Ok(())
    }

    /// Notify itself and hear it back within [`PROBE_WAIT`].
    fn check(&mut self, heard: &mut Heard) -> Result<()> {
        self.client
            .execute("SELECT pg_notify($1, $2)", &[&PROBE, &self.me])
            .map_err(lost)?;
        let until = Instant::now() + PROBE_WAIT;
        while !heard.itself {
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(HostError::Storage(format!(
                    "postgres: the journal's watch did not hear its own notification within {} s (a pooler in transaction mode between foldline and the database keeps LISTEN on another server connection: use session mode)",
                    PROBE_WAIT.as_secs()
                )));
            }
            self.take(left, heard)?;
        }
        self.heard = Instant::now();
        Ok(())
    }
}

fn lost(e: postgres::Error) -> HostError {
    HostError::Storage(format!("postgres: the journal's watch: {e}"))
}

impl Watch for PgWatch {
    fn next(&mut self, timeout: Duration) -> Result<Written> {
        let mut heard = Heard::default();
        self.take(timeout, &mut heard)?;
        if !heard.any && self.heard.elapsed() >= CHECK_AFTER {
            self.check(&mut heard)?;
        }
        Ok(match heard.somewhere {
            true => Written::Unknown,
            false => Written::These(heard.written.into_iter().collect()),
        })
    }
}
