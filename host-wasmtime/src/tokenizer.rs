//! OpenAI's tokenizers as a driver's token counter
//! ([`DriverBuilder::count_tokens`](crate::builder::DriverBuilder::count_tokens)),
//! through tiktoken-rs (the BPE ranks are embedded: nothing is downloaded):
//! `o200k_base` (GPT-4o, GPT-4.1, o-series, GPT-5) and `cl100k_base`
//! (GPT-4, GPT-3.5). The `foldline` program's `--tokenizer`.
//!
//! ```no_run
//! # use foldline_wasmtime::{driver::Driver, journal::SqliteJournal, model::Extractive, runtime::Foldline, tokenizer::Tokenizer};
//! let driver = Driver::builder(Foldline::embedded()?, SqliteJournal::open("chat.db")?, Extractive)
//!     .count_tokens(Tokenizer::O200kBase.counter())
//!     .message_overhead_tokens(3) // OpenAI's chat framing
//!     .build()?;
//! # Ok::<(), foldline_wasmtime::HostError>(())
//! ```

use crate::error::HostError;

/// One of OpenAI's tokenizers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tokenizer {
    /// `o200k_base`: GPT-4o, GPT-4.1, the o-series, GPT-5.
    O200kBase,
    /// `cl100k_base`: GPT-4, GPT-3.5.
    Cl100kBase,
}

impl Tokenizer {
    /// The tokens of a text (special tokens counted as text), loaded on
    /// first use and shared by the process.
    pub fn counter(self) -> impl Fn(&str) -> u64 + Send + Sync + 'static {
        move |text: &str| {
            let bpe = match self {
                Tokenizer::O200kBase => tiktoken_rs::o200k_base_singleton(),
                Tokenizer::Cl100kBase => tiktoken_rs::cl100k_base_singleton(),
            };
            bpe.encode_ordinary(text).len() as u64
        }
    }

    /// The tokenizer's name, as `--tokenizer` takes it.
    pub fn name(self) -> &'static str {
        match self {
            Tokenizer::O200kBase => "o200k_base",
            Tokenizer::Cl100kBase => "cl100k_base",
        }
    }
}

impl std::str::FromStr for Tokenizer {
    type Err = HostError;

    fn from_str(s: &str) -> Result<Self, HostError> {
        match s {
            "o200k_base" => Ok(Tokenizer::O200kBase),
            "cl100k_base" => Ok(Tokenizer::Cl100kBase),
            other => Err(HostError::Input(format!(
                "unknown tokenizer {other:?}: o200k_base or cl100k_base"
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_as_openai_counts() {
        // tiktoken's own figures for these texts.
        assert_eq!(Tokenizer::Cl100kBase.counter()("hello world"), 2);
        assert_eq!(Tokenizer::O200kBase.counter()("hello world"), 2);
        assert_eq!(
            "o200k_base".parse::<Tokenizer>().unwrap(),
            Tokenizer::O200kBase
        );
        let e = "gpt2".parse::<Tokenizer>().unwrap_err();
        assert_eq!(e.code(), "invalid_input");
    }
}
