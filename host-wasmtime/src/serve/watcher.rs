//! Writes by other processes, told to the requests waiting here. A
//! process's own writes wake their conversation's long polls at once
//! (`wakes.rs`); another replica's, or `foldline import`'s, reach them
//! through one thread per server that follows the journal's
//! [`Watch`] and wakes the conversations it names — so a long poll reads
//! its conversation when it was written, never while it waits idle (300
//! idle chat pages cost 1,200 reads a second when each read again every
//! 250 ms). While the journal cannot be watched (it keeps no watch, or the
//! watch was lost and is being opened again) the thread wakes every
//! waiting request each poll interval instead, and each reads again.

use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

use super::state::App;
use super::wakes::Wakes;
use crate::journal::{Journal as _, Watch, Written};

/// How long after a watch could not be opened the server tries again
/// (right away once one was lost: a database restart is over by then, or
/// the next try waits this long).
const REOPEN_AFTER: Duration = Duration::from_secs(5);

/// Start following `app`'s journal; the thread ends when the server stops
/// or is dropped.
pub fn start(app: &Arc<App>) {
    let follower = Follower {
        app: Arc::downgrade(app),
        wakes: app.wakes.clone(),
        stopping: app.stopping.clone(),
        poll: app.config.poll,
    };
    if let Err(e) = std::thread::Builder::new()
        .name("foldline-watch".into())
        .spawn(move || follower.run())
    {
        // Without the thread, waiting requests would miss other
        // processes' writes until their wait is up: say so.
        eprintln!("foldline serve: cannot follow the journal's writes: {e}");
    }
}

struct Follower {
    app: Weak<App>,
    wakes: Wakes,
    stopping: CancellationToken,
    poll: Duration,
}

impl Follower {
    fn run(&self) {
        // `false` once the journal said it keeps no watch.
        let mut watchable = true;
        let mut watch: Option<Box<dyn Watch>> = None;
        // When to try opening a watch again, and the failure last said (a
        // failure is said when it changes, not every try).
        let (mut open_at, mut said) = (Instant::now(), None::<String>);
        while !self.stopping.is_cancelled() {
            if watch.is_none() && watchable && Instant::now() >= open_at {
                let Some(app) = self.app.upgrade() else {
                    return;
                };
                match app.driver.journal().watch() {
                    Ok(w) => {
                        if said.take().is_some() {
                            eprintln!("foldline serve: watching the journal again");
                        }
                        (watchable, watch) = (w.is_some(), w);
                    }
                    Err(e) => {
                        let e = e.to_string();
                        if said.as_ref() != Some(&e) {
                            eprintln!("foldline serve: cannot watch the journal ({e}); every waiting request reads again each {} ms until it can", self.poll.as_millis());
                        }
                        (said, open_at) = (Some(e), Instant::now() + REOPEN_AFTER);
                    }
                }
                // Whatever was written while nothing watched.
                self.wakes.wrote_all();
            }
            match watch.as_mut().map(|w| w.next(self.poll)) {
                Some(Ok(Written::These(conversations))) => {
                    for c in &conversations {
                        self.wakes.wrote(c);
                    }
                }
                Some(Ok(Written::Unknown)) => self.wakes.wrote_all(),
                Some(Err(e)) => {
                    let e = e.to_string();
                    eprintln!(
                        "foldline serve: the journal's watch was lost ({e}); opening another"
                    );
                    (watch, said) = (None, Some(e));
                    self.wakes.wrote_all();
                }
                None => {
                    std::thread::sleep(self.poll);
                    self.wakes.wrote_all();
                }
            }
            if self.app.strong_count() == 0 {
                return;
            }
        }
    }
}
