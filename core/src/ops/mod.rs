//! Operations: the calls a host makes — `plan` (when to compact and what to
//! freeze), `settle` (a summary into a bound boundary), `resolve` (the chain
//! checked), `select` (the model-bound context), `timeline`, `stream` (the
//! replay and failure decisions), `run` (the compaction loop, `step`),
//! `validate` (one entry for the checks), member compression, and `api`, the
//! one JSON entry point every host calls. In test builds, `schema`: the JSON
//! shape of every contract type, for the TypeScript contract check.

pub mod api;
pub mod held;
pub mod member;
pub mod plan;
pub mod resolve;
pub mod run;
#[cfg(test)]
pub mod schema;
pub mod select;
pub mod settle;
// Native builds only: its ~3.4 KB gzipped do not fit the artifact's budget
// (BENCHMARKS "Session 9"); the artifact answers the same bytes the plain way.
#[cfg(not(target_arch = "wasm32"))]
mod settle_bytes;
pub mod stream;
pub mod timeline;
pub mod validate;
