//! The formats a context is rendered in, named by requests and by the
//! reasoning parts that may go back only to the format they came in.

use foldline_derive::{Decode, Encode};
use serde::Serialize;

use crate::decode::{At, Decode};

/// An output format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Encode, Decode, Default)]
#[serde(rename_all = "camelCase")]
pub enum Format {
    /// foldline's own list of `ContextMessage`s (`render::format`).
    #[default]
    Foldline,
    /// OpenAI chat-completions `messages`.
    Openai,
    /// OpenAI Responses API `input` items; read also as `openai-responses`.
    #[serde(alias = "openai-responses")]
    OpenaiResponses,
    /// Anthropic messages: `{ system, messages }`.
    Anthropic,
    /// Vercel AI SDK `ModelMessage[]`; read also as `ai-sdk`, the spelling
    /// of the README, the program and the servers' `?format=`.
    #[serde(alias = "ai-sdk")]
    AiSdk,
}

impl std::str::FromStr for Format {
    type Err = crate::error::Error;

    /// A format by any name the core reads it by (`ai-sdk` for `aiSdk`):
    /// what a host's `--format` or `?format=` takes.
    fn from_str(name: &str) -> crate::error::Result<Format> {
        Format::decode(crate::decode::Tree::String(name.into()), &At::ROOT).map_err(|e| *e)
    }
}
