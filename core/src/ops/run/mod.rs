//! The compaction loop, as a deterministic state machine without I/O.
//!
//! A host drives one run (an automatic check, a manual `/compact`, or the
//! ending of interrupted tasks) by calling [`step`] until it answers
//! [`Effect::Done`]. Each call carries the [`LoopState`] the previous call
//! answered and the [`EffectResult`] of the effect the host just carried
//! out; the answer is the next effect:
//!
//! ```text
//! start ─ read ─▶ plan ─┬─ activate ─▶ append frontier ─▶ read …
//!                       ├─ skip / paused / refuse ─────────────▶ done
//!                       ├─ warm ─▶ put candidate packet ────────▶ done
//!                       └─ compact ─▶ put packet ─▶ [append task requested]
//!                            ─▶ call model (stream) ─▶ [call model (buffered), once]
//!                            ─▶ settle ─┬─▶ append boundary [+ task completed] ─▶ done
//!                                       └─▶ append failure [+ task failed] ─────▶ done
//!
//! prepareWarm (the held candidate in view.warm; writes nothing):
//! start ─ call model (stream) ─▶ [call model (buffered), once] ─▶ settle ─┬─▶ done prepared
//!                                                                          └─▶ done failed
//! ```
//!
//! What the host keeps is its own business (a cache of what it read, the
//! verified chain head, a warm candidate's summary); what it writes, in which
//! order, at which journal position, and what it tells the member, is decided
//! here — so every host behaves the same by construction, and the effect
//! vectors (`tests/vectors/step.json`) hold them all. Run ids are derived
//! from the packet and the attempt; every append is a compare-and-append at
//! the position the plan was made from, and a conflict in which another
//! writer moved the chain head ends the run with `fork` (nothing written).
//! Interrupted manual tasks (a `requested` event with no end: its holder
//! crashed, and the caller now holds the writer lease) are ended as `failed`
//! before anything else.

use crate::error::{Code, Error, Result};
use crate::history::reconstruct::Reconstruction;
use crate::ops::plan::{newest_seq, plan_from, PlanOutcome, PlanRequest, Trigger};
use crate::ops::settle::{settle, ModelOutput, SettleRequest};
use crate::ops::stream::{
    classify, decide, replay_buffered, FailureInput, FailureKind, FailureReport, StreamDecision,
    StreamEnd, StreamReport,
};
use crate::records::event::{Event, FailureEvent, TaskEvent, TaskState};
use crate::records::packet::Packet;

mod wire;

pub use wire::*;

fn at(stage: Stage, run: Option<Run>, effect: Effect) -> Step {
    Step {
        state: LoopState {
            stage,
            run,
            ..LoopState::default()
        },
        effect,
    }
}

fn done(finished: Finished) -> Step {
    at(
        Stage::Start,
        None,
        Effect::Done {
            finished: Box::new(finished),
        },
    )
}

fn read() -> Step {
    at(Stage::Start, None, Effect::Read)
}

fn append(
    batch: Vec<Event>,
    seq: u64,
    then: Then,
    run: Option<Run>,
    failure: Option<FailureKind>,
) -> Step {
    Step {
        effect: Effect::Append {
            expected_seq: seq,
            accepts_task: then == Then::Summarize,
        },
        state: LoopState {
            stage: Stage::Appending,
            then,
            batch,
            run,
            failure,
            folds: None,
        },
    }
}

/// The next effect of a run.
///
/// # Errors
/// `invalid_request` when the state and the effect result do not go
/// together; `fork` when another writer moved the chain head under an
/// append (nothing was written).
pub fn step(mut req: StepRequest) -> Result<Step> {
    let mut view = req.view.take();
    step_viewing(req, view.as_mut(), None)
}

