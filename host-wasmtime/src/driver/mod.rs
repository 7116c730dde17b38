//! The driver: an interpreter of the core's compaction loop (`step`), as
//! the JS package's driver is. On a new message it reads what is new, and
//! carries out each effect the core answers — a compare-and-append at the
//! position it names, storing the packet before any model sees it, a model
//! call (the stream or the one buffered replay) — under the per-conversation
//! writer lease, until the run is done; what is written, where and when is
//! decided in the core (the effect vectors hold it). On a model request, select.
//!
//! One file per job: `read` (what is read and kept between messages),
//! `run` (the loop: one run of `step` and its effects), `lease` (the
//! writer lease of a run, renewed while a model call runs), `warm` (warm
//! candidates); this file holds the driver, its settings and what a caller
//! calls.

use foldline_core::boundary::Boundary;
use foldline_core::declaration::Declaration;
use foldline_core::defaults;
use foldline_core::event::Event;
use foldline_core::format::Format;
use foldline_core::member::seams::MemberInput;
use foldline_core::member::settings::Availability;
use foldline_core::plan::{PlanOutcome, SkipRecord, Trigger};
use foldline_core::resolve::Resolution;
use foldline_core::select::Selection;
use foldline_core::stream::FailureReport;
use foldline_core::timeline::{Timeline, TimelineRequest};
use foldline_core::turn::{Part, Route};
use foldline_core::validate::{ValidateRequest, ValidateResponse};

use crate::error::{HostError, Result};
use crate::journal::{Journal, StoredEvent};
use crate::model::Model;
use crate::runtime::{encode, Foldline};
use crate::sync::lock;

mod append;
pub use append::Appended;
pub use corrected::Corrected;
mod context;
mod corrected;
mod cycles;
mod kept;
mod lease;
mod newest;
mod outcome;
mod read;
mod run;
mod slim;
mod text;
mod tokens;
pub use tokens::{CountTokens, MESSAGE_OVERHEAD_TOKENS};
mod warm;

/// What one driver pass did.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// Another writer holds the conversation's lease.
    Busy,
    /// Below the trigger.
    Skipped(SkipRecord),
    /// Automatic compaction is paused (disabled, or the circuit breaker is open).
    Paused(PlanOutcome),
    /// Between soft and eager: the id of the warm candidate's packet (none
    /// when warm candidates are off).
    Warm(Option<String>),
    /// A boundary was appended.
    Compacted(Box<Boundary>),
    /// The core refused (fail closed).
    Refused(foldline_core::Error),
    /// The run failed: the generic notice, the audit reason.
    Failed(FailureReport),
}

/// One drawing of a conversation's timeline: its kept text, read to
/// `seq`, and the boundaries the resolution accepted and retired.
struct Drawing<'a> {
    conversation: &'a str,
    kept: &'a text::Text,
    seq: u64,
    accepted: &'a [String],
    retired: &'a [String],
}

/// A manual compaction task (`/compact`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ManualTask {
    /// The task id, unique within the conversation.
    pub id: String,
    /// Who asked.
    pub actor: String,
    /// The conversation's owner (only the owner may compact by hand).
    pub owner: Option<String>,
    /// Whether an answer owns the session now.
    pub session_busy: bool,
}

/// Options of a context request.
#[derive(Debug, Clone, Default)]
pub struct ContextOptions {
    /// Output format.
    pub format: Format,
    /// The current prompt, when not in the journal.
    pub prompt: Option<Vec<Part>>,
    /// Who wrote the prompt, in a shared room: sent with the member's label
    /// once the turns in view and the prompt come from more than one member.
    pub prompt_sender: Option<String>,
    /// Budget override.
    pub limit: Option<u64>,
    /// The member's compression state at the start of this run (see
    /// `foldline_core::member::seams`): capture it once per run.
    pub member: Option<MemberInput>,
}

/// The items of each core call when a whole timeline is drawn (the
/// builder's `timeline_page_items`): a call's memory stays bounded by a
/// page, whatever the conversation's length.
pub use foldline_core::defaults::TIMELINE_PAGE_ITEMS;

