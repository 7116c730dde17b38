//! Test support shared by integration tests (each test binary uses part of it).
#![allow(dead_code)]
pub mod claims;
pub mod fixtures;
pub mod flaky;
pub mod intercept;
pub mod invariants;
pub mod meanwhile;
pub mod pg;
pub mod ruleset;
pub mod server;
