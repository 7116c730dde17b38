//! Operations: the calls a host makes — `plan` (when to compact and what to
//! freeze), `settle` (a summary into a bound boundary), `resolve` (the chain
//! checked), `select` (the model-bound context), `timeline`, `stream` (the
//! replay and failure decisions), `run` (the compaction loop, `step`),
//! `validate` (one entry for the checks) and member compression. The JSON
//! entry points hosts call over them are the layer above, `entry/`.

pub mod member;
pub mod plan;
pub mod resolve;
pub mod run;
pub mod select;
pub mod settle;
pub mod stream;
pub mod timeline;
pub mod validate;