/// The driver over a journal and a model.
pub struct Driver<J: Journal, M: Model> {
    /// The loaded core.
    pub(crate) foldline: Foldline,
    /// The journal.
    pub(crate) journal: J,
    /// The model.
    pub(crate) model: M,
    /// The target declaration.
    pub(crate) declaration: Declaration,
    /// The compactor declaration, checked for agreement on every resolve
    /// (default: the target's [`Declaration::reciprocal`]).
    pub(crate) compactor: Option<Declaration>,
    /// Writer-lease holder id.
    pub(crate) holder: String,
    /// Lease time to live.
    pub(crate) lease_ms: u64,
    /// Owner of a conversation, for manual requests.
    pub(crate) owner: Option<String>,
    /// Route of a conversation id.
    pub(crate) route_of: fn(&str) -> Route,
    /// Wall clock in milliseconds (leases only; the core never sees it).
    pub(crate) clock: fn() -> u64,
    /// Warm candidates (seed 002): persist the candidate packet between the
    /// soft and eager thresholds and use its summary, once
    /// [`Driver::prepare_warm`] made one, when compaction is due (default on).
    pub(crate) warm_candidates: bool,
    /// Lease of a warm candidate's preparation (default 900,000 ms).
    pub(crate) warm_lease_ms: u64,
    /// How long a model call keeps the writer lease renewed (default
    /// 120,000 ms). A call can't be interrupted, but past this deadline its
    /// lease is left to lapse: another writer may take the conversation, and
    /// the late call's appends are refused by their stale fence. A model
    /// that hangs cannot hold a conversation forever.
    pub(crate) model_timeout_ms: u64,
    /// Hold each conversation's live events in the core's instance between
    /// calls (`foldline_core::held`, ABI 1.2; default on): a message then
    /// sends `step` and `select` only what is new, not the whole window
    /// again. The answers are the same either way.
    pub(crate) hold_events: bool,
    /// The deployment's member-compression availability (default: none),
    /// passed to every plan: while its surface exists, room is kept for the
    /// largest fragments a member's context carries (the settings
    /// projection, plain-speak), so no member's context leaves out a turn
    /// no summary covers to make room for them.
    pub(crate) compression: Availability,
    /// The host's token counter (default none: the core's estimate).
    pub(crate) count_tokens: Option<CountTokens>,
    /// Framing tokens added to each counted message.
    pub(crate) message_overhead_tokens: u64,
    /// The tokens counted beyond the estimate of summaries in force, by
    /// boundary id (`Driver::uncounted`: a summary is counted once).
    pub(crate) summaries_counted: std::sync::Mutex<std::collections::BTreeMap<String, u64>>,
    /// Conversations a call of this driver is writing to: a second,
    /// overlapping call answers [`Outcome::Busy`] instead of compacting the
    /// same head again.
    running: std::sync::Mutex<std::collections::BTreeSet<String>>,
    /// What this driver has read of each conversation (a bounded number of
    /// them; see [`kept`]).
    cache: std::sync::Mutex<kept::Kept>,
    /// The fencing token of the writer lease each running call holds; every
    /// append of that call is fenced by it.
    fences: std::sync::Mutex<std::collections::BTreeMap<String, u64>>,
    /// Each conversation's events as a timeline request's text, kept
    /// between drawings (bounded; see [`text`]).
    texts: std::sync::Mutex<text::Texts>,
    /// The items of each core call when a whole timeline is drawn.
    timeline_page_items: u64,
}

/// What one run of the loop is for.
struct RunSpec {
    trigger: Trigger,
    /// The manual task's id.
    task: Option<String>,
    /// Who owns the conversation (manual requests are checked against it).
    owner: Option<String>,
    /// Only end interrupted tasks.
    end_interrupted_only: bool,
    /// Only prepare the held warm candidate (nothing written).
    prepare_warm: bool,
}

/// The core answered an effect on a run without one.
fn no_run() -> HostError {
    HostError::MalformedOutput("the core asked for an effect on a run it did not give".into())
}

fn default_route(id: &str) -> Route {
    Route {
        conversation: id.to_owned(),
        chat: String::new(),
        sender: String::new(),
    }
}

