//! The driver: an interpreter of the core's compaction loop (`step`), as
//! the JS package's driver is. On a new message it reads what is new, and
//! carries out each effect the core answers — a compare-and-append at the
//! position it names, storing the packet before any model sees it, a model
//! call (the stream or the one buffered replay) — under the per-conversation
//! writer lease, until the run is done; what is written, where and when is
//! decided in the core (the effect vectors hold it). On a model request, select.

use foldline_core::boundary::{Boundary, InputTurn};
use foldline_core::declaration::Declaration;
use foldline_core::event::Event;
use foldline_core::format::Format;
use foldline_core::member::seams::MemberInput;
use foldline_core::packet::Packet;
use foldline_core::plan::{PlanOutcome, PlanRequest, SkipRecord, Trigger};
use foldline_core::resolve::{self, Resolution, ResolveRequest};
use foldline_core::run::{Effect, EffectResult, Finished, LoopState, Step, StepRequest};
use foldline_core::select::{SelectRequest, Selection};
use foldline_core::settle::{ModelOutput, SettleRequest};
use foldline_core::stream::{FailureInput, FailureKind, FailureReport};
use foldline_core::timeline::{Timeline, TimelineRequest};
use foldline_core::turn::{Part, Route};
use foldline_core::validate::{ValidateRequest, ValidateResponse};

use crate::error::{HostError, Result};
use crate::journal::Journal;
use crate::model::{Evidence, Model, ModelResult, StreamChunk};
use crate::runtime::{encode, Foldline, Holding};

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
    /// Budget override.
    pub limit: Option<u64>,
    /// The member's compression state at the start of this run (see
    /// `foldline_core::member::seams`): capture it once per run.
    pub member: Option<MemberInput>,
}

/// The driver over a journal and a model.
pub struct Driver<J: Journal, M: Model> {
    /// The loaded core.
    pub foldline: Foldline,
    /// The journal.
    pub journal: J,
    /// The model.
    pub model: M,
    /// The target declaration.
    pub declaration: Declaration,
    /// The compactor declaration, checked for agreement on every resolve
    /// (default: the target's [`Declaration::reciprocal`]).
    pub compactor: Option<Declaration>,
    /// Writer-lease holder id.
    pub holder: String,
    /// Lease time to live.
    pub lease_ms: u64,
    /// Owner of a conversation, for manual requests.
    pub owner: Option<String>,
    /// Route of a conversation id.
    pub route_of: fn(&str) -> Route,
    /// Wall clock in milliseconds (leases only; the core never sees it).
    pub clock: fn() -> u64,
    /// Fault injection for crash tests: abort the process right after the
    /// packet is persisted (set from `FOLDLINE_FAULT=abort-after-packet`).
    pub abort_after_packet: bool,
    /// Warm candidates (seed 002): persist the candidate packet between the
    /// soft and eager thresholds and use its summary, once
    /// [`Driver::prepare_warm`] made one, when compaction is due (default on).
    pub warm_candidates: bool,
    /// Lease of a warm candidate's preparation (default 900,000 ms).
    pub warm_lease_ms: u64,
    /// How long a model call keeps the writer lease renewed (default
    /// 120,000 ms). A call can't be interrupted, but past this deadline its
    /// lease is left to lapse: another writer may take the conversation, and
    /// the late call's appends are refused by their stale fence. A model
    /// that hangs cannot hold a conversation forever.
    pub model_timeout_ms: u64,
    /// Hold each conversation's live events in the core's instance between
    /// calls (`foldline_core::held`, ABI 1.2; default on): a message then
    /// sends `step` and `select` only what is new, not the whole window
    /// again. The answers are the same either way.
    pub hold_events: bool,
    /// Conversations a call of this driver is writing to: a second,
    /// overlapping call answers [`Outcome::Busy`] instead of compacting the
    /// same head again.
    running: std::sync::Mutex<std::collections::BTreeSet<String>>,
    /// What this driver has read of each conversation.
    cache: std::sync::Mutex<std::collections::BTreeMap<String, Cached>>,
    /// The fencing token of the writer lease each running call holds; every
    /// append of that call is fenced by it.
    fences: std::sync::Mutex<std::collections::BTreeMap<String, u64>>,
}

