//! What a driver reads and keeps between messages: the verified chain head,
//! each conversation's cached window of events (held in the core's instance
//! when `hold_events` is on), and one locked read-and-call so a call sees the
//! events of the position it read.

use foldline_core::boundary::{Boundary, InputTurn};
use foldline_core::event::Event;
use foldline_core::packet::Packet;
use foldline_core::resolve::{self, Resolution, ResolveRequest};
use foldline_core::validate::{ValidateRequest, ValidateResponse};

use super::{after_head, Driver};
use crate::error::{HostError, Result};
use crate::journal::Journal;
use foldline_core::settle::ModelOutput;

use crate::model::Model;
use crate::runtime::{encode, Foldline, Holding};
use crate::sync::lock;

/// Boundaries one resolve settles at most (see [`Driver::resolve_cached`]).
const RESOLVE_STEP: usize = 64;

/// What a driver keeps of the chain prefix it verified.
#[derive(Default)]
pub(super) struct KnownChain {
    /// The head, in full, and its position in the chain.
    pub(super) head: Option<(Boundary, u64)>,
    /// Every accepted boundary id, oldest first.
    pub(super) accepted: Vec<String>,
    /// What the prefix holds for each covered turn (a frozen turn, or a
    /// later boundary's absorbed entry): sent for the turns that corrections
    /// and late deliveries touch.
    pub(super) covered: std::collections::BTreeMap<String, InputTurn>,
    /// Every boundary of a retired epoch resolve listed (ordered by id, as
    /// resolve lists them): their packets are never read again, and once the
    /// current epoch has a head they leave `chain` too (resolve needs them
    /// only to find what an upgrade carries over), so a compaction after an
    /// upgrade costs what one before it did, whatever the length of the
    /// retired chain.
    pub(super) retired: std::collections::BTreeSet<String>,
}

impl KnownChain {
    /// The core's request form: the head and the snapshot of the turns `chain` touches.
    pub(super) fn request(&self, chain: &[Event]) -> Option<resolve::Verified> {
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
    pub(super) fn extend(&mut self, chain: &mut Vec<Event>, r: &Resolution) {
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
        self.retired.extend(r.retired_boundaries.iter().cloned());
        let settled =
            |id: &String| new.contains(id) || (r.head.is_some() && self.retired.contains(id));
        chain.retain(|e| !matches!(e, Event::Boundary(b) if settled(&b.id)));
    }
}

/// A driver's state of one conversation between calls.
#[derive(Default)]
pub(super) struct Cached {
    /// Journal position read to.
    pub(super) seq: u64,
    /// The largest source sequence read (where [`Driver::append`] numbers on).
    pub(super) source_seq: u64,
    /// Frontiers, boundaries, corrections, late deliveries: what resolve needs.
    pub(super) chain: Vec<Event>,
    /// What plan and select need (pinned turns, turns after the head,
    /// corrections, failures, tasks).
    pub(super) recent: Vec<Event>,
    /// The verified resolution, until a chain event arrives.
    pub(super) res: Option<Resolution>,
    /// The chain prefix verified so far: resolve starts from its head, so
    /// the prefix's boundaries are neither kept in `chain` nor sent again.
    pub(super) verified: KnownChain,
    /// Fingerprints of the declarations `res` was resolved under (the
    /// driver's fields are public; a change re-resolves).
    pub(super) under: String,
    /// The warm candidate (persisted), and its verified summary once
    /// [`Driver::prepare_warm`] has run.
    pub(super) warm: Option<(Packet, Option<ModelOutput>)>,
    /// What the core's instance holds of `recent`.
    pub(super) holding: Holding,
    /// The latest journal position this driver wrote: a cache read to an
    /// earlier one is read again before it is used.
    pub(super) written: u64,
    /// The idempotency keys of the latest keyed appends, once a keyed
    /// append asked for them (a driver that makes none keeps none).
    pub(super) keys: Option<crate::keys::Keys>,
    /// Turns a correction touched that the journal was read for, once
    /// (`corrected::originals`).
    pub(super) looked_up: std::collections::BTreeSet<String>,
}

impl Cached {
    /// Take in what was read since `seq`: the newest positions, the chain
    /// events (the resolution is then stale) and the live window.
    pub(super) fn take_in(&mut self, fresh: Vec<crate::journal::StoredEvent>) {
        if let Some(last) = fresh.last() {
            self.seq = last.seq;
        }
        for s in fresh {
            if let Some(turn) = s.event.turn_seq() {
                self.source_seq = self.source_seq.max(turn);
            }
            if let Some(keys) = &mut self.keys {
                keys.read(s.seq, &s.event);
            }
            if matches!(
                s.event,
                Event::Frontier(_)
                    | Event::Boundary(_)
                    | Event::Correction(_)
                    | Event::LateDelivery(_)
            ) {
                self.chain.push(s.event.clone());
                self.res = None;
            }
            if !matches!(s.event, Event::Boundary(_) | Event::Frontier(_)) {
                self.recent.push(s.event);
            }
        }
    }
}

impl<J: Journal, M: Model> Driver<J, M> {
    pub(super) fn load(&self, conversation: &str) -> Result<Resolution> {
        let mut cache = lock(&self.cache);
        let c = self.kept(&mut cache, conversation);
        self.load_into(c, conversation, true).map(|(r, _)| r)
    }