/// What plan and select need: pinned turns, turns from the resolution's
/// `keep_from_seq` on (the core's answer: after the head, from the
/// frontier), corrections and failures, so their cost does not grow with
/// the history behind the boundary; and every corrected turn, which resolve
/// is given beside its corrections (`corrected::originals`).
fn after_head(events: Vec<Event>, res: &Resolution) -> Vec<Event> {
    let keep = |seq: u64| seq >= res.keep_from_seq;
    let corrected = corrected::targets(&events);
    events
        .into_iter()
        .filter(|e| match e {
            Event::Message(m) | Event::LateDelivery(m) => {
                m.pinned
                    || m.role.always_pinned()
                    || keep(m.source_seq)
                    || corrected.contains(m.turn_id.as_str())
            }
            Event::TurnMeta(t) => t.pinned || t.role.always_pinned() || keep(t.source_seq),
            Event::Correction(_) | Event::CompactionFailed(_) | Event::CompactionTask(_) => true,
            Event::Boundary(_) | Event::Frontier(_) => false,
        })
        .collect()
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

impl<J: Journal, M: Model> Driver<J, M> {
    /// A driver with default lease, route and clock.
    pub fn new(foldline: Foldline, journal: J, model: M, declaration: Declaration) -> Self {
        let compactor = declaration.reciprocal();
        Driver {
            foldline,
            journal,
            model,
            declaration,
            compactor: Some(compactor),
            // Unique per driver, so two drivers in one process never share
            // a lease.
            holder: format!(
                "host-{}-{}",
                std::process::id(),
                uuid::Uuid::new_v4().simple()
            ),
            lease_ms: defaults::LEASE_MS,
            owner: None,
            route_of: default_route,
            clock: now_ms,
            warm_candidates: true,
            warm_lease_ms: defaults::WARM_LEASE_MS,
            model_timeout_ms: defaults::MODEL_TIMEOUT_MS,
            hold_events: true,
            compression: Availability::default(),
            count_tokens: None,
            message_overhead_tokens: MESSAGE_OVERHEAD_TOKENS,
            summaries_counted: std::sync::Mutex::new(std::collections::BTreeMap::new()),
            running: std::sync::Mutex::new(std::collections::BTreeSet::new()),
            cache: std::sync::Mutex::new(kept::Kept::default()),
            fences: std::sync::Mutex::new(std::collections::BTreeMap::new()),
            texts: std::sync::Mutex::new(text::Texts::default()),
            timeline_page_items: TIMELINE_PAGE_ITEMS,
        }
    }

    /// [`Driver::new`], with the declaration checked now: a rule it breaks is
    /// `invalid_declaration` naming the rule and its numbers, here rather
    /// than on the first message.
    ///
    /// # Errors
    /// `invalid_declaration`.
    pub fn checked(
        foldline: Foldline,
        journal: J,
        model: M,
        declaration: Declaration,
    ) -> Result<Self> {
        let d = Driver::new(foldline, journal, model, declaration);
        d.check_declarations()?;
        Ok(d)
    }

    /// The loaded core this driver calls.
    pub fn foldline(&self) -> &Foldline {
        &self.foldline
    }

    /// The journal this driver reads and appends to.
    pub fn journal(&self) -> &J {
        &self.journal
    }

    /// The model this driver summarizes with.
    pub fn model(&self) -> &M {
        &self.model
    }

    /// The target declaration.
    pub fn declaration(&self) -> &Declaration {
        &self.declaration
    }

    /// The owner of the conversations, for manual requests.
    pub fn owner(&self) -> Option<&str> {
        self.owner.as_deref()
    }

    /// The writer-lease holder id.
    pub fn holder(&self) -> &str {
        &self.holder
    }

    /// The route of a conversation id (see
    /// [`DriverBuilder::route_of`](crate::builder::DriverBuilder::route_of)).
    pub fn route(&self, conversation: &str) -> Route {
        (self.route_of)(conversation)
    }

    /// Whether warm candidates are on, and the lease of their preparation.
    pub fn warm_candidates(&self) -> (bool, u64) {
        (self.warm_candidates, self.warm_lease_ms)
    }

    /// The driver's wall clock now, in milliseconds (the clock given to
    /// [`DriverBuilder::clock`](crate::builder::DriverBuilder::clock)).
    pub fn now_ms(&self) -> u64 {
        (self.clock)()
    }

    /// Check the target declaration now (the rules the core holds every
    /// call to).
    pub(crate) fn check_declarations(&self) -> Result<()> {
        self.validate(ValidateRequest::Events(Box::new(
            foldline_core::validate::EventsCheck {
                route: Route::default(),
                events: Vec::new(),
                declaration: Some(self.declaration.clone()),
                pinned: Vec::new(),
            },
        )))?;
        Ok(())
    }

    fn validate(&self, r: ValidateRequest) -> Result<ValidateResponse> {
        self.foldline.validate(&r)
    }

    /// Resolve the chain (the `verify` of the command-line program).
    ///
    /// # Errors
    /// The chain's failure code, or a host error.
    pub fn resolve(&self, conversation: &str) -> Result<Resolution> {
        let mut r = self.load(conversation)?;
        // Every boundary the chain accepts, not only those from the head on,
        // and every retired one, also those resolved before.
        let cache = lock(&self.cache);
        if let Some(c) = cache.get(conversation) {
            r.accepted.clone_from(&c.verified.accepted);
            r.retired_boundaries = c.verified.retired.iter().cloned().collect();
        }
        Ok(r)
    }

    /// On a new message: compact if the budget says so.
    ///
    /// # Errors
    /// Host failures (journal, runtime); refusals and model failures are outcomes.
    pub fn on_message(&self, conversation: &str) -> Result<Outcome> {
        self.run(conversation, Trigger::Automatic, None, &mut |_| {})
    }

    /// A manual request (`/compact`) by `actor`, against the driver's
    /// [`Driver::owner`].
    ///
    /// # Errors
    /// As [`Driver::on_message`].
    pub fn compact_now(
        &self,
        conversation: &str,
        actor: &str,
        session_busy: bool,
    ) -> Result<Outcome> {
        let task = ManualTask {
            id: format!("task-{}-{}", self.holder, (self.clock)()),
            actor: actor.to_owned(),
            owner: self.owner.clone(),
            session_busy,
        };
        self.compact_task(conversation, &task, &mut |_| {})
    }

    /// A manual task with a caller-chosen id (a server hands the id to the
    /// member before the work ends). `accepted` is called with the journal
    /// position of the task's durable `requested` event once it is written;
    /// a refusal (`not_owner`, `session_busy`, `nothing_to_fold`) returns
    /// [`Outcome::Refused`] without writing anything, and [`Outcome::Busy`]
    /// means another writer holds the conversation.
    ///
    /// # Errors
    /// As [`Driver::on_message`].
    pub fn compact_task(
        &self,
        conversation: &str,
        task: &ManualTask,
        accepted: &mut dyn FnMut(u64),
    ) -> Result<Outcome> {
        let trigger = Trigger::Manual {
            actor: task.actor.clone(),
            session_busy: task.session_busy,
        };
        self.run(
            conversation,
            trigger,
            Some((task.id.clone(), task.owner.clone())),
            accepted,
        )
    }

    /// End the manual tasks of `conversation` whose run was interrupted (a
    /// crash between `requested` and its end) with a durable `failed` event,
    /// under the writer lease; a server calls this for its open tasks when it
    /// starts again. `Ok(false)`: another writer holds the conversation.
    ///
    /// # Errors
    /// Journal and runtime failures.
    pub fn end_interrupted(&self, conversation: &str) -> Result<bool> {
        let _running = match self.enter(conversation) {
            Some(r) => r,
            None => return Ok(false),
        };
        let Some(lease) = self.take_lease(conversation)? else {
            return Ok(false);
        };
        let sweep = RunSpec {
            trigger: Trigger::Automatic,
            task: None,
            owner: self.owner.clone(),
            end_interrupted_only: true,
            prepare_warm: false,
        };
        let result = self.drive(conversation, &sweep, &mut |_| {});
        lease.release()?;
        result.map(|_| true)
    }

    /// Drop what this driver keeps of a conversation — its verified
    /// resolution, the events its core instance holds, a prepared warm
    /// candidate; the next call for it reads the journal again. The driver
    /// lets the least recently used go by itself past
    /// [`DriverBuilder::conversations_kept`](crate::builder::DriverBuilder::conversations_kept);
    /// this lets one go sooner. Nothing in the journal changes.
    ///
    /// # Errors
    /// A trap of the core's instance.
    pub fn forget(&self, conversation: &str) -> Result<()> {
        let gone = lock(&self.cache).remove(conversation);
        match gone {
            Some(mut c) => self.foldline.release(&mut c.holding),
            None => Ok(()),
        }
    }

    /// Conversations this driver keeps state for (at most its
    /// `conversations_kept`; see [`Driver::forget`]).
    pub fn remembered(&self) -> usize {
        lock(&self.cache).len()
    }

    /// The model-bound context.
    ///
    /// # Errors
    /// The core's error, or a host error.
    pub fn context(&self, conversation: &str, o: ContextOptions) -> Result<Selection> {
        self.select_context(conversation, o, true)
    }

    /// [`Driver::on_message`], then [`Driver::context`], from the check's
    /// read of the journal: the context is the journal as the check read it
    /// in this call, so it holds every message appended before the call,
    /// and what the check wrote itself (a boundary, a failure) — a cache read
    /// to a position before a write of this driver's is read again. After a
    /// busy check (another run of this driver on the conversation, which
    /// leaves this call without a read, or another writer's lease) the
    /// context reads. What one message costs
    /// on a journal a round trip away: one read fewer (on PostgreSQL, two
    /// round trips with the append instead of three).
    ///
    /// # Errors
    /// As [`Driver::on_message`] and [`Driver::context`].
    pub fn on_message_and_context(
        &self,
        conversation: &str,
        o: ContextOptions,
    ) -> Result<(Outcome, Selection)> {
        let outcome = self.on_message(conversation)?;
        let read_new = matches!(outcome, Outcome::Busy);
        Ok((outcome, self.select_context(conversation, o, read_new)?))
    }

    /// The chat timeline.
    ///
    /// # Errors
    /// The core's error, or a host error.
    pub fn timeline(&self, conversation: &str) -> Result<Timeline> {
        self.timeline_at(conversation, Page::default())
            .map(|(t, _)| t)
    }

    /// The chat timeline, or one page of it, and the journal position it
    /// was drawn at (what a server's `ETag` names: the same position and
    /// declarations draw the same timeline).
    ///
    /// # Errors
    /// The core's error, or a host error.
    pub fn timeline_at(&self, conversation: &str, page: Page) -> Result<(Timeline, u64)> {
        // Only boundaries the resolved chain accepts draw as completed (and
        // a retired epoch's sound ones, marked retired).
        let (accepted, retired) = match self.resolve(conversation) {
            Ok(r) => (r.accepted, r.retired_boundaries),
            Err(HostError::Core(_)) => (Vec::new(), Vec::new()),
            Err(e) => return Err(e),
        };
        // The conversation as far as the resolution read it (a boundary
        // another writer appends meanwhile draws with the next resolution,
        // not as one it refused), from the text kept since the last drawing
        // and what was written after it.
        let seq = self.with_cache(conversation, |c| c.seq);
        // Taken out while the journal is read: other conversations'
        // drawings do not wait on this one's read.
        let mut kept = lock(&self.texts).take(conversation);
        let read = kept.read_to(seq, |after| self.journal.read_events(conversation, after));
        let drawing = |kept| Drawing {
            conversation,
            kept,
            seq,
            accepted: &accepted,
            retired: &retired,
        };
        let drawn = match (read, page.limit) {
            (Err(e), _) => Err(e),
            (Ok(()), Some(limit)) if limit <= self.timeline_page_items => {
                let request = self.page_request(&drawing(&kept), page);
                lock(&self.texts).put(conversation, kept);
                return Ok((self.draw(&request?)?, seq));
            }
            // Every page at once, or more than one call's page: messages
            // let go are read again, once.
            (Ok(()), _) => kept
                .restore(&mut self.pages_of(conversation))
                .and_then(|()| self.draw_in_pages(&drawing(&kept), page)),
        };
        lock(&self.texts).put(conversation, kept);
        Ok((drawn?, seq))
    }

    /// A reader of `conversation`'s journal in pages.
    fn pages_of<'a>(
        &'a self,
        conversation: &'a str,
    ) -> impl FnMut(u64, usize) -> Result<Vec<StoredEvent>> + 'a {
        move |after, limit| self.journal.read_events_page(conversation, after, limit)
    }

    /// The core's timeline request for `page`, its events written from
    /// the kept text (and, for messages it let go, from the journal).
    fn page_request(&self, d: &Drawing<'_>, page: Page) -> Result<Vec<u8>> {
        let request = encode(&TimelineRequest {
            events: Vec::new(),
            accepted: Some(d.accepted.to_vec()),
            retired: d.retired.to_vec(),
            limit: page.limit,
            before: page.before,
        })?;
        text::with_events(&request, |out| {
            let mut read = self.pages_of(d.conversation);
            d.kept
                .write_page(d.seq, page.limit, page.before, out, &mut read)
        })
    }

    fn draw(&self, request: &[u8]) -> Result<Timeline> {
        Foldline::answer(&self.foldline.call_raw("timeline", request)?)
    }

    /// The latest `page.limit` items below `page.before` (every item
    /// without a limit), drawn in pages of at most `timeline_page_items`
    /// from the latest back: no core call takes the whole conversation (at
    /// 200,000 messages one call needed 2 GiB; a page of a million items
    /// of 60,000 long messages ran out of the call's 512 MiB), and the
    /// pages, each one's `earlier` the next one's `before`, are the items
    /// one page of that limit holds, in order, with its `earlier`.
    fn draw_in_pages(&self, d: &Drawing<'_>, page: Page) -> Result<Timeline> {
        let (mut before, mut left) = (page.before, page.limit);
        let mut pages = Vec::new();
        loop {
            let part = Page {
                limit: Some(left.map_or(self.timeline_page_items, |l| {
                    l.min(self.timeline_page_items)
                })),
                before,
            };
            let t = self.draw(&self.page_request(d, part)?)?;
            let taken = t.items.len() as u64;
            pages.push(t.items);
            left = left.map(|l| l.saturating_sub(taken));
            match t.earlier {
                Some(e) if left != Some(0) && taken > 0 => before = Some(e),
                earlier => {
                    let items = pages.into_iter().rev().flatten().collect();
                    let earlier = earlier.filter(|_| page.limit.is_some());
                    return Ok(Timeline { items, earlier });
                }
            }
        }
    }

    /// Keep at most `bytes` of conversations' events as timeline text
    /// between drawings (the builder's `timeline_text_bytes`).
    pub(crate) fn keep_conversations(&mut self, conversations: usize) {
        self.cache = std::sync::Mutex::new(kept::Kept::within(conversations));
    }

    pub(crate) fn draw_timeline_pages_of(&mut self, items: u64) {
        self.timeline_page_items = items.max(1);
    }

    pub(crate) fn keep_timeline_text(&mut self, bytes: usize) {
        self.texts = std::sync::Mutex::new(text::Texts::within(bytes));
    }

    /// The fingerprints of the declarations this driver draws under, the
    /// target's then the compactor's (if given): what a cached answer was
    /// derived under.
    pub fn fingerprints(&self) -> String {
        let compactor = self.compactor.as_ref().map(Declaration::fingerprint);
        self.declaration.fingerprint() + compactor.as_deref().unwrap_or_default()
    }

    /// The journal position a timeline drawn now would be drawn at (what is
    /// new is read first): a server answers `304` when it is the one its
    /// client's timeline was drawn at, without drawing it again.
    ///
    /// # Errors
    /// A host error (a chain the core refuses still has a position).
    pub fn position(&self, conversation: &str) -> Result<u64> {
        match self.resolve(conversation) {
            Ok(_) | Err(HostError::Core(_)) => Ok(self.with_cache(conversation, |c| c.seq)),
            Err(e) => Err(e),
        }
    }
}

/// Which part of the timeline to draw: the latest `limit` items at
/// positions below `before` (the core's `TimelineRequest` fields); the
/// default is all of it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct Page {
    /// At most this many items, the latest (a position is never split).
    pub limit: Option<u64>,
    /// Only items at positions below this one (a page's `earlier`).
    pub before: Option<u64>,
}
