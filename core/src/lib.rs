//! # foldline-core
//!
//! The deterministic, I/O-free rule set of foldline: it decides what a language
//! model sees of a long conversation without ever editing the conversation's
//! journal.
//!
//! - [`plan()`]: when to compact and exactly what to freeze;
//! - `validate`: settle a summary into a bound, hashed boundary, resolve the
//!   chain, amend for late corrections, check declarations;
//! - `select`: the model-bound context and the chat timeline.
//!
//! No I/O, no clock, no randomness: time, ids and token counts arrive in the
//! input, and the same input gives byte-identical output everywhere.
//!
//! Comments cite the two origin documents as *seed 000* and *seed 002*;
//! `docs/rules.md` restates each of their rules and names the module that
//! enforces it and the tests that prove it. The modules are layered —
//! primitives, records, render, history, operations, one directory each —
//! each importing only the layers below it (`docs/architecture.md` walks them;
//! `tests/layers.rs` holds them to it). The public API is what this file
//! re-exports, not the file layout.
#![forbid(unsafe_code)]
#![deny(missing_docs)]

// The layers, bottom up, one directory each; the primitives are the files
// beside this one. What is public is listed here: the modules a host names,
// re-exported at the root, and the calls and their types below them.
mod entry;
mod history;
mod ops;
mod records;
mod render;

pub mod canonical;
pub mod decode;
pub mod defaults;
pub mod error;
mod order;

pub use records::{amendment, boundary, declaration, event, frontier, link, packet, turn};

pub use render::{budget, compactor, envelope, format};

pub use history::{amend, reconstruct, speakers, standing};

pub use entry::{api, held};
pub use ops::{member, plan, resolve, run, select, settle, stream, timeline, validate};

pub use error::{Code, Error, Result};
pub use plan::{plan, PlanOutcome, PlanRequest};
pub use run::{step, Step, StepRequest};
pub use select::{select, SelectRequest, Selection};
pub use timeline::{timeline, Timeline, TimelineRequest};
pub use validate::{validate, ValidateRequest, ValidateResponse};

/// Version of the rule set. Part of every epoch: a change here retires the
/// boundaries of the previous version instead of failing on them.
///
/// A release build never sets `FOLDLINE_RULESET_VERSION`; the journey test
/// builds a second artifact with it set, to upgrade a long conversation to a
/// new ruleset exactly as a release that bumps this constant would.
pub const RULESET_VERSION: &str = match option_env!("FOLDLINE_RULESET_VERSION") {
    Some(v) => v,
    None => "foldline-ruleset/2",
};