/// [`step`] with its view lent instead of in the request (`req.view` is
/// ignored): what the view holds stays the caller's (`held` keeps its events
/// between calls this way, without copying them), and, when `recon` is
/// given, the view's events already reconstructed.
///
/// # Errors
/// As [`step`].
pub(crate) fn step_viewing(
    req: StepRequest,
    view: Option<&mut PlanRequest>,
    recon: Option<&Reconstruction>,
) -> Result<Step> {
    let StepRequest {
        trigger,
        task,
        end_interrupted_only,
        prepare_warm,
        warm_candidates,
        warm_held,
        warm_summary,
        model_timeout_ms,
        view: _,
        seq,
        state,
        last,
    } = req;
    let LoopState {
        stage,
        then,
        batch,
        run,
        failure,
        folds,
    } = state.unwrap_or_default();
    let ctx = RunShared {
        trigger,
        task,
        timeout: model_timeout_ms,
        folds,
        prepare: prepare_warm,
    };
    let mut next = match (stage, last, run) {
        (Stage::Start, _, _) => match view {
            None => read(),
            Some(view) if ctx.prepare => ctx.prepare(view, seq)?,
            Some(view) if end_interrupted_only => ctx.end_interrupted(&view.events, seq),
            Some(view) => ctx.start(view, recon, seq, (warm_candidates, warm_held), warm_summary),
        },
        (Stage::Appending, Some(EffectResult::Conflict { seq, chain_moved }), run) => {
            conflicted(batch, then, run, failure, seq, chain_moved)?
        }
        (Stage::Appending, Some(EffectResult::Appended { seq }), run) => {
            ctx.appended(then, batch, run, failure, seq)?
        }
        (Stage::StoringCandidate, Some(EffectResult::Stored), Some(run)) => done(Finished::Warm {
            packet: Some(Box::new(run.packet)),
            prepare: true,
        }),
        // A run folding a backlog requested its task before the first part.
        (Stage::StoringPacket, Some(EffectResult::Stored), Some(run)) => {
            match ctx.task().filter(|_| ctx.folds.is_none()) {
                Some(id) => {
                    let requested = ctx.task_event(run.head_seq, id, TaskState::Requested, None);
                    let seq = run.seq;
                    append(vec![requested], seq, Then::Summarize, Some(run), None)
                }
                None => ctx.summarize(run),
            }
        }
        (
            Stage::Streaming,
            Some(EffectResult::Model {
                content_received,
                output,
                error,
            }),
            Some(run),
        ) => ctx.streamed(run, content_received, output, error),
        (Stage::Replaying, Some(EffectResult::Model { output, error, .. }), Some(run)) => {
            ctx.replayed(run, output, error)
        }
        _ => return Err(mismatch()),
    };
    // The folds so far ride along every step of the run until it is done.
    let carried = matches!(next.effect, Effect::Done { .. }) || next.state.folds.is_some();
    if !carried {
        next.state.folds = ctx.folds;
    }
    Ok(next)
}

fn mismatch() -> Error {
    Error::new(
        Code::InvalidRequest,
        "step: the state and the result in `last` do not go together (pass back the state the previous step answered, with the result of its effect)",
    )
}

/// A compare-and-append met a moved journal: after messages only, the batch
/// still extends the same head and is appended after them; a frontier or
/// boundary means another writer moved the chain head — `fork`, nothing
/// written.
fn conflicted(
    batch: Vec<Event>,
    then: Then,
    mut run: Option<Run>,
    failure: Option<FailureKind>,
    seq: u64,
    chain_moved: bool,
) -> Result<Step> {
    if chain_moved {
        return Err(Error::new(
            Code::Fork,
            "another writer extended the chain head first; nothing was written",
        ));
    }
    if let Some(r) = run.as_mut() {
        r.seq = seq;
    }
    Ok(append(batch, seq, then, run, failure))
}

fn failure_of(failure: FailureKind, detail: &str) -> FailureReport {
    classify(&FailureInput {
        failure,
        detail: detail.to_owned(),
    })
}

/// What every step of one run shares.
struct RunShared {
    trigger: Trigger,
    task: Option<String>,
    timeout: u64,
    /// What this run folded so far (a backlog folded in parts).
    folds: Option<Folds>,
    /// A warm candidate's preparation: it writes nothing.
    prepare: bool,
}

impl RunShared {
    /// Who asked for the run (empty for automatic runs).
    fn actor(&self) -> String {
        match &self.trigger {
            Trigger::Manual { actor, .. } => actor.clone(),
            Trigger::Automatic => String::new(),
        }
    }

