//! The server's shared state: the driver, the ownership store, and what is
//! in flight (append positions, compaction checks, answers, rate windows).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::http::StatusCode;
use foldline_core::event::Event;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::drawn::Drawn;
use super::reply::ApiError;
use super::store::Store;
use super::wakes::Wakes;
use super::{ServeConfig, ServeDriver};
use crate::driver::{Appended, Outcome};
use crate::error::{HostError, Result};
use crate::journal::Journal;
use crate::kept::Kept;
use crate::keys::{self, Batch, Keys};
use crate::sync::lock;

/// Where a conversation's journal and turn numbering stand.
#[derive(Default)]
pub struct Position {
    /// Journal position read to.
    pub seq: u64,
    /// Highest source sequence of a turn.
    pub source_seq: u64,
    /// The idempotency keys of the latest keyed appends, read back from
    /// the journal.
    keys: Keys,
}

impl Position {
    /// What an append of `events` under `key` wrote before, as this
    /// position has read the journal (with `prompt`, also when written
    /// without the request's system prompt it opens with).
    ///
    /// # Errors
    /// `idempotency_key_reused` when the key was written with other messages.
    fn replay(
        &self,
        key: &str,
        events: &[Event],
        prompt: bool,
    ) -> std::result::Result<Option<Appended>, ApiError> {
        let batch = Batch::of(events);
        let written = match self.keys.written(key, &batch) {
            Err(_) if prompt => self.keys.written(key, &batch.without_prompt()),
            found => found,
        };
        let done = written.map_err(|_| {
            ApiError::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                "idempotency_key_reused",
                "this Idempotency-Key was used for other messages",
            )
        })?;
        Ok(done.map(|done| Appended {
            seq: done.seq,
            count: done.hashes.len(),
            replayed: true,
        }))
    }

    /// Take in one stored event: the numbering, and a keyed message's key.
    fn read(&mut self, seq: u64, event: &Event) {
        self.seq = seq;
        if let Some(turn) = event.turn_seq() {
            self.source_seq = self.source_seq.max(turn);
        }
        self.keys.read(seq, event);
    }
}

/// Shared by every request.
pub struct App {
    pub driver: ServeDriver,
    pub store: Store,
    pub config: ServeConfig,
    /// Per conversation: appends are numbered one at a time. At most
    /// `CONVERSATIONS_KEPT` of them: one let go (never while an append uses
    /// it) is read back from the journal, its idempotency keys with it.
    positions: Mutex<Kept<Arc<Mutex<Position>>>>,
    /// Conversations with a compaction check running; `true`: another is due.
    checks: Mutex<BTreeMap<String, bool>>,
    /// Conversations whose compaction check ran over its memory bound, and
    /// until when their checks wait ([`MEMORY_PAUSE`]).
    paused: Mutex<BTreeMap<String, Instant>>,
    /// Who may call: the config's members, until [`App::set_members`].
    members: std::sync::RwLock<super::Members>,
    /// Running background work (compaction checks, manual tasks).
    pub tracker: TaskTracker,
    /// Turns of the automatic compaction checks ([`ServeConfig::compactions`]
    /// at once).
    compactions: Arc<tokio::sync::Semaphore>,
    /// Cancelled when the server stops accepting requests.
    pub stopping: CancellationToken,
    /// The long polls and task streams waiting on each conversation, woken
    /// by this process's writes to it.
    pub wakes: Wakes,
    /// The timeline pages drawn last, shared by the requests that follow them.
    pub drawn: Drawn,
    /// The answers to pages of other origins, when some may call.
    pub cors: Option<tower_http::cors::CorsLayer>,
}

impl App {
    pub fn open(mut driver: ServeDriver, config: ServeConfig) -> Result<App> {
        driver.holder = format!("serve:{}", config.replica);
        driver.owner = None;
        // Plans keep room for the fragments the members' contexts carry.
        driver.compression = config.compression;
        let cors = super::cors::layer(&config.allow_origins)?;
        let store = Store::open(&config.journal)?;
        let turns = config.compactions.max(1);
        let members = std::sync::RwLock::new(config.members.clone());
        Ok(App {
            members,
            driver,
            store,
            config,
            positions: Mutex::default(),
            checks: Mutex::default(),
            paused: Mutex::default(),
            tracker: TaskTracker::new(),
            compactions: Arc::new(tokio::sync::Semaphore::new(turns)),
            stopping: CancellationToken::new(),
            wakes: Wakes::default(),
            drawn: Drawn::default(),
            cors,
        })
    }

    /// The member a bearer token belongs to.
    pub fn authenticate(&self, token: &str) -> Option<String> {
        let members = self.members.read().unwrap_or_else(|e| e.into_inner());
        members.authenticate(token).map(str::to_owned)
    }

