//! Prompt trim: a fixed list of commented rules over the model-bound copy of
//! a member's message. No model, no network, no settings lookup.
//!
//! Protections, all absolute:
//! - fenced code, inline code, quoted spans (`"…"`, `“…”`, `«…»`) and URLs are
//!   never rewritten;
//! - no rule fires inside a sentence that carries a negation, because
//!   removing a filler word there can invert the meaning;
//! - a result that is empty, or shorter than [`MIN_SHARE_PERMILLE`] of the
//!   original characters, is discarded for the original;
//! - a self-check that every protected span survives verbatim, in order;
//!   if it fails, the original is returned and the pass records `failed`.
//!
//! The rule list is the known ceiling: it removes only the English phrasing it
//! lists, so unusual hedging (and other languages) pass through.
//!
//! The rules and their engine are the `foldline-trim` crate (compiled for
//! speed in the artifact); this module is the wire form and the measurement.

use foldline_derive::{Decode, Encode};
use foldline_trim::Outcome;
use serde::Serialize;

use super::{Measurement, Status};

pub use foldline_trim::{Place, Rule, MIN_SHARE_PERMILLE, RULES};

/// A prompt-trim request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Encode, Decode)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TrimRequest {
    /// The member's message text.
    pub text: String,
}

/// The model-bound copy and the measurement.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Encode, Decode)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TrimResult {
    /// What goes to the model.
    pub text: String,
    /// What the pass did.
    pub measurement: Measurement,
}

/// Trim a member's message for the model-bound copy.
pub fn trim(req: &TrimRequest) -> TrimResult {
    let original = &req.text;
    let bytes = original.len();
    let (outcome, fired) = foldline_trim::trim_text(original);
    let rules: Vec<String> = fired.iter().map(|r| (*r).to_owned()).collect();
    let (status, reason) = match outcome {
        Outcome::Applied(text) => {
            return TrimResult {
                measurement: Measurement {
                    eligible_bytes: bytes as u64,
                    delivered_bytes: text.len() as u64,
                    status: Status::Applied,
                    reason: None,
                    rules,
                },
                text,
            }
        }
        Outcome::Bypassed(reason) => (Status::Bypassed, reason),
        Outcome::Failed(reason) => (Status::Failed, reason),
    };
    TrimResult {
        text: original.clone(),
        measurement: Measurement {
            rules,
            ..Measurement::passthrough(bytes, status, reason)
        },
    }
}
