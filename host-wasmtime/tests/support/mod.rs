//! Test support shared by integration tests.
pub mod pg;
