//! The PostgreSQL journal's [`Watch`]: every append notifies the channel
//! [`CHANNEL`] with its conversation (inside the migration's
//! `foldline_append`, so the notification goes out when, and only if, the
//! append commits, and costs no round trip of its own), and a watch listens
//! on a connection of its own, outside the pool.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use postgres::fallible_iterator::FallibleIterator as _;
use postgres::{Client, NoTls};

use super::watch::{Watch, Written};
use crate::error::{HostError, Result};

/// The channel the appends notify.
pub const CHANNEL: &str = "foldline_events";

/// How long a watch that heard nothing goes before it checks its connection
/// with a round trip: a connection cut without a word (a dropped route, a
/// frozen peer) would otherwise look like a journal nobody writes to.
pub const CHECK_AFTER: Duration = Duration::from_secs(5);

/// The most notifications one call takes: a storm of writes is told over
/// several calls, never held back by one.
const AT_ONCE: usize = 4096;

/// A listening connection.
pub struct PgWatch {
    client: Client,
    heard: Instant,
}

impl PgWatch {
    /// Listen on a new connection made with `config`.
    ///
    /// # Errors
    /// `journal` when the database cannot be reached.
    pub fn open(config: &postgres::Config) -> Result<PgWatch> {
        let mut client = config.connect(NoTls).map_err(lost)?;
        client
            .batch_execute(&format!("LISTEN {CHANNEL}"))
            .map_err(lost)?;
        Ok(PgWatch {
            client,
            heard: Instant::now(),
        })
    }
}

fn lost(e: postgres::Error) -> HostError {
    HostError::Storage(format!("postgres: the journal's watch: {e}"))
}

impl Watch for PgWatch {
    fn next(&mut self, timeout: Duration) -> Result<Written> {
        let mut written = BTreeSet::new();
        let mut somewhere = false;
        let heard = {
            let mut notes = self.client.notifications();
            let first = notes.timeout_iter(timeout).next().map_err(lost)?;
            let mut heard = first.into_iter().collect::<Vec<_>>();
            if !heard.is_empty() {
                // What else came meanwhile, without waiting for more.
                let mut more = notes.iter();
                while heard.len() < AT_ONCE {
                    match more.next().map_err(lost)? {
                        Some(n) => heard.push(n),
                        None => break,
                    }
                }
            }
            heard
        };
        for n in &heard {
            match n.payload() {
                "" => somewhere = true,
                c => {
                    written.insert(c.to_owned());
                }
            }
        }
        if heard.is_empty() {
            if self.heard.elapsed() >= CHECK_AFTER {
                self.client.is_valid(CHECK_AFTER).map_err(lost)?;
                self.heard = Instant::now();
            }
        } else {
            self.heard = Instant::now();
        }
        Ok(if somewhere {
            Written::Unknown
        } else {
            Written::These(written.into_iter().collect())
        })
    }
}
