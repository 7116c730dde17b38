//! A reference to a settled boundary by id, hash and coverage: how a
//! boundary or packet names its predecessor, and how an activation frontier
//! names the retired summary an upgrade carries over.

use foldline_derive::{Decode, Encode};
use serde::Serialize;

/// A boundary, referred to by id, hash and what it covered.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Encode, Decode)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PreviousRef {
    /// The boundary's id.
    pub boundary_id: String,
    /// The boundary's hash.
    pub boundary_hash: String,
    /// What it covered through.
    pub covered_through_seq: u64,
}
