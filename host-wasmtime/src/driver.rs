//! The driver, the same shape as the JS package's: on a new message resolve →
//! plan → persist the packet → call the model → settle → append the boundary,
//! under the per-conversation writer lease, with the streaming replay rule
//! and the core's circuit breaker; on a model request, select.

use foldline_core::boundary::{Boundary, InputTurn};
use foldline_core::declaration::Declaration;
use foldline_core::event::{Event, FailureEvent, TaskEvent, TaskState};
use foldline_core::format::Format;
use foldline_core::packet::Packet;
use foldline_core::plan::{PlanOutcome, PlanRequest, SkipRecord, Trigger};
use foldline_core::resolve::{self, Resolution, ResolveRequest};
use foldline_core::select::{SelectRequest, Selection};
use foldline_core::settle::{ModelOutput, SettleRequest};
use foldline_core::stream::{
    FailureInput, FailureKind, FailureReport, StreamDecision, StreamEnd, StreamReport,
};
use foldline_core::timeline::{Timeline, TimelineRequest};
use foldline_core::turn::{Part, Route};
use foldline_core::validate::{ValidateRequest, ValidateResponse};

use crate::error::{HostError, Result};
use crate::journal::Journal;
use crate::model::{Model, ModelResult, StreamChunk};
use crate::runtime::Foldline;

