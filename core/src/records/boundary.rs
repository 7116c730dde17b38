//! The boundary: a settled, hashed claim that a named model run summarized a
//! frozen prefix. Every field but the summary is bound by the core from the
//! packet and the run evidence; the model never writes provenance.

use foldline_derive::{Decode, Encode};
use serde::Serialize;

use crate::canonical;
use crate::records::amendment::AbsorbedEntry;
use crate::records::declaration::Budget;
use crate::records::declaration::Metric;
use crate::records::frontier::FrontierRef;
pub use crate::records::link::PreviousRef;
use crate::records::turn::{Role, Route};

/// Name and version of the boundary's output contract.
pub const OUTPUT_CONTRACT: &str = "foldline.compaction@1";

/// One frozen input turn, as snapshotted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Encode, Decode)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct InputTurn {
    /// Turn id.
    pub turn_id: String,
    /// Source sequence.
    pub source_seq: u64,
    /// Role.
    pub role: Role,
    /// Content hash at freezing time.
    pub content_hash: String,
}

/// Evidence of exactly what the compactor was given.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Encode, Decode)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct InputEvidence {
    /// Frozen turns.
    pub turn_count: u64,
    /// Characters of the frozen turns.
    pub chars: u64,
    /// Tokens of the frozen turns.
    pub tokens: u64,
    /// Source groups covered.
    pub source_count: u64,
    /// Hash of the frozen turn ids, in order.
    pub turn_ids_hash: String,
    /// Hash of the rendered compactor messages.
    pub rendered_hash: String,
    /// Hash of the compactor's system prompt (with instructions).
    pub prompt_hash: String,
    /// Characters of all rendered compactor messages.
    pub rendered_chars: u64,
    /// The frozen turns' snapshot.
    pub turns: Vec<InputTurn>,
}

/// Sizes before and after, in both units.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Encode, Decode, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Sizes {
    /// Characters.
    pub chars: u64,
    /// Tokens.
    pub tokens: u64,
}

/// Before/after statistics of a compaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Encode, Decode)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Stats {
    /// Unit the decision was made in.
    pub metric: Metric,
    /// Active context before compaction.
    pub before: Sizes,
    /// Pinned turns (never folded), and the open tool cycle's reasoning,
    /// which is sent beside the tail (docs/formats.md).
    pub pinned: Sizes,
    /// Exact tail retained.
    pub retained_tail: Sizes,
    /// Turns in the retained tail.
    pub retained_tail_turns: u64,
    /// Summary envelope (after settle: the real summary; in a packet: the reserve).
    pub summary: Sizes,
    /// Active context after compaction: pinned + summary envelope + backlog
    /// + tail.
    pub after: Sizes,
    /// The exact tail is over the tail target: its newest unit alone was
    /// larger (a long answer), so it is kept whole as the tail and
    /// everything before it folded.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub oversized_tail: bool,
    /// What this compaction left for the next one, when the history before
    /// the exact tail was larger than one compaction may take (the oldest
    /// part is folded first; see `docs/rules.md`, "backlogs fold in steps").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backlog: Option<Backlog>,
}

/// Eligible turns between a compaction's frozen prefix and its exact tail:
/// folded by the next compaction of the same run (or the next message).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Encode, Decode)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Backlog {
    /// Turns left unfolded before the tail.
    pub turns: u64,
    /// Their size.
    pub size: Sizes,
}

/// Model usage evidence.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Encode, Decode, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Usage {
    /// Prompt tokens the provider reported.
    pub input_tokens: u64,
    /// The summary's output tokens the provider reported: a reasoning
    /// model's reasoning, which its usage counts among them, left out (the
    /// model adapters subtract it), since `settle` holds this to the
    /// summary's cap.
    pub output_tokens: u64,
}

/// Evidence of the run that produced the summary.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Encode, Decode)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RunEvidence {
    /// Run id the host assigned.
    pub run_id: String,
    /// Model that answered.
    pub model_id: String,
    /// Usage.
    pub usage: Usage,
    /// Finish reason the provider reported.
    pub finish_reason: String,
}

