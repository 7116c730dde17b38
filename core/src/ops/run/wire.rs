//! What a run says and hears, on the wire: the step request, the loop's
//! state carried between steps, the effects a host carries out, their
//! results and how a run finishes.

use foldline_derive::{Decode, Encode};
use serde::Serialize;

use crate::error::Error;
use crate::ops::plan::{PlanOutcome, PlanRequest, Trigger};
use crate::ops::settle::ModelOutput;
use crate::ops::stream::{FailureInput, FailureKind, FailureReport};
use crate::records::boundary::Boundary;
use crate::records::event::Event;
use crate::records::packet::Packet;

pub use crate::defaults::MODEL_TIMEOUT_MS;

/// Most boundaries one run appends. A history before the exact tail larger
/// than one compaction may take is folded oldest first, one boundary per
/// part (the packet's `stats.backlog` says what is left); a run goes on to
/// the next part until none is left or it has folded this many, so one
/// message costs at most this many successful model calls (and a failed call
/// ends the run). What is left waits for the next message.
pub const MAX_FOLDS_PER_RUN: u64 = 4;

/// One step of a run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Encode, Decode)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct StepRequest {
    /// Automatic or manual.
    #[serde(default)]
    pub trigger: Trigger,
    /// The manual task's id (a manual run without one writes no task events).
    #[serde(default)]
    pub task: Option<String>,
    /// Only end interrupted tasks, then finish with `ended`.
    #[serde(default)]
    pub end_interrupted_only: bool,
    /// Only prepare the held warm candidate (its packet in `view.warm`): call
    /// the model for it (the streaming rule and its one buffered replay, as
    /// for a compaction), check the answer with `settle`, and finish
    /// `prepared` with the checked summary, or `failed`. Nothing is written
    /// either way; the host keeps the summary and offers it as `warmSummary`.
    /// Sent with every step of the run, as `trigger` and `task` are.
    #[serde(default)]
    pub prepare_warm: bool,
    /// Whether warm candidates are prepared (default on).
    #[serde(default = "yes")]
    pub warm_candidates: bool,
    /// Whether the host already holds a warm candidate (prepared or not):
    /// one candidate per head.
    #[serde(default)]
    pub warm_held: bool,
    /// The warm candidate's verified summary, when the host prepared one
    /// (its packet goes in `view.warm`).
    #[serde(default)]
    pub warm_summary: Option<ModelOutput>,
    /// Deadline of one model call (default 120,000 ms).
    #[serde(default = "model_timeout")]
    pub model_timeout_ms: u64,
    /// What the host read, as a plan request (declaration, route, owner,
    /// resolved chain, the events plan needs, the trigger, the prepared warm
    /// candidate) — when the state asks for it (a new run, or after `read`).
    #[serde(default)]
    pub view: Option<PlanRequest>,
    /// The journal position `view` was read at (where batches go).
    #[serde(default)]
    pub seq: u64,
    /// The state the previous step answered (`None`: a new run).
    #[serde(default)]
    pub state: Option<LoopState>,
    /// The result of the effect the previous step asked for.
    #[serde(default)]
    pub last: Option<EffectResult>,
}

fn yes() -> bool {
    true
}

fn model_timeout() -> u64 {
    MODEL_TIMEOUT_MS
}

/// Where a run is between steps.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Encode, Decode, Default)]
#[serde(rename_all = "camelCase")]
pub enum Stage {
    /// Waiting for a view to plan from.
    #[default]
    Start,
    /// A batch is being appended; `then` says what follows.
    Appending,
    /// A warm candidate's packet is being stored.
    StoringCandidate,
    /// The run's packet is being stored.
    StoringPacket,
    /// The streaming model call is running.
    Streaming,
    /// The one buffered replay is running.
    Replaying,
}

/// What follows a durable append.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Encode, Decode, Default)]
#[serde(rename_all = "camelCase")]
pub enum Then {
    /// Read again and plan from what is there.
    #[default]
    Read,
    /// The task's `requested` event is durable: call the model.
    Summarize,
    /// The boundary is durable: finish `compacted`.
    Compacted,
    /// The boundary of a fold that left a backlog is durable: read, and
    /// fold the next part.
    Folded,
    /// The failure record is durable: finish `failed`.
    Failed,
}

/// A run between steps. Hosts pass it back unchanged.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Encode, Decode, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LoopState {
    /// Where the run is.
    #[serde(default)]
    pub stage: Stage,
    /// After an append: what follows.
    #[serde(default)]
    pub then: Then,
    /// The batch being appended (appended again after a conflict that left
    /// the chain head alone).
    #[serde(default)]
    pub batch: Vec<Event>,
    /// The compaction in flight (or the warm candidate being stored).
    #[serde(default)]
    pub run: Option<Run>,
    /// The failure being recorded.
    #[serde(default)]
    pub failure: Option<FailureKind>,
    /// Boundaries this run appended so far while folding a backlog.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub folds: Option<Folds>,
}

