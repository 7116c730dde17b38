//! Test support shared by integration tests (each test binary uses part of it).
#![allow(dead_code)]
pub mod fixtures;
pub mod pg;
pub mod server;
