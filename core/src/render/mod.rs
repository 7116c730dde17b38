//! Render: everything model-facing — what the compactor is sent, the
//! `untrusted-history-summary` and
//! amendment envelopes and their sizes, the provider formats (OpenAI chat
//! and Responses, Anthropic, AI SDK), the budget arithmetic and a declaration's checks.

pub mod budget;
pub mod compactor;
pub mod envelope;
mod exchange;
pub mod format;
pub(crate) mod reasoning;
mod responses;
