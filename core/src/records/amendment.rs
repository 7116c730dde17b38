//! The amendment records: what a covered-history amendment says (its
//! entries and their kinds) and what a boundary absorbed. The derivation that
//! produces them is `amend`; how they are rendered is `envelope`.

use foldline_derive::{Decode, Encode};
use serde::Serialize;

use crate::records::turn::{Part, Role};

/// Why a covered turn is amended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Encode, Decode)]
#[serde(rename_all = "camelCase")]
pub enum EntryKind {
    /// Its content was corrected after it was summarized.
    Corrected,
    /// It was delivered after the boundary covering its sequence.
    Late,
}

/// One amended turn.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Encode, Decode)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AmendmentEntry {
    /// Turn id.
    pub turn_id: String,
    /// Source sequence.
    pub source_seq: u64,
    /// Corrected or late.
    pub kind: EntryKind,
    /// Role of the turn.
    pub role: Role,
    /// Content hash the boundary snapshot holds (`None` for late deliveries).
    pub old_hash: Option<String>,
    /// Current content hash.
    pub new_hash: String,
    /// Current content.
    pub parts: Vec<Part>,
}

/// A bounded, typed covered-history amendment.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Encode, Decode)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Amendment {
    /// Amended turns, by source sequence then turn id.
    pub entries: Vec<AmendmentEntry>,
    /// Characters of the rendered amendment envelope.
    pub chars: u64,
    /// `sha256:` of the entries' canonical encoding.
    pub hash: String,
}

/// A turn whose newer content a boundary absorbed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Encode, Decode)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AbsorbedEntry {
    /// Turn id.
    pub turn_id: String,
    /// Source sequence.
    pub source_seq: u64,
    /// Role.
    pub role: Role,
    /// Content hash now part of the chain's snapshot.
    pub content_hash: String,
}