    /// The manual task's id, when this run writes task events.
    fn task(&self) -> Option<&str> {
        match self.trigger {
            Trigger::Manual { .. } => self.task.as_deref(),
            Trigger::Automatic => None,
        }
    }

    /// The manual task's event, planned at `head_seq`.
    fn task_event(
        &self,
        head_seq: u64,
        id: &str,
        state: TaskState,
        boundary_id: Option<String>,
    ) -> Event {
        Event::CompactionTask(TaskEvent {
            task_id: id.to_owned(),
            state,
            actor: self.actor(),
            head_seq,
            boundary_id,
        })
    }

    /// Manual tasks requested and never ended (their holder crashed; this
    /// run holds the writer lease now) are ended as `failed`, in the order
    /// they were requested, before anything else.
    fn end_interrupted(&self, events: &[Event], seq: u64) -> Step {
        let mut open: Vec<&TaskEvent> = Vec::new();
        for e in events {
            if let Event::CompactionTask(t) = e {
                open.retain(|o| o.task_id != t.task_id);
                if t.state == TaskState::Requested {
                    open.push(t);
                }
            }
        }
        if open.is_empty() {
            return done(Finished::Ended);
        }
        let batch = open
            .into_iter()
            .map(|t| {
                Event::CompactionTask(TaskEvent {
                    state: TaskState::Failed,
                    ..t.clone()
                })
            })
            .collect();
        append(batch, seq, Then::Read, None, None)
    }

    /// A batch is durable: call the model after a task's `requested`
    /// event, finish after a boundary or a failure record, else read again.
    fn appended(
        &self,
        then: Then,
        batch: Vec<Event>,
        run: Option<Run>,
        failure: Option<FailureKind>,
        seq: u64,
    ) -> Result<Step> {
        Ok(match (then, run) {
            (Then::Summarize, Some(mut run)) => {
                run.seq = seq;
                self.summarize(run)
            }
            (Then::Compacted, _) => match (batch.into_iter().next(), &self.folds) {
                (Some(Event::Boundary(boundary)), _) => done(Finished::Compacted { boundary }),
                // The task's end after the last part of a backlog.
                (Some(Event::CompactionTask(_)), Some(f)) => done(Finished::Compacted {
                    boundary: f.last.clone(),
                }),
                _ => return Err(mismatch()),
            },
            (Then::Folded, _) => match batch.into_iter().next() {
                Some(Event::Boundary(last)) => {
                    let count = self.folds.as_ref().map_or(0, |f| f.count) + 1;
                    let mut next = read();
                    next.state.folds = Some(Folds { count, last });
                    next
                }
                _ => return Err(mismatch()),
            },
            (Then::Failed, _) => match (batch.into_iter().next(), failure) {
                (Some(Event::CompactionFailed(f)), Some(failure)) => done(Finished::Failed {
                    report: FailureReport {
                        failure,
                        notice: crate::ops::stream::MEMBER_NOTICE.to_owned(),
                        audit_reason: f.reason,
                    },
                }),
                _ => return Err(mismatch()),
            },
            _ => read(),
        })
    }

    /// The one buffered replay ended: settle its answer, or record why not.
    fn replayed(&self, run: Run, output: Option<ModelOutput>, error: Option<FailureInput>) -> Step {
        match (output, error) {
            (_, Some(e)) => self.fail(run, classify(&e)),
            (Some(output), None) => self.settled(run, output),
            (None, None) => self.fail(
                run,
                failure_of(
                    FailureKind::StreamDropped,
                    "the buffered call gave no answer",
                ),
            ),
        }
    }

    /// Prepare the held warm candidate: the model call of a compaction
    /// without its writes.
    fn prepare(&self, view: &mut PlanRequest, seq: u64) -> Result<Step> {
        let packet = view.warm.take().ok_or_else(|| {
            Error::new(
                Code::InvalidRequest,
                "step: prepareWarm needs the held candidate's packet in view.warm",
            )
        })?;
        Ok(self.call(self.run(packet, view, seq, None), Stage::Streaming, false))
    }

