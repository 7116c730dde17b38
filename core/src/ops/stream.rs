//! Streaming and failure decisions for hosts (seed 002).
//!
//! Provisional text never leaves the worker and never becomes a boundary. A
//! stream that ends before any content may be replayed once through the
//! buffered call; a stream that ended after content is never replayed. A
//! failure becomes one generic member-facing notice and a specific audit reason.

use foldline_derive::{Decode, Encode};
use serde::Serialize;

/// How a summary stream ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Encode, Decode)]
#[serde(rename_all = "camelCase")]
pub enum StreamEnd {
    /// The provider finished the answer.
    Complete,
    /// The connection dropped or the stream was cut.
    Dropped,
    /// The provider sent an error.
    Error,
}

/// What the host saw of one stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Encode, Decode)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct StreamReport {
    /// Whether any content delta arrived.
    pub content_received: bool,
    /// How it ended.
    pub ended: StreamEnd,
    /// Buffered replays already made for this packet.
    #[serde(default)]
    pub replays_used: u64,
}

pub use crate::records::event::FailureKind;

impl FailureKind {
    /// The kind as the audit reason spells it (snake case, as the error
    /// codes are; the wire name is [`FailureKind::as_str`]).
    fn audit_name(self) -> &'static str {
        match self {
            FailureKind::ProviderRefusal => "provider_refusal",
            FailureKind::Timeout => "timeout",
            FailureKind::BudgetStop => "budget_stop",
            FailureKind::UnusableSummary => "unusable_summary",
            FailureKind::StreamDropped => "stream_dropped",
            FailureKind::Other => "other",
        }
    }
}

/// A failure the host reports.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Encode, Decode)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FailureInput {
    /// Kind of failure.
    pub failure: FailureKind,
    /// Provider or host detail; goes to audit only.
    #[serde(default)]
    pub detail: String,
}

/// The member-facing notice, always the same, and the audit reason.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Encode, Decode)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FailureReport {
    /// Kind of failure.
    pub failure: FailureKind,
    /// Generic text a member may see.
    pub notice: String,
    /// Specific reason for the audit record.
    pub audit_reason: String,
}

/// The one notice members see for any failed compaction.
pub const MEMBER_NOTICE: &str = "The chat could not be compacted.";

/// Map a failure to its notice and audit reason.
pub fn classify(f: &FailureInput) -> FailureReport {
    let audit_reason = if f.detail.is_empty() {
        f.failure.audit_name().to_owned()
    } else {
        format!("{}: {}", f.failure.audit_name(), f.detail)
    };
    FailureReport {
        failure: f.failure,
        notice: MEMBER_NOTICE.to_owned(),
        audit_reason,
    }
}

/// The host's next step after a stream ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Encode, Decode)]
#[serde(tag = "action", rename_all = "camelCase")]
pub enum StreamDecision {
    /// Settle the final text.
    Settle,
    /// Replay once through the buffered (non-streaming) call.
    ReplayBuffered,
    /// Give up; record the failure.
    Fail {
        /// Notice and audit reason.
        failure: FailureReport,
    },
}

/// Whether a summary call that answered this is made once more through the
/// buffered call: it ended before any content (no complete answer) and
/// without a typed failure — a refusal, timeout or budget stop would only
/// fail again; an untyped one (`Other`: a reset connection, a broken stream)
/// may not. The loop's rule (`step`), and the one a host's warm-candidate
/// preparation follows (the Rust driver calls this; the JS driver's
/// `replayBuffered` is its copy, held by the same scenario in both hosts).
pub fn replay_buffered(content_received: bool, output: bool, error: Option<FailureKind>) -> bool {
    let complete = output && error.is_none();
    let ended_before_content = !(content_received || complete);
    ended_before_content && error.is_none_or(|f| f == FailureKind::Other)
}

/// Decide what to do with a finished stream.
pub fn decide(r: &StreamReport) -> StreamDecision {
    let fail = |failure, detail: &str| StreamDecision::Fail {
        failure: classify(&FailureInput {
            failure,
            detail: detail.to_owned(),
        }),
    };
    match (r.ended, r.content_received) {
        (StreamEnd::Complete, true) => StreamDecision::Settle,
        (StreamEnd::Complete, false) => fail(
            FailureKind::UnusableSummary,
            "stream completed without content",
        ),
        (_, false) if r.replays_used == 0 => StreamDecision::ReplayBuffered,
        (_, false) => fail(
            FailureKind::StreamDropped,
            "ended before content after the one buffered replay",
        ),
        (_, true) => fail(
            FailureKind::StreamDropped,
            "ended after content; never replayed",
        ),
    }
}