/// What a driver keeps of the chain prefix it verified.
#[derive(Default)]
struct Verified {
    /// The head, in full, and its position in the chain.
    head: Option<(Boundary, u64)>,
    /// Every accepted boundary id, oldest first.
    accepted: Vec<String>,
    /// What the prefix holds for each covered turn (a frozen turn, or a
    /// later boundary's absorbed entry): sent for the turns that corrections
    /// and late deliveries touch.
    covered: std::collections::BTreeMap<String, InputTurn>,
}

impl Verified {
    /// The core's request form: the head and the snapshot of the turns `chain` touches.
    fn request(&self, chain: &[Event]) -> Option<resolve::Verified> {
        let (boundary, length) = self.head.clone()?;
        let turns = chain
            .iter()
            .filter_map(|e| match e {
                Event::Correction(c) => self.covered.get(&c.turn_id),
                Event::LateDelivery(m) => self.covered.get(&m.turn_id),
                _ => None,
            })
            .cloned()
            .collect();
        Some(resolve::Verified {
            boundary,
            length,
            turns,
        })
    }

    /// Take in a resolution from this prefix: its new boundaries leave
    /// `chain`, their turns join `covered` and their ids `accepted`.
    fn extend(&mut self, chain: &mut Vec<Event>, r: &Resolution) {
        let new = &r.accepted[usize::from(self.head.is_some()).min(r.accepted.len())..];
        for e in chain.iter() {
            let Event::Boundary(b) = e else { continue };
            if !new.contains(&b.id) {
                continue;
            }
            for t in &b.input.turns {
                self.covered.insert(t.turn_id.clone(), t.clone());
            }
            for a in &b.absorbed {
                let t = InputTurn {
                    turn_id: a.turn_id.clone(),
                    source_seq: a.source_seq,
                    role: a.role,
                    content_hash: a.content_hash.clone(),
                };
                self.covered.insert(a.turn_id.clone(), t);
            }
            if r.head.as_ref().is_some_and(|h| h.boundary_id == b.id) {
                self.head = Some(((**b).clone(), r.head.as_ref().map_or(0, |h| h.length)));
            }
        }
        self.accepted.extend(new.iter().cloned());
        chain.retain(|e| !matches!(e, Event::Boundary(b) if new.contains(&b.id)));
    }
}

/// A driver's state of one conversation between calls.
#[derive(Default)]
struct Cached {
    /// Journal position read to.
    seq: u64,
    /// The largest source sequence read (where [`Driver::append`] numbers on).
    source_seq: u64,
    /// Frontiers, boundaries, corrections, late deliveries: what resolve needs.
    chain: Vec<Event>,
    /// What plan and select need (pinned turns, turns after the head,
    /// corrections, failures, tasks).
    recent: Vec<Event>,
    /// The verified resolution, until a chain event arrives.
    res: Option<Resolution>,
    /// The chain prefix verified so far: resolve starts from its head, so
    /// the prefix's boundaries are neither kept in `chain` nor sent again.
    verified: Verified,
    /// Fingerprints of the declarations `res` was resolved under (the
    /// driver's fields are public; a change re-resolves).
    under: String,
    /// The warm candidate (persisted), and its verified summary once
    /// [`Driver::prepare_warm`] has run.
    warm: Option<(Packet, Option<ModelResult>)>,
    /// What the core's instance holds of `recent`.
    holding: Holding,
}

/// Marks a conversation as running on this driver until dropped (also on a
/// panic), so overlapping calls never both compact one head.
struct Running<'a> {
    set: &'a std::sync::Mutex<std::collections::BTreeSet<String>>,
    conversation: String,
}

impl Drop for Running<'_> {
    fn drop(&mut self) {
        self.set
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&self.conversation);
    }
}

/// The writer lease of a conversation, held from [`Driver::lease`] until
/// released; dropped without release (a panicking model, an early return)
/// it is given back on unwind, so another driver can take the conversation
/// at once instead of waiting out the lease's time to live.
struct Held<'a, J: Journal, M: Model> {
    driver: &'a Driver<J, M>,
    conversation: &'a str,
    released: bool,
}

impl<J: Journal, M: Model> Held<'_, J, M> {
    fn release(mut self) -> Result<()> {
        self.released = true;
        self.driver.unlease(self.conversation)
    }
}

impl<J: Journal, M: Model> Drop for Held<'_, J, M> {
    fn drop(&mut self) {
        if !self.released {
            let _ = self.driver.unlease(self.conversation);
        }
    }
}