    /// Whether `id` is a member of this server now.
    pub fn is_member(&self, id: &str) -> bool {
        let members = self.members.read().unwrap_or_else(|e| e.into_inner());
        members.contains(id)
    }

    /// Replace the members ([`super::Server::set_members`]).
    pub fn set_members(&self, members: super::Members) {
        *self.members.write().unwrap_or_else(|e| e.into_inner()) = members;
    }

    /// Wake the event streams of `conversation`.
    pub fn wrote(&self, conversation: &str) {
        self.wakes.wrote(conversation);
    }

    /// A task or answer id unique across replicas: 122 random bits (a UUID
    /// v4 from the operating system's generator), never a clock or counter
    /// that two processes could share.
    pub fn next_id(&self, prefix: &str) -> String {
        format!("{prefix}-{}", uuid::Uuid::new_v4().simple())
    }

    /// End the tasks a previous run of this server left open (it stopped
    /// between `requested` and the end): each gets a durable `failed` event.
    pub fn recover(&self) {
        let open = match self.store.open_tasks() {
            Ok(t) => t,
            Err(e) => {
                eprintln!("foldline serve: cannot list open tasks: {e}");
                return;
            }
        };
        for t in open {
            match self.driver.end_interrupted(&t.conversation) {
                Ok(true) => {
                    let _ = self.store.set_task(&t.conversation, &t.task, "done", None);
                }
                Ok(false) => eprintln!(
                    "foldline serve: task {} of {} is held by another writer; left to it",
                    t.task, t.conversation
                ),
                Err(e) => eprintln!(
                    "foldline serve: cannot end task {} of {}: {e}",
                    t.task, t.conversation
                ),
            }
        }
    }

    /// Append `events` made by `make(source_seq_before)`, numbered after the
    /// conversation's last turn; compare-and-append, so another process's
    /// appends only renumber this batch.
    ///
    /// With an idempotency `key`, the key is written with the batch (each
    /// message's turn id ends `@<key>`), in the same atomic append: a retry
    /// finds it — also one made to another replica, which the
    /// compare-and-append makes read it first — and writes nothing again
    /// (`replayed`); the same key with other messages is
    /// `idempotency_key_reused`.
    ///
    /// With `prompt`, the batch opens with a request's system prompt, which
    /// joins the conversation's system text once: when a system turn of
    /// its content is there already (a client posting each turn in a
    /// request's shape), `make(_, true)` leaves it out (a retry under a key
    /// is recognized either way).
    ///
    /// # Errors
    /// The journal's, `make`'s, or `idempotency_key_reused`.
    pub fn append(
        &self,
        conversation: &str,
        key: Option<&str>,
        prompt: bool,
        make: impl Fn(u64, bool) -> Result<Vec<Event>>,
    ) -> std::result::Result<Appended, ApiError> {
        let pos = lock(&self.positions)
            .entry(conversation, |p| Arc::strong_count(p) > 1)
            .0
            .clone();
        let mut pos = lock(&pos);
        loop {
            for s in self.driver.journal().read_events(conversation, pos.seq)? {
                pos.read(s.seq, &s.event);
            }
            let mut events = make(pos.source_seq, false)?;
            if let Some(done) = key
                .map(|k| pos.replay(k, &events, prompt))
                .transpose()?
                .flatten()
            {
                return Ok(done);
            }
            if prompt && self.driver.holds_system_turn(conversation, &events[0])? {
                events = make(pos.source_seq, true)?;
            }
            if events.is_empty() {
                // Nothing new: the request's system prompt alone, written before.
                return Ok(Appended {
                    seq: pos.seq,
                    count: 0,
                    replayed: false,
                });
            }
            // A pinned turn is checked beside the conversation's pinned
            // turns: never folded, together they must leave a context room.
            if events.iter().any(Event::is_pinned) {
                self.driver.check_events(conversation, &events)?;
            } else {
                // The newest turn must fit a context whole beside the pinned turns.
                self.driver.check_newest(conversation, &events)?;
            }
            if let Some(key) = key {
                // Each keyed message carries its content hash, as the
                // journal stores it: what a retry is compared against.
                let batch = Batch::of(&events);
                keys::stamp(&mut events, key, &batch.hashes);
            }
            match self
                .driver
                .journal()
                .append_at(conversation, &events, pos.seq, None)
            {
                Ok(seq) => {
                    // What was written is known: taken in here (its
                    // numbering, its key), so the next append reads only
                    // what others wrote since, not this batch back.
                    let count = events.len();
                    let first = (seq + 1).saturating_sub(count as u64);
                    for (at, e) in (first..).zip(&events) {
                        pos.read(at, e);
                    }
                    return Ok(Appended {
                        seq,
                        count,
                        replayed: false,
                    });
                }
                Err(HostError::Conflict { .. }) => continue,
                Err(e) => return Err(e.into()),
            }
        }
    }