    /// Read what is new: the resolved chain, and the journal position it
    /// was read at (where a batch planned from it goes); the events plan and
    /// select need stay in the cache (`recent`).
    ///
    /// Incremental: only events after the cached position are read; the
    /// chain is resolved again only when a chain event (frontier, boundary,
    /// correction, late delivery) arrived; turns under the head or before the
    /// frontier are dropped from the cache once the chain says so.
    /// `read_new: false` takes the cache as the last read left it (a read
    /// made earlier in the same operation), unless it must be read again:
    /// another declaration, or a write of this driver's after that read.
    pub(super) fn load_into(
        &self,
        c: &mut Cached,
        conversation: &str,
        mut read_new: bool,
    ) -> Result<(Resolution, u64)> {
        let under = self.fingerprints();
        if c.under != under {
            // Another epoch may need turns this cache already dropped: read again.
            let mut holding = std::mem::take(&mut c.holding);
            holding.rebuilt();
            *c = Cached {
                under,
                holding,
                ..Cached::default()
            };
            read_new = true;
        }
        if read_new || c.seq < c.written {
            let fresh = self.journal.read_events(conversation, c.seq)?;
            c.take_in(fresh);
        }
        let res = match &c.res {
            Some(r) => r.clone(),
            None => {
                self.read_originals(c, conversation, None)?;
                self.resolve_cached(c, conversation)?
            }
        };
        Ok((res, c.seq))
    }

    /// Resolve the chain from the verified head: only boundaries after it
    /// are sent (and re-settled), so only their packets are read. The
    /// resolution is kept in `c`, naming only its head.
    ///
    /// A chain with more than [`RESOLVE_STEP`] boundaries to settle (a cold
    /// read of a long conversation) is resolved in steps, each from the
    /// head the last one verified, as a driver that had read it as it grew
    /// would have: what one resolve holds at once (the packets, the
    /// request, the core's memory) does not grow with the chain.
    pub(super) fn resolve_cached(&self, c: &mut Cached, conversation: &str) -> Result<Resolution> {
        let mut pending: std::collections::VecDeque<Event> = std::mem::take(&mut c.chain).into();
        // Boundaries a step found retired wait beside the later steps (no
        // step settles them) and rejoin the last, whose answer alone needs
        // them (what an upgrade carries over, their ids): each is sent at
        // most twice, however many steps a long retired chain takes.
        let mut aside = Vec::new();
        loop {
            let mut settling = 0;
            while let Some(e) = pending.front() {
                if matches!(e, Event::Boundary(b) if !c.verified.retired.contains(&b.id)) {
                    if settling == RESOLVE_STEP {
                        break;
                    }
                    settling += 1;
                }
                c.chain.extend(pending.pop_front());
            }
            if pending.is_empty() {
                c.chain.append(&mut aside);
            }
            let r = self.resolve_step(c, conversation);
            if r.is_err() || pending.is_empty() {
                c.chain.append(&mut aside);
                c.chain.extend(pending);
                if r.is_err() {
                    // The steps before stand for part of the chain only:
                    // the next call resolves the rest again, and fails again.
                    c.res = None;
                }
                return r;
            }
            let retired = &c.verified.retired;
            let (out, chain): (Vec<Event>, Vec<Event>) = std::mem::take(&mut c.chain)
                .into_iter()
                .partition(|e| matches!(e, Event::Boundary(b) if retired.contains(&b.id)));
            aside.extend(out);
            c.chain = chain;
        }
    }

