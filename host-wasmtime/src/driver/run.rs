//! The loop: one run of the core's `step` (an automatic check, a manual
//! `/compact`, the end of interrupted tasks), each effect it answers carried
//! out — a compare-and-append, the packet stored, a model call.

use std::collections::BTreeSet;

use foldline_core::event::Event;
use foldline_core::packet::Packet;
use foldline_core::plan::{PlanOutcome, PlanRequest, Trigger};
use foldline_core::run::{Effect, EffectResult, Finished, LoopState, Step, StepRequest};
use foldline_core::settle::ModelOutput;
use foldline_core::stream::{FailureInput, FailureKind};
use foldline_core::Code;

use super::{no_run, slim, Driver, Outcome, RunSpec};
use crate::error::{HostError, Result};
use crate::journal::Journal;
use crate::model::{Model, StreamChunk};
use crate::sync::lock;

/// The crash tests' seam (`a_crash_between_packet_and_boundary_reuses_the_packet_and_appends_one_boundary` in
/// host-wasmtime/tests/host.rs): with `FOLDLINE_FAULT=abort-after-packet` in
/// its environment, a process aborts right after it stored a packet, before
/// any model sees it — what a power cut there would leave behind. Read once;
/// nothing else in the driver reads the environment.
fn abort_after_packet() -> bool {
    static FAULT: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *FAULT.get_or_init(|| std::env::var("FOLDLINE_FAULT").as_deref() == Ok("abort-after-packet"))
}

impl<J: Journal, M: Model> Driver<J, M> {
    pub(super) fn run(
        &self,
        conversation: &str,
        trigger: Trigger,
        task: Option<(String, Option<String>)>,
        accepted: &mut dyn FnMut(u64),
    ) -> Result<Outcome> {
        let Some(_running) = self.enter(conversation) else {
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
            prepare_warm: false,
        };
        // An automatic check that finds nothing to write (most messages: a
        // skip below the trigger) needs no writer lease: it is planned
        // first without one, and only a run with something to write takes
        // the lease and plans again under it. Its writes stay
        // compare-and-append at the position read, fenced by the lease.
        if matches!(run.trigger, Trigger::Automatic) {
            if let Effect::Done { finished } = self.fresh_step(conversation, &run, None)?.effect {
                return self.finish(conversation, *finished);
            }
        }
        let Some(lease) = self.take_lease(conversation)? else {
            return Ok(Outcome::Busy);
        };
        let result = self.drive(conversation, &run, accepted);
        lease.release()?;
        self.finish(conversation, result?)
    }

