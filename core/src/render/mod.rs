//! Render: everything model-facing — the `untrusted-history-summary` and
//! amendment envelopes and their sizes, the provider formats (OpenAI,
//! Anthropic, AI SDK), the budget arithmetic and a declaration's checks.

pub mod budget;
pub mod envelope;
pub mod format;