/// What one driver pass did.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// Another writer holds the conversation's lease.
    Busy,
    /// Below the trigger.
    Skipped(SkipRecord),
    /// Automatic compaction is paused (disabled, or the circuit breaker is open).
    Paused(PlanOutcome),
    /// A warm candidate is due (between soft and eager).
    Warm(String),
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
            holder: format!("host-{}", std::process::id()),
            lease_ms: 120_000,
            owner: None,
            route_of: default_route,
            clock: now_ms,
            abort_after_packet: false,
            warm_candidates: true,
            warm_lease_ms: 900_000,
            model_timeout_ms: 120_000,
            running: std::sync::Mutex::new(std::collections::BTreeSet::new()),
            cache: std::sync::Mutex::new(std::collections::BTreeMap::new()),
            fences: std::sync::Mutex::new(std::collections::BTreeMap::new()),
        }
    }

    fn validate(&self, r: ValidateRequest) -> Result<ValidateResponse> {
        self.foldline.validate(&r)
    }

    fn load(&self, conversation: &str) -> Result<(Vec<Event>, Resolution)> {
        self.load_at(conversation).map(|(e, r, _)| (e, r))
    }

    /// The events plan and select need, the resolved chain, and the journal
    /// position they were read at (where a batch planned from them goes).
    ///
    /// Incremental: only events after the cached position are read; the
    /// chain is resolved again only when a chain event (frontier, boundary,
    /// correction, late delivery) arrived; turns under the head or before the
    /// frontier are dropped from the cache once the chain says so.
    fn load_at(&self, conversation: &str) -> Result<(Vec<Event>, Resolution, u64)> {
        let mut cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
        let c = cache.entry(conversation.to_owned()).or_default();
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
            *c = Cached {
                under,
                ..Cached::default()
            };
        }
        let fresh = self.journal.read_events(conversation, c.seq)?;
        if let Some(last) = fresh.last() {
            c.seq = last.seq;
        }
        for s in fresh {
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
        Ok((c.recent.clone(), res, c.seq))
    }

    /// Resolve the chain (the `verify` of the command-line program).
    ///
    /// # Errors
    /// The chain's failure code, or a host error.
    pub fn resolve(&self, conversation: &str) -> Result<Resolution> {
        let mut r = self.load(conversation)?.1;
        // Every boundary the chain accepts, not only those from the head on.
        let cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(c) = cache.get(conversation) {
            r.accepted.clone_from(&c.verified.accepted);
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
        if !self.lease(conversation)? {
            return Ok(false);
        }
        let result = self.end_interrupted_tasks(conversation);
        self.unlease(conversation)?;
        result.map(|()| true)
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
        if !self.lease(conversation)? {
            return Ok(Outcome::Busy);
        }
        let result = self
            .end_interrupted_tasks(conversation)
            .and_then(|()| self.run_locked(conversation, &trigger, task, accepted));
        self.unlease(conversation)?;
        result
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
            let out = work();
            *stop.0.lock().unwrap_or_else(|p| p.into_inner()) = true;
            stop.1.notify_all();
            out
        })
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
        let result = self.renewing(&key, self.warm_lease_ms, || self.summarize(&packet));
        self.journal.release_lease(&key, &self.holder)?;
        let Ok(answer) = result? else {
            return Ok(false);
        };
        let checked = self.validate(ValidateRequest::Settle(Box::new(SettleRequest {
            packet: packet.clone(),
            output: ModelOutput {
                packet_id: packet.id.clone(),
                run_id: "warm-check".into(),
                model_id: answer.evidence.model_id.clone(),
                usage: answer.evidence.usage,
                finish_reason: answer.evidence.finish_reason.clone(),
                summary: answer.text.clone(),
            },
            expected_run_id: None,
        })));
        if checked.is_err() {
            return Ok(false);
        }
        Ok(self.with_cache(conversation, |c| match &mut c.warm {
            Some((p, slot)) if p.id == packet.id => {
                *slot = Some(answer);
                true
            }
            _ => false,
        }))
    }

    /// A manual task whose holder crashed between `requested` and its end
    /// (the lease has expired, so it is not running) is ended as failed.
    fn end_interrupted_tasks(&self, conversation: &str) -> Result<()> {
        let (events, _, seq) = self.load_at(conversation)?;
        let mut open: std::collections::BTreeMap<String, TaskEvent> = Default::default();
        for e in events {
            if let Event::CompactionTask(t) = e {
                if t.state == TaskState::Requested {
                    open.insert(t.task_id.clone(), t);
                } else {
                    open.remove(&t.task_id);
                }
            }
        }
        if open.is_empty() {
            return Ok(());
        }
        let batch: Vec<Event> = open
            .into_values()
            .map(|t| {
                Event::CompactionTask(TaskEvent {
                    state: TaskState::Failed,
                    ..t
                })
            })
            .collect();
        self.append_after(conversation, &batch, seq).map(|_| ())
    }

    /// Compare-and-append at `seq`, the position the batch was planned from.
    /// When only messages arrived meanwhile the batch still extends the same
    /// head and goes after them; a chain event means another writer moved the
    /// head, and the batch is refused as a fork.
    fn append_after(&self, conversation: &str, batch: &[Event], mut seq: u64) -> Result<u64> {
        loop {
            let fence = self
                .fences
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .get(conversation)
                .copied();
            match self.journal.append_at(conversation, batch, seq, fence) {
                Err(HostError::Conflict { found, .. }) => {
                    let moved = self.journal.read_events(conversation, seq)?;
                    if moved
                        .iter()
                        .any(|s| matches!(s.event, Event::Boundary(_) | Event::Frontier(_)))
                    {
                        return Err(HostError::Core(foldline_core::Error::new(
                            foldline_core::Code::Fork,
                            "another writer extended the chain head first; nothing was written",
                        )));
                    }
                    seq = moved.last().map(|s| s.seq).unwrap_or(found);
                }
                other => return other,
            }
        }
    }

    fn run_locked(
        &self,
        conversation: &str,
        trigger: &Trigger,
        task: Option<(String, Option<String>)>,
        accepted: &mut dyn FnMut(u64),
    ) -> Result<Outcome> {
        let (task, owner) = match task {
            Some((id, owner)) => (Some(id), owner),
            None => (None, self.owner.clone()),
        };
        loop {
            let (events, res, seq) = self.load_at(conversation)?;
            // A warm candidate with a verified summary is offered to plan.
            let warm = self
                .with_cache(conversation, |c| c.warm.clone())
                .filter(|(_, r)| r.is_some());
            let outcome = self.foldline.plan(&PlanRequest {
                declaration: self.declaration.clone(),
                route: (self.route_of)(conversation),
                owner: owner.clone(),
                frontier: res.frontier.clone(),
                head: res.head.clone(),
                amendment: res.amendment.clone(),
                events: events.clone(),
                trigger: trigger.clone(),
                warm: warm.as_ref().map(|(p, _)| p.clone()),
            })?;
            match outcome {
                PlanOutcome::Activate { frontier } => {
                    self.append_after(conversation, &[Event::Frontier(*frontier)], seq)?;
                }
                PlanOutcome::Skip { record } => return Ok(Outcome::Skipped(record)),
                PlanOutcome::Paused { .. } => return Ok(Outcome::Paused(outcome)),
                PlanOutcome::Warm { packet } => {
                    if self.warm_candidates && self.with_cache(conversation, |c| c.warm.is_none()) {
                        // Persisted now; summarized by `prepare_warm`, off the critical path.
                        self.journal.put_packet(conversation, &packet)?;
                        self.with_cache(conversation, |c| c.warm = Some(((*packet).clone(), None)));
                    }
                    return Ok(Outcome::Warm(packet.id));
                }
                PlanOutcome::Refuse { error, .. } => return Ok(Outcome::Refused(error)),
                PlanOutcome::Compact {
                    packet,
                    warm: verdict,
                } => {
                    // One candidate per head: judged now, dropped either way.
                    self.with_cache(conversation, |c| c.warm = None);
                    // The candidate is used when the core finds it still valid.
                    let (packet, prepared) = match (verdict, warm, trigger) {
                        (Some(v), Some((p, Some(r))), Trigger::Automatic)
                            if v.valid && v.packet_id == p.id =>
                        {
                            (p, Some(r))
                        }
                        _ => (*packet, None),
                    };
                    return self.compact(
                        conversation,
                        (&events, &res, seq),
                        packet,
                        trigger,
                        (task, accepted),
                        prepared,
                    );
                }
            }
        }
    }

    fn compact(
        &self,
        conversation: &str,
        (events, res, seq): (&[Event], &Resolution, u64),
        packet: Packet,
        trigger: &Trigger,
        (task, accepted): (Option<String>, &mut dyn FnMut(u64)),
        prepared: Option<ModelResult>,
    ) -> Result<Outcome> {
        // Persist before dispatch: a retry after a crash plans the same packet id.
        self.journal.put_packet(conversation, &packet)?;
        if self.abort_after_packet {
            std::process::abort();
        }
        let head_seq = events
            .iter()
            .filter_map(|e| match e {
                Event::Message(m) | Event::LateDelivery(m) => Some(m.source_seq),
                _ => None,
            })
            .max()
            .unwrap_or(0);
        let attempt = 1 + events
            .iter()
            .filter(|e| matches!(e, Event::CompactionFailed(f) if f.packet_id == packet.id))
            .count();
        let run_id = format!(
            "run:{}:{attempt}",
            packet.id.get(7..23).unwrap_or(&packet.id)
        );
        let actor = match trigger {
            Trigger::Manual { actor, .. } => Some(actor.clone()),
            Trigger::Automatic => None,
        };
        let task_event = |state, boundary_id| {
            Event::CompactionTask(TaskEvent {
                task_id: task.clone().unwrap_or_default(),
                state,
                actor: actor.clone().unwrap_or_default(),
                head_seq,
                boundary_id,
            })
        };
        if task.is_some() && actor.is_some() {
            let at =
                self.append_after(conversation, &[task_event(TaskState::Requested, None)], seq)?;
            accepted(at);
        }
        let summarized = match prepared {
            Some(r) => Ok(r),
            None => self.renewing(conversation, self.lease_ms, || self.summarize(&packet))?,
        };
        let answer = match summarized {
            Ok(a) => a,
            Err(report) => {
                return self.fail(
                    conversation,
                    (&packet, &run_id, seq),
                    res,
                    trigger,
                    head_seq,
                    report,
                    task_event,
                )
            }
        };
        let settled = self.validate(ValidateRequest::Settle(Box::new(SettleRequest {
            packet: packet.clone(),
            output: ModelOutput {
                packet_id: packet.id.clone(),
                run_id: run_id.clone(),
                model_id: answer.evidence.model_id,
                usage: answer.evidence.usage,
                finish_reason: answer.evidence.finish_reason,
                summary: answer.text,
            },
            expected_run_id: Some(run_id.clone()),
        })));
        match settled {
            Ok(ValidateResponse::Settled { boundary }) => {
                let mut batch = vec![Event::Boundary(boundary.clone())];
                if task.is_some() && actor.is_some() {
                    batch.push(task_event(TaskState::Completed, Some(boundary.id.clone())));
                }
                self.append_after(conversation, &batch, seq)?;
                Ok(Outcome::Compacted(boundary))
            }
            Ok(other) => Err(HostError::MalformedOutput(format!(
                "unexpected answer {other:?}"
            ))),
            Err(HostError::Core(e)) => {
                let report = self.classify(FailureKind::UnusableSummary, e.code.as_str())?;
                self.fail(
                    conversation,
                    (&packet, &run_id, seq),
                    res,
                    trigger,
                    head_seq,
                    report,
                    task_event,
                )
            }
            Err(e) => Err(e),
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn fail(
        &self,
        conversation: &str,
        (packet, run_id, seq): (&Packet, &str, u64),
        res: &Resolution,
        trigger: &Trigger,
        head_seq: u64,
        report: FailureReport,
        task_event: impl Fn(TaskState, Option<String>) -> Event,
    ) -> Result<Outcome> {
        // The audit record is committed before the failure unwinds.
        let mut batch = vec![Event::CompactionFailed(FailureEvent {
            run_id: run_id.to_owned(),
            packet_id: packet.id.clone(),
            previous_boundary_id: res.head.as_ref().map(|h| h.boundary_id.clone()),
            trigger: trigger.kind(),
            head_seq,
            reason: report.audit_reason.clone(),
        })];
        if let Trigger::Manual { .. } = trigger {
            batch.push(task_event(TaskState::Failed, None));
        }
        self.append_after(conversation, &batch, seq)?;
        Ok(Outcome::Failed(report))
    }

    fn classify(&self, failure: FailureKind, detail: &str) -> Result<FailureReport> {
        match self.validate(ValidateRequest::Failure(FailureInput {
            failure,
            detail: detail.to_owned(),
        }))? {
            ValidateResponse::Failure(r) => Ok(r),
            other => Err(HostError::MalformedOutput(format!(
                "unexpected answer {other:?}"
            ))),
        }
    }

    /// Stream a summary; provisional text stays here. A stream that ended
    /// before any content is replayed once through the buffered call.
    fn summarize(
        &self,
        packet: &Packet,
    ) -> Result<std::result::Result<ModelResult, FailureReport>> {
        let mut text = String::new();
        let mut done = None;
        let r = self.model.stream(packet, &mut |c| match c {
            StreamChunk::Delta(t) => text.push_str(&t),
            StreamChunk::Done(e) => done = Some(e),
        });
        let ended = match (&r, &done) {
            (Ok(()), Some(_)) => StreamEnd::Complete,
            _ => StreamEnd::Dropped,
        };
        let decision = match self.validate(ValidateRequest::Stream(StreamReport {
            content_received: !text.is_empty(),
            ended,
            replays_used: 0,
        }))? {
            ValidateResponse::Stream { decision } => decision,
            other => {
                return Err(HostError::MalformedOutput(format!(
                    "unexpected answer {other:?}"
                )))
            }
        };
        Ok(match decision {
            StreamDecision::Settle => match done {
                Some(evidence) => Ok(ModelResult { text, evidence }),
                None => Err(self.classify(FailureKind::StreamDropped, "no evidence")?),
            },
            // A typed failure (refusal, timeout, budget stop) is not a dropped
            // connection: replaying it would only fail again.
            StreamDecision::ReplayBuffered => match &r {
                Err(e) if e.kind != FailureKind::Other => Err(self.classify(e.kind, &e.detail)?),
                _ => match self.model.complete(packet) {
                    Ok(r) => Ok(r),
                    Err(e) => Err(self.classify(e.kind, &e.detail)?),
                },
            },
            StreamDecision::Fail { mut failure } => {
                if let Err(e) = r {
                    failure.audit_reason = format!("{}: {e}", failure.audit_reason);
                }
                Err(failure)
            }
        })
    }

    /// The model-bound context.
    ///
    /// # Errors
    /// The core's error, or a host error.
    pub fn context(&self, conversation: &str, o: ContextOptions) -> Result<Selection> {
        let (events, res) = self.load(conversation)?;
        self.foldline.select(&SelectRequest {
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
        })
    }

    /// The chat timeline.
    ///
    /// # Errors
    /// The core's error, or a host error.
    pub fn timeline(&self, conversation: &str) -> Result<Timeline> {
        // Only boundaries the resolved chain accepts draw as completed.
        let accepted = match self.resolve(conversation) {
            Ok(r) => r.accepted,
            Err(HostError::Core(_)) => Vec::new(),
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
        })
    }
}
