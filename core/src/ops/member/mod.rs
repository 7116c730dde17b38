//! Member compression (seed 002): opt-in, member-owned, deterministic.
//!
//! Three tools at three seams — prompt trim ([`trim`]), tool-result
//! compression ([`tool_result`]) and plain-speak responses — plus the
//! server-authored settings projection and self-inspection answer
//! ([`settings`]). None of them touches the journal: they shape only the
//! model-bound copy, and every call returns one deterministic measurement.

pub mod seams;
pub mod settings;
pub mod tool_result;
pub mod trim;

use foldline_derive::{Decode, Encode};
use serde::Serialize;

/// What one pass did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Encode, Decode)]
#[serde(rename_all = "camelCase")]
pub enum Status {
    /// The model-bound copy is smaller.
    Applied,
    /// Passed through unchanged (nothing to do, not eligible, or not smaller).
    Bypassed,
    /// Something failed; the original passed through.
    Failed,
}

/// The one measurement every pass records.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Encode, Decode)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Measurement {
    /// Bytes the pass was offered.
    pub eligible_bytes: u64,
    /// Bytes it delivered.
    pub delivered_bytes: u64,
    /// Applied, bypassed or failed.
    pub status: Status,
    /// Why it bypassed or failed, when it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The rules or filters that fired, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rules: Vec<String>,
}

impl Measurement {
    pub(crate) fn passthrough(bytes: usize, status: Status, reason: &str) -> Measurement {
        Measurement {
            eligible_bytes: bytes as u64,
            delivered_bytes: bytes as u64,
            status,
            reason: Some(reason.to_owned()),
            rules: Vec::new(),
        }
    }
}