    /// Plan from a fresh view and follow the plan.
    fn start(
        &self,
        view: &mut PlanRequest,
        recon: Option<&Reconstruction>,
        seq: u64,
        (warm_candidates, warm_held): (bool, bool),
        warm_summary: Option<ModelOutput>,
    ) -> Step {
        // A run folding a backlog swept interrupted tasks when it started
        // (its own task is open now) and wants no warm candidate.
        let folding = self.folds.is_some();
        if !folding {
            let ended = self.end_interrupted(&view.events, seq);
            if !matches!(ended.effect, Effect::Done { .. }) {
                return ended;
            }
        }
        view.trigger = self.trigger.clone();
        // One candidate per head: none is built while one is held (or when
        // the host wants none).
        view.warm_held |= warm_held || !warm_candidates || folding;
        // Only a prepared candidate is offered to plan.
        if warm_summary.is_none() || folding {
            view.warm = None;
        }
        let ready = view.warm.clone();
        let outcome = plan_from(view, recon);
        if let (Some(f), false) = (&self.folds, matches!(outcome, PlanOutcome::Compact { .. })) {
            return self.folded_all(f, seq, newest_seq(&view.events));
        }
        match outcome {
            PlanOutcome::Activate { frontier } => append(
                vec![Event::Frontier(*frontier)],
                seq,
                Then::Read,
                None,
                None,
            ),
            PlanOutcome::Skip { .. } => done(Finished::Skipped {
                outcome: Box::new(outcome),
            }),
            PlanOutcome::Paused { .. } => done(Finished::Paused {
                outcome: Box::new(outcome),
            }),
            PlanOutcome::Refuse { error, .. } => done(Finished::Refused { error }),
            // One candidate per head, stored before any model sees it.
            PlanOutcome::Warm {
                packet: Some(packet),
            } if warm_candidates && !warm_held => at(
                Stage::StoringCandidate,
                Some(self.run(*packet, view, seq, None)),
                Effect::PutPacket { candidate: true },
            ),
            PlanOutcome::Warm { packet } => done(Finished::Warm {
                packet,
                prepare: false,
            }),
            PlanOutcome::Compact { packet, warm } => {
                // A prepared candidate the core still finds valid is used as
                // is (automatic runs: a member's `/compact` gets a fresh summary).
                let run = match (warm, ready, &self.trigger) {
                    (Some(v), Some(w), Trigger::Automatic) if v.valid && v.packet_id == w.id => {
                        self.run(w, view, seq, warm_summary)
                    }
                    _ => self.run(*packet, view, seq, None),
                };
                at(
                    Stage::StoringPacket,
                    Some(run),
                    Effect::PutPacket { candidate: false },
                )
            }
        }
    }

    fn run(
        &self,
        packet: Packet,
        view: &PlanRequest,
        seq: u64,
        prepared: Option<ModelOutput>,
    ) -> Run {
        let head_seq = newest_seq(&view.events);
        let attempt = 1 + view
            .events
            .iter()
            .filter(|e| matches!(e, Event::CompactionFailed(f) if f.packet_id == packet.id))
            .count();
        Run {
            run_id: format!(
                "run:{}:{attempt}",
                packet.id.get(7..23).unwrap_or(&packet.id)
            ),
            head_seq,
            previous_boundary_id: view.head.as_ref().map(|h| h.boundary_id.clone()),
            seq,
            prepared,
            packet,
        }
    }

    /// Call the model, or settle the prepared summary.
    fn summarize(&self, mut run: Run) -> Step {
        if let Some(mut output) = run.prepared.take() {
            // The candidate's summary was prepared off the critical path;
            // this run is the one that settles it.
            output.run_id.clone_from(&run.run_id);
            return self.settled(run, output);
        }
        self.call(run, Stage::Streaming, false)
    }

    fn call(&self, run: Run, stage: Stage, buffered: bool) -> Step {
        let effect = Effect::CallModel {
            buffered,
            deadline_ms: self.timeout,
        };
        at(stage, Some(run), effect)
    }