    /// Run the automatic compaction check of `conversation` in the
    /// background; checks of one conversation never overlap, and one that
    /// arrives while a check runs makes it run once more.
    pub fn schedule(self: &Arc<Self>, conversation: &str) {
        {
            let mut paused = lock(&self.paused);
            match paused.get(conversation) {
                Some(until) if Instant::now() < *until => return,
                Some(_) => {
                    paused.remove(conversation);
                }
                None => {}
            }
        }
        {
            let mut checks = lock(&self.checks);
            if let Some(again) = checks.get_mut(conversation) {
                *again = true;
                return;
            }
            checks.insert(conversation.to_owned(), false);
        }
        let app = self.clone();
        let conversation = conversation.to_owned();
        let turns = self.compactions.clone();
        let stopping = self.stopping.clone();
        // A check waits for its turn without a thread; a server that stops
        // meanwhile lets it go (the next message checks again).
        self.tracker.spawn(async move {
            let turn = tokio::select! {
                t = turns.acquire_owned() => t.ok(),
                () = stopping.cancelled() => None,
            };
            let Some(_turn) = turn else {
                lock(&app.checks).remove(&conversation);
                return;
            };
            let _ = tokio::task::spawn_blocking(move || app.check_until_done(&conversation)).await;
        });
    }

    /// Run `conversation`'s compaction check, again while another is asked
    /// for meanwhile.
    fn check_until_done(&self, conversation: &str) {
        loop {
            match self.driver.on_message(conversation) {
                Ok(Outcome::Compacted(_)) | Ok(Outcome::Failed(_)) => self.wrote(conversation),
                Ok(Outcome::Warm(_)) => {
                    if let Err(e) = self.driver.prepare_warm(conversation) {
                        eprintln!("foldline serve: warm candidate of {conversation}: {e}");
                    }
                }
                Ok(_) => {}
                Err(e) => {
                    eprintln!("foldline serve: compaction check of {conversation}: {e}");
                    if let HostError::MemoryLimit(bytes) = e {
                        eprintln!("{}", memory_hint(conversation, bytes));
                        let until = Instant::now() + MEMORY_PAUSE;
                        lock(&self.paused).insert(conversation.to_owned(), until);
                    }
                }
            }
            // Checked again if asked meanwhile, unless its checks wait.
            let waits = lock(&self.paused).contains_key(conversation);
            let mut checks = lock(&self.checks);
            if checks.get(conversation) == Some(&true) && !waits {
                checks.insert(conversation.to_owned(), false);
                continue;
            }
            checks.remove(conversation);
            break;
        }
    }

    /// Whether an answer holds the session now (on any replica).
    pub fn answering(&self, conversation: &str) -> Result<bool> {
        Ok(self
            .store
            .answer(conversation, (self.driver.clock)())?
            .is_some())
    }

    /// Count a condense request of `member` against the per-minute limit,
    /// in the store every replica shares.
    pub fn take_condense(&self, member: &str) -> std::result::Result<(), ApiError> {
        let per_minute = self.config.condense_per_minute;
        let Some(wait) = self
            .store
            .take_condense(member, (self.driver.clock)(), per_minute)?
        else {
            return Ok(());
        };
        let mut e = ApiError::new(
            StatusCode::TOO_MANY_REQUESTS,
            "rate_limited",
            format!("at most {per_minute} manual compactions per minute; try again in {wait} s"),
        );
        e.retry_after = Some(wait);
        Err(e)
    }
}

/// How long the compaction checks of a conversation wait after one ran
/// over its memory bound: what a check takes of it whole (the oldest turns
/// one fold may take, the newest) only changes when it is folded, so every
/// message's check would fail the same way until the operator's `compact`
/// with more memory folds it; then the first message after the pause
/// checks again.
const MEMORY_PAUSE: Duration = Duration::from_secs(300);

/// What an operator can do about a compaction check over its memory limit:
/// the check takes the oldest turns one fold may take and the newest with
/// their content (the others as their sizes), so turns as long as they are
/// many are folded once with more memory.
fn memory_hint(conversation: &str, bytes: usize) -> String {
    let more = HostError::more_memory_mib(bytes);
    format!(
        "foldline serve: what a compaction check takes of {conversation} (the oldest turns one fold may take and the newest, with their content) is more than {} MiB of memory can hold; fold it once with `foldline --journal <this journal> --conversation {conversation} --memory-mib {more} compact` (or serve with --memory-mib {more}); its checks wait {} s meanwhile",
        bytes >> 20,
        MEMORY_PAUSE.as_secs()
    )
}