/// Sets the renewal thread's stop flag when dropped: when the work ends,
/// also by a panic, so the thread (and the scope that joins it) ends at once.
struct StopOnDrop<'a>(&'a (std::sync::Mutex<bool>, std::sync::Condvar));

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        *self.0 .0.lock().unwrap_or_else(|p| p.into_inner()) = true;
        self.0 .1.notify_all();
    }
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

/// What plan and select need: pinned turns, turns after the covered
/// sequence, corrections and failures, so their cost does not grow with the
/// history behind the boundary.
fn after_head(events: Vec<Event>, res: &Resolution) -> Vec<Event> {
    let covered = res.head.as_ref().map(|h| h.covered_through_seq);
    let start = res.frontier.as_ref().map(|f| f.start_seq);
    let keep = |seq: u64| covered.is_none_or(|c| seq > c) && start.is_none_or(|s| seq >= s);
    events
        .into_iter()
        .filter(|e| match e {
            Event::Message(m) | Event::LateDelivery(m) => {
                m.pinned || m.role.always_pinned() || keep(m.source_seq)
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
            lease_ms: 120_000,
            owner: None,
            route_of: default_route,
            clock: now_ms,
            abort_after_packet: false,
            warm_candidates: true,
            warm_lease_ms: 900_000,
            model_timeout_ms: 120_000,
            hold_events: true,
            running: std::sync::Mutex::new(std::collections::BTreeSet::new()),
            cache: std::sync::Mutex::new(std::collections::BTreeMap::new()),
            fences: std::sync::Mutex::new(std::collections::BTreeMap::new()),
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

    /// Check the target declaration now (the rules the core holds every
    /// call to).
    pub(crate) fn check_declarations(&self) -> Result<()> {
        self.validate(ValidateRequest::Events(Box::new(
            foldline_core::validate::EventsCheck {
                route: Route::default(),
                events: Vec::new(),
                declaration: Some(self.declaration.clone()),
            },
        )))?;
        Ok(())
    }

    fn validate(&self, r: ValidateRequest) -> Result<ValidateResponse> {
        self.foldline.validate(&r)
    }

    fn load(&self, conversation: &str) -> Result<Resolution> {
        let mut cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
        let c = cache.entry(conversation.to_owned()).or_default();
        self.load_into(c, conversation).map(|(r, _)| r)
    }

    /// Read what is new: the resolved chain, and the journal position it
    /// was read at (where a batch planned from it goes); the events plan and
    /// select need stay in the cache (`recent`).
    ///
    /// Incremental: only events after the cached position are read; the
    /// chain is resolved again only when a chain event (frontier, boundary,
    /// correction, late delivery) arrived; turns under the head or before the
    /// frontier are dropped from the cache once the chain says so.
    fn load_into(&self, c: &mut Cached, conversation: &str) -> Result<(Resolution, u64)> {
        let under = format!(
            "{}{}",
            self.declaration.fingerprint(),
            self.compactor
                .as_ref()
                .map(|d| d.fingerprint())
                .unwrap_or_default()
        );
        if c.under != under {
            // Another epoch may need turns this cache already dropped: read again.
            let mut holding = std::mem::take(&mut c.holding);
            holding.rebuilt();
            *c = Cached {
                under,
                holding,
                ..Cached::default()
            };
        }
        let fresh = self.journal.read_events(conversation, c.seq)?;
        if let Some(last) = fresh.last() {
            c.seq = last.seq;
        }
        for s in fresh {
            if let Event::Message(m) | Event::LateDelivery(m) = &s.event {
                c.source_seq = c.source_seq.max(m.source_seq);
            } else if let Event::TurnMeta(t) = &s.event {
                c.source_seq = c.source_seq.max(t.source_seq);
            }
            if matches!(
                s.event,
                Event::Frontier(_)
                    | Event::Boundary(_)
                    | Event::Correction(_)
                    | Event::LateDelivery(_)
            ) {
                c.chain.push(s.event.clone());
                c.res = None;
            }
            if !matches!(s.event, Event::Boundary(_) | Event::Frontier(_)) {
                c.recent.push(s.event);
            }
        }
        let res = match &c.res {
            Some(r) => r.clone(),
            None => {
                // Resolved from the verified head: only boundaries after it
                // are sent (and re-settled), so only their packets are read.
                let mut packets = Vec::new();
                for e in &c.chain {
                    if let Event::Boundary(b) = e {
                        packets.extend(self.journal.get_packet(conversation, &b.packet_id)?);
                    }
                }
                let r = self.validate(ValidateRequest::Resolve(Box::new(ResolveRequest {
                    declaration: self.declaration.clone(),
                    compactor: self.compactor.clone(),
                    route: (self.route_of)(conversation),
                    events: c.chain.clone(),
                    packets,
                    trusted: Vec::new(),
                    verified: c.verified.request(&c.chain),
                })))?;
                let mut r = match r {
                    ValidateResponse::Resolved(res) => *res,
                    other => {
                        return Err(HostError::MalformedOutput(format!(
                            "unexpected answer {other:?}"
                        )))
                    }
                };
                c.recent = after_head(std::mem::take(&mut c.recent), &r);
                c.holding.rebuilt();
                c.verified.extend(&mut c.chain, &r);
                // The cached copy names only the head (`resolve` answers them
                // all): each message clones it, and that must not grow with
                // the chain.
                let older = r.accepted.len().saturating_sub(1);
                r.accepted.drain(..older);
                c.res = Some(r.clone());
                r
            }
        };
        Ok((res, c.seq))
    }

    /// Read what is new, then call `entry` with the request `make` builds
    /// from the conversation's cache, the resolved chain, the position read
    /// at and the live events to send — none when the core's instance holds
    /// them (only what it lacks is sent beside the request), else all. One
    /// read and one call under the cache's lock, so the events the call
    /// plans or selects from are those of the position it names.
    fn read_and_call<Req: serde::Serialize, Resp: serde::de::DeserializeOwned>(
        &self,
        conversation: &str,
        entry: &str,
        make: impl FnOnce(&Cached, Resolution, u64, Vec<Event>) -> Req,
    ) -> Result<Resp> {
        let mut cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
        let c = cache.entry(conversation.to_owned()).or_default();
        let (res, seq) = self.load_into(c, conversation)?;
        if !(self.hold_events && self.foldline.holds_events()) {
            let request = make(c, res, seq, c.recent.clone());
            drop(cache);
            return self.foldline.call(entry, &request);
        }
        let request = make(c, res, seq, Vec::new());
        let out =
            self.foldline
                .call_holding(&mut c.holding, &c.recent, entry, &encode(&request)?)?;
        drop(cache);
        Foldline::answer(&out)
    }

    /// Resolve the chain (the `verify` of the command-line program).
    ///
    /// # Errors
    /// The chain's failure code, or a host error.
    pub fn resolve(&self, conversation: &str) -> Result<Resolution> {
        let mut r = self.load(conversation)?;
        // Every boundary the chain accepts, not only those from the head on.
        let cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(c) = cache.get(conversation) {
            r.accepted.clone_from(&c.verified.accepted);
        }
        Ok(r)
    }

    /// Append OpenAI-style messages (`messages`: one message object or an
    /// array, as the chat completions API takes them; tool calls and tool
    /// results included) to `conversation`, numbered after its last turn,
    /// and answer the last journal position. Each message is checked first
    /// as the servers check theirs: the shapes, the route, and that a
    /// compaction could take it under this driver's declaration
    /// (`turn_too_large` otherwise); nothing is written on a refusal. The
    /// append is compare-and-append at the position read, so a writer
    /// appending meanwhile only renumbers this batch. Then call
    /// [`Driver::on_message`].
    ///
    /// # Errors
    /// `invalid_input` naming the item at fault (or an empty batch), the
    /// append check's codes, `conflicting_turn`, storage failures.
    pub fn append(&self, conversation: &str, messages: &str) -> Result<u64> {
        let text = if messages.trim_start().starts_with('{') {
            format!("[{messages}]")
        } else {
            messages.to_owned()
        };
        let route = (self.route_of)(conversation);
        loop {
            let (after, head) = {
                let mut cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
                let c = cache.entry(conversation.to_owned()).or_default();
                self.load_into(c, conversation)?;
                (c.source_seq, c.seq)
            };
            let events = crate::import::parse_messages(&text, &route, after)?;
            if events.is_empty() {
                return Err(HostError::Input("no messages to append".into()));
            }
            self.validate(ValidateRequest::Events(Box::new(
                foldline_core::validate::EventsCheck {
                    route: route.clone(),
                    events: events.clone(),
                    declaration: Some(self.declaration.clone()),
                },
            )))?;
            match self.journal.append_at(conversation, &events, head, None) {
                Err(HostError::Conflict { .. }) => continue,
                other => return other,
            }
        }
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
        let Some(held) = self.hold(conversation)? else {
            return Ok(false);
        };
        let sweep = RunSpec {
            trigger: Trigger::Automatic,
            task: None,
            owner: self.owner.clone(),
            end_interrupted_only: true,
        };
        let result = self.drive(conversation, &sweep, &mut |_| {});
        held.release()?;
        result.map(|_| true)
    }

    fn enter(&self, conversation: &str) -> Option<Running<'_>> {
        self.running
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(conversation.to_owned())
            .then(|| Running {
                set: &self.running,
                conversation: conversation.to_owned(),
            })
    }

    fn run(
        &self,
        conversation: &str,
        trigger: Trigger,
        task: Option<(String, Option<String>)>,
        accepted: &mut dyn FnMut(u64),
    ) -> Result<Outcome> {
        let Some(_running) = self.enter(conversation) else {
            return Ok(Outcome::Busy);
        };
        let Some(held) = self.hold(conversation)? else {
            return Ok(Outcome::Busy);
        };
        let (task, owner) = match task {
            Some((id, owner)) => (Some(id), owner),
            None => (None, self.owner.clone()),
        };
        let run = RunSpec {
            trigger,
            task,
            owner,
            end_interrupted_only: false,
        };
        let result = self.drive(conversation, &run, accepted);
        held.release()?;
        let finished = result?;
        let drop_warm = |d: &Self| d.with_cache(conversation, |c| c.warm = None);
        Ok(match finished {
            Finished::Skipped { outcome } => match *outcome {
                PlanOutcome::Skip { record } => {
                    // The compactor's progress advances without inference:
                    // a watermark beside the journal, not an event.
                    self.journal.note_skipped(conversation, &record)?;
                    Outcome::Skipped(record)
                }
                other => Outcome::Paused(other),
            },
            Finished::Paused { outcome } => Outcome::Paused(*outcome),
            Finished::Warm { packet, prepare } => {
                let id = match packet {
                    Some(packet) => {
                        let id = Some(packet.id.clone());
                        if prepare {
                            // Persisted; summarized by `prepare_warm`, off the critical path.
                            self.with_cache(conversation, |c| c.warm = Some((*packet, None)));
                        }
                        id
                    }
                    // No new candidate: the one held stands.
                    None => self
                        .with_cache(conversation, |c| c.warm.as_ref().map(|(p, _)| p.id.clone())),
                };
                Outcome::Warm(id)
            }
            Finished::Refused { error } => Outcome::Refused(error),
            Finished::Compacted { boundary } => {
                drop_warm(self);
                Outcome::Compacted(boundary)
            }
            Finished::Failed { report } => {
                drop_warm(self);
                Outcome::Failed(report)
            }
            Finished::Ended => {
                return Err(HostError::MalformedOutput(
                    "a compaction run ended as an interrupted-task sweep".into(),
                ))
            }
        })
    }

    /// The `step` after a fresh read: the core plans from what was read, at
    /// the journal position it was read at; `state` is what the `read`
    /// effect came with (`None` when a run starts).
    fn fresh_step(
        &self,
        conversation: &str,
        run: &RunSpec,
        state: Option<LoopState>,
    ) -> Result<Step> {
        let mut state = state;
        self.read_and_call(conversation, "step", |c, res, seq, events| {
            // A held candidate's packet is offered (copied) only once its
            // summary is prepared; until then the core needs only to know
            // one is held.
            let (held, prepared) = match &c.warm {
                None => (false, None),
                Some((_, None)) => (true, None),
                Some((p, Some(r))) => {
                    let summary = ModelOutput {
                        packet_id: p.id.clone(),
                        run_id: "warm".into(),
                        model_id: r.evidence.model_id.clone(),
                        usage: r.evidence.usage,
                        finish_reason: r.evidence.finish_reason.clone(),
                        summary: r.text.clone(),
                    };
                    (true, Some((p.clone(), summary)))
                }
            };
            let (warm, summary) = prepared.unzip();
            StepRequest {
                trigger: run.trigger.clone(),
                task: run.task.clone(),
                end_interrupted_only: run.end_interrupted_only,
                warm_candidates: self.warm_candidates,
                warm_held: held,
                model_timeout_ms: self.model_timeout_ms,
                view: Some(PlanRequest {
                    declaration: self.declaration.clone(),
                    route: (self.route_of)(conversation),
                    owner: run.owner.clone(),
                    frontier: res.frontier,
                    head: res.head,
                    amendment: res.amendment,
                    events,
                    trigger: run.trigger.clone(),
                    warm,
                    // The core sets it from `warm_held`.
                    warm_held: false,
                    carried: res.carried,
                }),
                warm_summary: summary,
                seq,
                state: state.take(),
                last: None,
            }
        })
    }

    /// Interpret the core's loop (`step`): read, then carry out each effect
    /// it answers — a compare-and-append at the position it names, storing
    /// the packet, a model call — and feed the result back, until the run is
    /// done. What is written, where and when is the core's decision, the
    /// same as in the JS package's driver.
    fn drive(
        &self,
        conversation: &str,
        run: &RunSpec,
        accepted: &mut dyn FnMut(u64),
    ) -> Result<Finished> {
        let next = |state: LoopState, last: EffectResult| StepRequest {
            trigger: run.trigger.clone(),
            task: run.task.clone(),
            end_interrupted_only: run.end_interrupted_only,
            warm_candidates: self.warm_candidates,
            warm_held: false,
            warm_summary: None,
            model_timeout_ms: self.model_timeout_ms,
            view: None,
            seq: 0,
            state: Some(state),
            last: Some(last),
        };
        let mut step = self.fresh_step(conversation, run, None)?;
        loop {
            let Step { state, effect } = step;
            let request = match effect {
                Effect::Done { finished } => return Ok(*finished),
                Effect::Read => {
                    step = self.fresh_step(conversation, run, Some(state))?;
                    continue;
                }
                Effect::Append {
                    expected_seq,
                    accepts_task,
                } => {
                    let last = self.append_at(conversation, &state.batch, expected_seq)?;
                    if let (EffectResult::Appended { seq }, true) = (&last, accepts_task) {
                        accepted(*seq);
                    }
                    next(state, last)
                }
                Effect::PutPacket { candidate } => {
                    let packet = &state.run.as_ref().ok_or_else(no_run)?.packet;
                    // Persisted before any model sees it: a retry after a
                    // crash plans the same packet id.
                    self.journal.put_packet(conversation, packet)?;
                    if self.abort_after_packet && !candidate {
                        std::process::abort();
                    }
                    next(state, EffectResult::Stored)
                }
                Effect::CallModel {
                    buffered,
                    deadline_ms,
                } => {
                    let r = state.run.as_ref().ok_or_else(no_run)?;
                    let last = self.renewing(conversation, self.lease_ms, || {
                        self.call_model(&r.packet, &r.run_id, buffered, deadline_ms)
                    });
                    next(state, last)
                }
            };
            step = self.foldline.step(&request)?;
        }
    }

    /// Compare-and-append `batch` at `seq`, fenced by this call's lease; a
    /// conflict says whether a frontier or boundary arrived meanwhile
    /// (another writer moved the chain head: the core ends the run with
    /// `fork`) or only messages (it appends again after them).
    fn append_at(&self, conversation: &str, batch: &[Event], seq: u64) -> Result<EffectResult> {
        let fence = self
            .fences
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(conversation)
            .copied();
        match self.journal.append_at(conversation, batch, seq, fence) {
            Ok(seq) => Ok(EffectResult::Appended { seq }),
            Err(HostError::Conflict { found, .. }) => {
                let moved = self.journal.read_events(conversation, seq)?;
                Ok(EffectResult::Conflict {
                    seq: moved.last().map_or(found, |s| s.seq),
                    chain_moved: moved
                        .iter()
                        .any(|s| matches!(s.event, Event::Boundary(_) | Event::Frontier(_))),
                })
            }
            Err(e) => Err(e),
        }
    }

    /// One model call: the stream (provisional text stays here) or the
    /// buffered replay. An answer later than `deadline_ms` counts as a
    /// timeout (the call itself cannot be interrupted). The core applies the
    /// streaming rule to what is reported.
    fn call_model(
        &self,
        packet: &Packet,
        run_id: &str,
        buffered: bool,
        deadline_ms: u64,
    ) -> EffectResult {
        let started = std::time::Instant::now();
        let mut text = String::new();
        let mut done = None;
        let answer = if buffered {
            self.model.complete(packet).map(|r| {
                text.clone_from(&r.text);
                done = Some(r.evidence);
            })
        } else {
            self.model.stream(packet, &mut |c| match c {
                StreamChunk::Delta(t) => text.push_str(&t),
                StreamChunk::Done(e) => done = Some(e),
            })
        };
        let late = started.elapsed() > std::time::Duration::from_millis(deadline_ms);
        let error = match (late, answer) {
            (true, _) => Some(FailureInput {
                failure: FailureKind::Timeout,
                detail: format!("no summary within {deadline_ms} ms"),
            }),
            (false, Err(e)) => Some(FailureInput {
                failure: e.kind,
                detail: e.detail,
            }),
            (false, Ok(())) => None,
        };
        let output = match (&error, done) {
            (None, Some(evidence)) => Some(ModelOutput {
                packet_id: packet.id.clone(),
                run_id: run_id.to_owned(),
                model_id: evidence.model_id,
                usage: evidence.usage,
                finish_reason: evidence.finish_reason,
                summary: text.clone(),
            }),
            _ => None,
        };
        EffectResult::Model {
            content_received: !text.is_empty(),
            output,
            error,
        }
    }

    /// Take the conversation's writer lease and keep its fencing token for
    /// this call's appends; false when another writer holds it.
    fn lease(&self, conversation: &str) -> Result<bool> {
        let Some(fence) = self.journal.acquire_lease(
            conversation,
            &self.holder,
            (self.clock)(),
            self.lease_ms,
        )?
        else {
            return Ok(false);
        };
        self.fences
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(conversation.to_owned(), fence);
        Ok(true)
    }

    /// [`Driver::lease`] as a guard that gives the lease back on unwind.
    fn hold<'a>(&'a self, conversation: &'a str) -> Result<Option<Held<'a, J, M>>> {
        Ok(self.lease(conversation)?.then_some(Held {
            driver: self,
            conversation,
            released: false,
        }))
    }

    fn unlease(&self, conversation: &str) -> Result<()> {
        self.fences
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(conversation);
        self.journal.release_lease(conversation, &self.holder)
    }

    /// Run `work` (a model call) while a second thread renews the writer
    /// lease every third of its time to live, so a long call keeps it, until
    /// [`Driver::model_timeout_ms`]; a renewal that finds the lease taken, or
    /// the deadline passed, stops, and the call's appends are then refused by
    /// their stale fence once another writer took the lease.
    fn renewing<T>(&self, key: &str, ttl_ms: u64, work: impl FnOnce() -> T) -> T {
        let stop = (std::sync::Mutex::new(false), std::sync::Condvar::new());
        let every = std::time::Duration::from_millis((ttl_ms / 3).max(1));
        let deadline =
            std::time::Instant::now() + std::time::Duration::from_millis(self.model_timeout_ms);
        let (journal, holder, clock, stop) = (&self.journal, &self.holder, self.clock, &stop);
        std::thread::scope(|s| {
            s.spawn(move || {
                let mut stopped = stop.0.lock().unwrap_or_else(|p| p.into_inner());
                // The flag is checked before every wait: the work may have
                // ended before this thread first took the lock.
                while !*stopped {
                    let (guard, waited) = stop
                        .1
                        .wait_timeout(stopped, every)
                        .unwrap_or_else(|p| p.into_inner());
                    stopped = guard;
                    if *stopped || !waited.timed_out() {
                        continue;
                    }
                    if std::time::Instant::now() >= deadline {
                        return;
                    }
                    match journal.acquire_lease(key, holder, clock(), ttl_ms) {
                        Ok(Some(_)) => {}
                        _ => return,
                    }
                }
            });
            let _stop = StopOnDrop(stop);
            work()
        })
    }

    /// Drop what this driver keeps of a conversation — its verified
    /// resolution, the events its core instance holds, a prepared warm
    /// candidate — so memory stays bounded over many conversations; the next
    /// call for it reads the journal again. A server calls this for idle
    /// conversations. Nothing in the journal changes.
    ///
    /// # Errors
    /// A trap of the core's instance.
    pub fn forget(&self, conversation: &str) -> Result<()> {
        let gone = self
            .cache
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(conversation);
        match gone {
            Some(mut c) => self.foldline.release(&mut c.holding),
            None => Ok(()),
        }
    }

    /// Conversations this driver keeps state for (see [`Driver::forget`]).
    pub fn remembered(&self) -> usize {
        self.cache.lock().unwrap_or_else(|p| p.into_inner()).len()
    }

    fn with_cache<T>(&self, conversation: &str, f: impl FnOnce(&mut Cached) -> T) -> T {
        let mut cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
        f(cache.entry(conversation.to_owned()).or_default())
    }

    /// Prepare the conversation's warm candidate, if one is waiting: summarize
    /// its persisted packet under the candidate's own lease
    /// (`warm_lease_ms`), check the summary with `settle`, and keep it for
    /// the compaction that is due later, which then makes no model call. A
    /// host runs this off the critical path (a server in the background; the
    /// `foldline` program between messages). `Ok(false)`: nothing to prepare.
    ///
    /// # Errors
    /// Journal and runtime failures; a model failure only leaves the
    /// candidate unprepared.
    pub fn prepare_warm(&self, conversation: &str) -> Result<bool> {
        let Some(packet) = self.with_cache(conversation, |c| match &c.warm {
            Some((p, None)) => Some(p.clone()),
            _ => None,
        }) else {
            return Ok(false);
        };
        let key = format!("{conversation}#warm");
        if self
            .journal
            .acquire_lease(&key, &self.holder, (self.clock)(), self.warm_lease_ms)?
            .is_none()
        {
            return Ok(false);
        }
        // Given back also if the model panics.
        struct Warm<'a, J: Journal>(&'a J, &'a str, &'a str);
        impl<J: Journal> Drop for Warm<'_, J> {
            fn drop(&mut self) {
                let _ = self.0.release_lease(self.1, self.2);
            }
        }
        let warm = Warm(&self.journal, &key, &self.holder);
        let answer = self.renewing(&key, self.warm_lease_ms, || {
            let call =
                |buffered| self.call_model(&packet, "warm-check", buffered, self.model_timeout_ms);
            match call(false) {
                // The one buffered replay of a stream that ended before any content.
                EffectResult::Model {
                    content_received: false,
                    output: None,
                    error: None,
                } => call(true),
                other => other,
            }
        });
        std::mem::forget(warm);
        self.journal.release_lease(&key, &self.holder)?;
        let EffectResult::Model {
            output: Some(output),
            ..
        } = answer
        else {
            return Ok(false);
        };
        let checked = self.validate(ValidateRequest::Settle(Box::new(SettleRequest {
            packet: packet.clone(),
            output: output.clone(),
            expected_run_id: None,
        })));
        if checked.is_err() {
            return Ok(false);
        }
        let answer = ModelResult {
            text: output.summary,
            evidence: Evidence {
                model_id: output.model_id,
                usage: output.usage,
                finish_reason: output.finish_reason,
            },
        };
        Ok(self.with_cache(conversation, |c| match &mut c.warm {
            Some((p, slot)) if p.id == packet.id => {
                *slot = Some(answer);
                true
            }
            _ => false,
        }))
    }

    /// The model-bound context.
    ///
    /// # Errors
    /// The core's error, or a host error.
    pub fn context(&self, conversation: &str, o: ContextOptions) -> Result<Selection> {
        self.read_and_call(conversation, "select", |_, res, _, events| SelectRequest {
            declaration: self.declaration.clone(),
            route: (self.route_of)(conversation),
            frontier: res.frontier,
            head: res.head,
            amendment: res.amendment,
            events,
            prompt: o.prompt,
            format: o.format,
            limit: o.limit,
            render: true,
            member: o.member,
            carried: res.carried,
        })
    }

    /// The chat timeline.
    ///
    /// # Errors
    /// The core's error, or a host error.
    pub fn timeline(&self, conversation: &str) -> Result<Timeline> {
        // Only boundaries the resolved chain accepts draw as completed (and
        // a retired epoch's sound ones, marked retired).
        let (accepted, retired) = match self.resolve(conversation) {
            Ok(r) => (r.accepted, r.retired_boundaries),
            Err(HostError::Core(_)) => (Vec::new(), Vec::new()),
            Err(e) => return Err(e),
        };
        let events = self
            .journal
            .read_events(conversation, 0)?
            .into_iter()
            .map(|s| s.event)
            .collect();
        self.foldline.timeline(&TimelineRequest {
            events,
            accepted: Some(accepted),
            retired,
        })
    }
}