    /// The streaming rule: settle a complete answer; replay once through the
    /// buffered call when the stream ended before any content, unless the
    /// failure is typed (a refusal, timeout or budget stop would only fail
    /// again); never replay after content.
    fn streamed(
        &self,
        run: Run,
        content_received: bool,
        output: Option<ModelOutput>,
        error: Option<FailureInput>,
    ) -> Step {
        if let Some(e) = error.as_ref().filter(|e| e.failure == FailureKind::Timeout) {
            return self.fail(run, classify(e));
        }
        let ended = match (&output, &error) {
            (Some(_), None) => StreamEnd::Complete,
            _ => StreamEnd::Dropped,
        };
        let failure = error.as_ref().map(|e| e.failure);
        if replay_buffered(content_received, output.is_some(), failure) {
            return self.call(run, Stage::Replaying, true);
        }
        let decision = decide(&StreamReport {
            content_received,
            ended,
            replays_used: 0,
        });
        match (decision, output, error) {
            (StreamDecision::Settle, Some(output), _) => self.settled(run, output),
            (StreamDecision::Settle, None, _) => {
                self.fail(run, failure_of(FailureKind::StreamDropped, "no evidence"))
            }
            // Before content with a typed failure: it would only fail again.
            (StreamDecision::ReplayBuffered, _, e) => self.fail(
                run,
                e.map_or_else(
                    || failure_of(FailureKind::StreamDropped, "no evidence"),
                    |e| classify(&e),
                ),
            ),
            (StreamDecision::Fail { mut failure }, _, e) => {
                if let Some(e) = e {
                    failure.audit_reason = format!("{}: {}", failure.audit_reason, e.detail);
                }
                self.fail(run, failure)
            }
        }
    }

    /// A run that folded parts of a backlog and has nothing more to fold
    /// now: finish with the last boundary (after the task's end).
    fn folded_all(&self, folds: &Folds, seq: u64, head_seq: u64) -> Step {
        match self.task() {
            Some(task) => {
                let id = Some(folds.last.id.clone());
                let end = self.task_event(head_seq, task, TaskState::Completed, id);
                append(vec![end], seq, Then::Compacted, None, None)
            }
            None => done(Finished::Compacted {
                boundary: folds.last.clone(),
            }),
        }
    }

    /// Settle the answer into a boundary and append it with the task's end,
    /// or record why it could not be used.
    fn settled(&self, run: Run, output: ModelOutput) -> Step {
        let req = SettleRequest {
            packet: run.packet,
            output,
            expected_run_id: Some(run.run_id.clone()),
        };
        let settled = settle(&req);
        if let (Ok(_), true) = (&settled, self.prepare) {
            return done(Finished::Prepared {
                summary: Box::new(req.output),
            });
        }
        let run = Run {
            packet: req.packet,
            ..run
        };
        match settled {
            Ok(boundary) => {
                // A fold that left a backlog goes on with the next part,
                // within the run's bound.
                let folded = self.folds.as_ref().map_or(0, |f| f.count) + 1;
                if boundary.stats.backlog.is_some() && folded < MAX_FOLDS_PER_RUN {
                    let batch = vec![Event::Boundary(Box::new(boundary))];
                    return append(batch, run.seq, Then::Folded, None, None);
                }
                let id = Some(boundary.id.clone());
                let mut batch = vec![Event::Boundary(Box::new(boundary))];
                if let Some(task) = self.task() {
                    batch.push(self.task_event(run.head_seq, task, TaskState::Completed, id));
                }
                append(batch, run.seq, Then::Compacted, None, None)
            }
            Err(e) => self.fail(
                run,
                failure_of(FailureKind::UnusableSummary, e.code.as_str()),
            ),
        }
    }

    /// The audit record (and the task's end), committed before the failure returns.
    fn fail(&self, run: Run, report: FailureReport) -> Step {
        if self.prepare {
            return done(Finished::Failed { report });
        }
        let mut batch = vec![Event::CompactionFailed(FailureEvent {
            run_id: run.run_id.clone(),
            packet_id: run.packet.id.clone(),
            previous_boundary_id: run.previous_boundary_id.clone(),
            trigger: self.trigger.kind(),
            head_seq: run.head_seq,
            kind: Some(report.failure),
            reason: report.audit_reason,
        })];
        if let Some(task) = self.task() {
            batch.push(self.task_event(run.head_seq, task, TaskState::Failed, None));
        }
        append(batch, run.seq, Then::Failed, None, Some(report.failure))
    }
}