    /// What a finished run leaves: a skip's watermark noted, a warm
    /// candidate held or dropped, the outcome.
    fn finish(&self, conversation: &str, finished: Finished) -> Result<Outcome> {
        let drop_warm = |d: &Self| d.with_cache(conversation, |c| c.warm = None);
        Ok(match finished {
            Finished::Skipped { outcome } => match *outcome {
                PlanOutcome::Skip { record } => {
                    // The compactor's progress advances without inference:
                    // a watermark beside the journal, not an event (it only
                    // moves forward, so it needs no lease).
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
            Finished::Ended | Finished::Prepared { .. } => {
                return Err(HostError::MalformedOutput(
                    "a compaction run ended as an interrupted-task sweep or a preparation".into(),
                ))
            }
        })
    }

    /// The `step` after a fresh read: the core plans from what was read, at
    /// the journal position it was read at; `state` is what the `read`
    /// effect came with (`None` when a run starts).
    ///
    /// A history too large for one call's memory is sent slimmed
    /// (`slim.rs`); when the plan asks for the content of turns sent as
    /// their metadata (`needs_content`, naming them), the step is sent
    /// again with those whole. Nothing is written before a plan, so the
    /// first answer is simply dropped.
    pub(super) fn fresh_step(
        &self,
        conversation: &str,
        run: &RunSpec,
        state: Option<LoopState>,
    ) -> Result<Step> {
        let step = self.step_slimmed(conversation, run, state.clone(), &BTreeSet::new())?;
        let asked = match &step.effect {
            Effect::Done { finished } => match &**finished {
                Finished::Refused { error } if error.code == Code::NeedsContent => &error.ids,
                _ => return Ok(step),
            },
            _ => return Ok(step),
        };
        if asked.is_empty() {
            return Ok(step);
        }
        let whole = asked.iter().cloned().collect();
        self.step_slimmed(conversation, run, state, &whole)
    }

    fn step_slimmed(
        &self,
        conversation: &str,
        run: &RunSpec,
        state: Option<LoopState>,
        whole: &BTreeSet<String>,
    ) -> Result<Step> {
        let mut state = state;
        // A fold takes at most the prefix's turn bound of the oldest turns
        // (the core asks for no content past it).
        let oldest = self.declaration.prefix_bounds.max_turns.saturating_add(1);
        let slim = |events: &[Event]| {
            let memory = self.foldline.limits().memory_bytes;
            slim::slimmed(events, &self.declaration, None, memory, (whole, oldest))
        };
        self.read_and_call(
            conversation,
            "step",
            true,
            Some(&slim),
            |c, res, seq, events| {
                // A held candidate's packet is offered (copied) once its summary
                // is prepared, or to prepare it; until then the core needs only
                // to know one is held.
                let (warm, summary) = match &c.warm {
                    Some((p, Some(s))) => (Some(p.clone()), Some(s.clone())),
                    Some((p, None)) if run.prepare_warm => (Some(p.clone()), None),
                    _ => (None, None),
                };
                StepRequest {
                    trigger: run.trigger.clone(),
                    task: run.task.clone(),
                    end_interrupted_only: run.end_interrupted_only,
                    prepare_warm: run.prepare_warm,
                    warm_candidates: self.warm_candidates,
                    warm_held: c.warm.is_some(),
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
                        compression: self.compression,
                    }),
                    warm_summary: summary,
                    seq,
                    state: state.take(),
                    last: None,
                }
            },
        )
    }

    /// Interpret the core's loop (`step`): read, then carry out each effect
    /// it answers — a compare-and-append at the position it names, storing
    /// the packet, a model call — and feed the result back, until the run is
    /// done. What is written, where and when is the core's decision, the
    /// same as in the JS package's driver.
    pub(super) fn drive(
        &self,
        conversation: &str,
        run: &RunSpec,
        accepted: &mut dyn FnMut(u64),
    ) -> Result<Finished> {
        let next = |state: LoopState, last: EffectResult| StepRequest {
            trigger: run.trigger.clone(),
            task: run.task.clone(),
            end_interrupted_only: run.end_interrupted_only,
            prepare_warm: run.prepare_warm,
            warm_candidates: self.warm_candidates,
            warm_held: false,
            warm_summary: None,
            model_timeout_ms: self.model_timeout_ms,
            view: None,
            seq: 0,
            state: Some(state),
            last: Some(last),
        };
        // A model call keeps its run's lease renewed: the writer lease, or
        // a warm preparation's own.
        let (lease_key, lease_ms) = if run.prepare_warm {
            (format!("{conversation}#warm"), self.warm_lease_ms)
        } else {
            (conversation.to_owned(), self.lease_ms)
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
                    let last = self.fenced_append(conversation, &state.batch, expected_seq)?;
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
                    if !candidate && abort_after_packet() {
                        std::process::abort();
                    }
                    next(state, EffectResult::Stored)
                }
                Effect::CallModel {
                    buffered,
                    deadline_ms,
                } => {
                    let r = state.run.as_ref().ok_or_else(no_run)?;
                    let last = self.renewing(&lease_key, lease_ms, || {
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
    pub(super) fn fenced_append(
        &self,
        conversation: &str,
        batch: &[Event],
        seq: u64,
    ) -> Result<EffectResult> {
        let fence = lock(&self.fences).get(conversation).copied();
        match self.journal.append_at(conversation, batch, seq, fence) {
            Ok(seq) => {
                self.wrote(conversation, seq);
                Ok(EffectResult::Appended { seq })
            }
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
    pub(super) fn call_model(
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
}
