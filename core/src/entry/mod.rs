//! The entry points hosts call, over the operations: `api` (one JSON call
//! per operation, bytes in and the canonical envelope out), `held` (the same
//! calls with a conversation's live events kept in the instance between
//! calls), on native builds `settle_bytes` (settle answered on the packet's
//! own bytes), and in test builds `schema` (the JSON shape of every contract
//! type, for the TypeScript contract check and the generated JS defaults).

pub mod api;
pub mod held;
#[cfg(test)]
pub mod schema;
// Native builds only: its ~3.4 KB gzipped do not fit the artifact's budget
// (BENCHMARKS "Session 9"); the artifact answers the same bytes the plain way.
#[cfg(not(target_arch = "wasm32"))]
mod settle_bytes;