/// The parts of a backlog a run has folded so far.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Encode, Decode)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Folds {
    /// Boundaries appended (at most [`MAX_FOLDS_PER_RUN`]).
    pub count: u64,
    /// The last of them: what the run finishes with when nothing more is
    /// folded.
    pub last: Box<Boundary>,
}

/// A compaction in flight.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Encode, Decode)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Run {
    /// The packet, stored before any model sees it.
    pub packet: Packet,
    /// Derived: `run:<packet id hex 0..16>:<attempt>`, the attempt counting
    /// the failures recorded for this packet.
    pub run_id: String,
    /// The newest source sequence the run was planned at.
    pub head_seq: u64,
    /// The chain head it extends.
    #[serde(default)]
    pub previous_boundary_id: Option<String>,
    /// The journal position its batches go at.
    pub seq: u64,
    /// A prepared (warm) summary, settled instead of calling the model.
    #[serde(default)]
    pub prepared: Option<ModelOutput>,
}

/// The result of the effect the previous step asked for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Encode, Decode)]
#[serde(tag = "kind", rename_all = "camelCase", deny_unknown_fields)]
pub enum EffectResult {
    /// The batch is durable; `seq` is its last event's journal position.
    Appended {
        /// Position of the batch's last event.
        seq: u64,
    },
    /// The journal moved past the expected position; nothing was written.
    #[serde(rename_all = "camelCase")]
    Conflict {
        /// The journal's position now.
        seq: u64,
        /// Whether a frontier or boundary arrived meanwhile.
        chain_moved: bool,
    },
    /// The packet is stored.
    Stored,
    /// The model call ended.
    #[serde(rename_all = "camelCase")]
    Model {
        /// Whether any content arrived.
        content_received: bool,
        /// The finished answer (`packetId` and `runId` as the effect gave them).
        #[serde(default)]
        output: Option<ModelOutput>,
        /// The typed failure (a passed deadline is `timeout`).
        #[serde(default)]
        error: Option<FailureInput>,
    },
}

/// How a run finished.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Encode, Decode)]
#[serde(tag = "status", rename_all = "camelCase")]
pub enum Finished {
    /// Below the trigger.
    Skipped {
        /// The plan.
        outcome: Box<PlanOutcome>,
    },
    /// Automatic compaction is paused.
    Paused {
        /// The plan.
        outcome: Box<PlanOutcome>,
    },
    /// Between the soft and eager thresholds.
    Warm {
        /// The candidate's packet (`null` when a candidate was already held:
        /// no new one is built).
        packet: Option<Box<Packet>>,
        /// Whether the candidate was stored now and the host should prepare
        /// its summary off the critical path.
        prepare: bool,
    },
    /// A boundary was appended.
    Compacted {
        /// The boundary.
        boundary: Box<Boundary>,
    },
    /// The core refused (fail closed).
    Refused {
        /// Why.
        error: Error,
    },
    /// A warm candidate's summary, checked by `settle` (`prepareWarm`):
    /// nothing was written; the host offers it as `warmSummary` later.
    Prepared {
        /// The checked answer.
        summary: Box<ModelOutput>,
    },
    /// The run failed; its audit record is durable (a warm preparation's
    /// failure writes none).
    Failed {
        /// The generic notice and the audit reason.
        report: FailureReport,
    },
    /// Interrupted tasks were ended (`endInterruptedOnly`).
    Ended,
}

/// The next effect. An effect names the operation; its data (the batch, the
/// packet) is in the answer's `state`, so it crosses the boundary once.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Encode, Decode)]
#[serde(tag = "effect", rename_all = "camelCase")]
pub enum Effect {
    /// Read what is new, resolve, and step again with a `view`.
    Read,
    /// Compare-and-append `state.batch` at `expectedSeq`, fenced by the
    /// writer lease, atomically.
    #[serde(rename_all = "camelCase")]
    Append {
        /// The journal position the batch extends.
        expected_seq: u64,
        /// This append makes a manual task durable: tell its caller the position.
        accepts_task: bool,
    },
    /// Store `state.run.packet` by id, before any model sees it.
    PutPacket {
        /// A warm candidate's packet (not a compaction's).
        candidate: bool,
    },
    /// Call the model with `state.run.packet` within the deadline, keeping
    /// the writer lease renewed; provisional text stays in the host. The
    /// answer's `packetId` and `runId` are `state.run`'s.
    #[serde(rename_all = "camelCase")]
    CallModel {
        /// `false`: stream; `true`: the one buffered replay.
        buffered: bool,
        /// Deadline in milliseconds.
        deadline_ms: u64,
    },
    /// The run is over.
    Done {
        /// How it finished.
        finished: Box<Finished>,
    },
}

/// A step's answer: the effect, and the state to pass back with its result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Encode, Decode)]
#[serde(rename_all = "camelCase")]
pub struct Step {
    /// The state for the next step.
    pub state: LoopState,
    /// What the host does now.
    pub effect: Effect,
}