    /// One resolve of `c.chain` from the verified head, taken into `c`.
    fn resolve_step(&self, c: &mut Cached, conversation: &str) -> Result<Resolution> {
        let mut r = match self.resolve_from(c, conversation, c.chain.clone())? {
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
        Ok(r)
    }

    /// Read from the journal, once, the turns `c`'s corrections touch that
    /// it no longer holds (a turn corrected after a summary covered it, and
    /// so let go): resolve is given every corrected turn, as a driver that
    /// read the journal cold gives it ([`super::corrected::originals`]). With `chain`, those
    /// its corrections touch, read each time: a batch only checked, not yet
    /// written, whose turns may be let go again before it is.
    pub(super) fn read_originals(
        &self,
        c: &mut Cached,
        conversation: &str,
        chain: Option<&[Event]>,
    ) -> Result<()> {
        let mut missing = super::corrected::targets(chain.unwrap_or(&c.chain));
        missing.retain(|id| !c.looked_up.contains(id));
        if missing.is_empty() {
            return Ok(());
        }
        for e in &c.recent {
            if let Event::Message(m) = e {
                missing.remove(&m.turn_id);
            }
        }
        if missing.is_empty() {
            return Ok(());
        }
        let found = self
            .journal
            .read_events(conversation, 0)?
            .into_iter()
            .filter(|s| {
                s.seq <= c.seq
                    && matches!(&s.event, Event::Message(m) if missing.contains(&m.turn_id))
            });
        c.recent.extend(found.map(|s| s.event));
        c.holding.rebuilt();
        if chain.is_none() {
            c.looked_up.extend(missing);
        }
        Ok(())
    }

    /// Who sent turn `turn_id` (`None`: no such turn); one let go after a
    /// summary covered it is read from the journal, once.
    pub(super) fn sender_of(
        &self,
        c: &mut Cached,
        conversation: &str,
        turn_id: &str,
    ) -> Result<Option<String>> {
        let sender = |c: &Cached| {
            c.recent.iter().find_map(|e| match e {
                Event::Message(m) | Event::LateDelivery(m) if m.turn_id == turn_id => {
                    Some(m.sender.clone())
                }
                _ => None,
            })
        };
        if let Some(s) = sender(c) {
            return Ok(Some(s));
        }
        let probe = [Event::Correction(foldline_core::event::Correction {
            turn_id: turn_id.to_owned(),
            correction_seq: 0,
            parts: Vec::new(),
            tokens: None,
        })];
        self.read_originals(c, conversation, Some(&probe))?;
        Ok(sender(c))
    }

    /// Resolve `chain` (the chain events after `c`'s verified head) from
    /// that head; `c` is left as it is.
    pub(super) fn resolve_from(
        &self,
        c: &Cached,
        conversation: &str,
        mut chain: Vec<Event>,
    ) -> Result<ValidateResponse> {
        let mut packets = Vec::new();
        for e in &chain {
            match e {
                Event::Boundary(b) if !c.verified.retired.contains(&b.id) => {
                    packets.extend(self.journal.get_packet(conversation, &b.packet_id)?);
                }
                _ => {}
            }
        }
        let verified = c.verified.request(&chain);
        chain.extend(super::corrected::originals(&c.recent, &chain));
        self.validate(ValidateRequest::Resolve(Box::new(ResolveRequest {
            declaration: self.declaration.clone(),
            compactor: self.compactor.clone(),
            route: (self.route_of)(conversation),
            verified,
            events: chain,
            packets,
            trusted: Vec::new(),
        })))
    }

    /// Read what is new, then call `entry` with the request `make` builds
    /// from the conversation's cache, the resolved chain, the position read
    /// at and the live events to send — none when the core's instance holds
    /// them (only what it lacks is sent beside the request), else all. One
    /// read and one call under the cache's lock, so the events the call
    /// plans or selects from are those of the position it names.
    /// `read_new`: as [`Driver::load_into`]. `slim` may answer other events
    /// to send in their stead, inline (`select`'s for a history too large
    /// for one call: `slim.rs`).
    pub(super) fn read_and_call<Req: serde::Serialize, Resp: serde::de::DeserializeOwned>(
        &self,
        conversation: &str,
        entry: &str,
        read_new: bool,
        slim: Option<&super::slim::Slim<'_>>,
        make: impl FnOnce(&Cached, Resolution, u64, Vec<Event>) -> Req,
    ) -> Result<Resp> {
        let mut cache = lock(&self.cache);
        let c = self.kept(&mut cache, conversation);
        let (res, seq) = self.load_into(c, conversation, read_new)?;
        if let Some(events) = slim.and_then(|s| s(&c.recent)) {
            let request = make(c, res, seq, events);
            drop(cache);
            return self.foldline.call(entry, &request);
        }
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

    /// This driver appended through journal position `seq`: a cache read
    /// to before it is read again before it is used.
    pub(super) fn wrote(&self, conversation: &str, seq: u64) {
        self.with_cache(conversation, |c| c.written = c.written.max(seq));
    }

    pub(super) fn with_cache<T>(&self, conversation: &str, f: impl FnOnce(&mut Cached) -> T) -> T {
        let mut cache = lock(&self.cache);
        f(self.kept(&mut cache, conversation))
    }
}