/// A settled compaction boundary (`foldline.compaction@1`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Encode, Decode)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Boundary {
    /// Boundary id (derived from packet and run).
    pub id: String,
    /// `sha256:` of every other field in the canonical encoding.
    pub hash: String,
    /// Always true: boundaries are sensitive.
    pub sensitive: bool,
    /// Output contract identity.
    pub output_contract: String,
    /// Ruleset version.
    pub ruleset_version: String,
    /// Target declaration fingerprint.
    pub declaration_fingerprint: String,
    /// Target agent.
    pub target_id: String,
    /// Compactor.
    pub compactor_id: String,
    /// Admitted history agents.
    pub history_agents: Vec<String>,
    /// Conversation, chat, sender.
    pub route: Route,
    /// Automatic or manual.
    pub trigger: TriggerKind,
    /// Previous boundary, if any.
    pub previous: Option<PreviousRef>,
    /// Activation frontier.
    pub frontier: FrontierRef,
    /// Last covered turn.
    pub covered_through_turn_id: String,
    /// Last covered source sequence.
    pub covered_through_seq: u64,
    /// A manual checkpoint's journal head (the packet's `headSeq`): the
    /// newest source sequence when the member's `/compact` froze its
    /// snapshot. The covered range ends at or before it; the turns between
    /// stayed as the exact tail.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub head_seq: Option<u64>,
    /// Policy in force.
    pub policy: Budget,
    /// Before/after statistics.
    pub stats: Stats,
    /// Input evidence.
    pub input: InputEvidence,
    /// Hash of the amendment absorbed, if any.
    pub amendment_hash: Option<String>,
    /// Turns whose newer content this boundary absorbed.
    pub absorbed: Vec<AbsorbedEntry>,
    /// Packet settled.
    pub packet_id: String,
    /// Run evidence.
    pub run: RunEvidence,
    /// The model's summary, verbatim.
    pub summary: String,
    /// Bounded preview derived from the summary.
    pub preview: String,
}

impl Boundary {
    /// Recompute the hash over every field but `hash`.
    pub fn compute_hash(&self) -> String {
        canonical::hash_without(self, "hash")
    }

    /// The previous covered sequence, if any.
    pub fn previous_covered(&self) -> Option<u64> {
        self.previous.as_ref().map(|p| p.covered_through_seq)
    }
}

/// The latest valid boundary of a chain, as plan and select need it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Encode, Decode)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ChainHead {
    /// Boundary id.
    pub boundary_id: String,
    /// Boundary hash.
    pub boundary_hash: String,
    /// Covered through this source sequence.
    pub covered_through_seq: u64,
    /// Covered through this turn.
    pub covered_through_turn_id: String,
    /// The frontier the chain starts at.
    pub frontier_id: String,
    /// The summary text.
    pub summary: String,
    /// Boundaries in the chain.
    pub length: u64,
}

impl ChainHead {
    /// The head of a chain ending at `b` with `length` links.
    pub fn of(b: &Boundary, length: u64) -> ChainHead {
        ChainHead {
            boundary_id: b.id.clone(),
            boundary_hash: b.hash.clone(),
            covered_through_seq: b.covered_through_seq,
            covered_through_turn_id: b.covered_through_turn_id.clone(),
            frontier_id: b.frontier.id.clone(),
            summary: b.summary.clone(),
            length,
        }
    }

    /// The previous-link reference a packet extending this head carries.
    pub fn as_previous(&self) -> PreviousRef {
        PreviousRef {
            boundary_id: self.boundary_id.clone(),
            boundary_hash: self.boundary_hash.clone(),
            covered_through_seq: self.covered_through_seq,
        }
    }
}

/// What started a compaction.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Encode, Decode, Default,
)]
#[serde(rename_all = "camelCase")]
pub enum TriggerKind {
    /// Context pressure.
    #[default]
    Automatic,
    /// A member's `/compact`.
    Manual,
}
