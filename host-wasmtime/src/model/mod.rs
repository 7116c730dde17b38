//! Models: the trait, the deterministic offline extractive summarizer (the
//! default, so everything runs without a network), an OpenAI-compatible
//! chat-completions adapter (OpenAI, Ollama, vLLM, llama.cpp) and one for
//! the OpenAI Responses API (feature `openai`).

use foldline_core::boundary::Usage;
use foldline_core::packet::{CompactorRole, Packet};

pub mod deadline;
pub use deadline::{with_deadline, Deadline};

#[cfg(feature = "openai")]
mod http;
#[cfg(feature = "openai")]
mod openai;
#[cfg(feature = "openai")]
mod responses;
#[cfg(feature = "openai")]
pub use openai::{OpenAiModel, OpenAiOptions};
#[cfg(feature = "openai")]
pub use responses::OpenAiResponsesModel;

/// One chunk of a summary stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StreamChunk {
    /// Provisional text.
    Delta(String),
    /// The end, with evidence.
    Done(Evidence),
}

/// Model evidence of a finished answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Evidence {
    /// Model that answered.
    pub model_id: String,
    /// Usage.
    pub usage: Usage,
    /// Finish reason.
    pub finish_reason: String,
}

/// A buffered answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelResult {
    /// The summary.
    pub text: String,
    /// Evidence.
    pub evidence: Evidence,
}

/// A model failure, typed so the audit record can tell a provider refusal
/// from a timeout, a budget stop or a transport failure; members only ever
/// see the generic notice.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelError {
    /// What kind of failure (`providerRefusal`, `timeout`, `budgetStop`, `other`).
    pub kind: foldline_core::stream::FailureKind,
    /// The audit detail.
    pub detail: String,
}

impl ModelError {
    /// A failure of `kind`.
    pub fn new(kind: foldline_core::stream::FailureKind, detail: impl Into<String>) -> Self {
        ModelError {
            kind,
            detail: detail.into(),
        }
    }

    /// A provider's HTTP status, typed: 402 and 429 are budget stops, 408 and
    /// 504 timeouts, other 4xx refusals, anything else `other`.
    pub fn from_status(code: u16, body: &str) -> Self {
        use foldline_core::stream::FailureKind as K;
        let kind = match code {
            402 | 429 => K::BudgetStop,
            408 | 504 => K::Timeout,
            400..=499 => K::ProviderRefusal,
            _ => K::Other,
        };
        ModelError::new(kind, format!("provider answered HTTP {code}: {body}"))
    }
}

impl std::fmt::Display for ModelError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.detail)
    }
}

impl From<String> for ModelError {
    fn from(detail: String) -> Self {
        ModelError::new(foldline_core::stream::FailureKind::Other, detail)
    }
}

impl From<&str> for ModelError {
    fn from(detail: &str) -> Self {
        ModelError::from(detail.to_owned())
    }
}

/// What foldline needs from a model. Errors are typed audit reasons.
pub trait Model {
    /// Stream a summary of the packet into `sink`. An `Err` means the stream
    /// ended early (dropped or failed); what was sunk before it is provisional.
    ///
    /// # Errors
    /// The reason the stream ended early.
    fn stream(&self, packet: &Packet, sink: &mut dyn FnMut(StreamChunk)) -> Result<(), ModelError>;
    /// The same through a buffered call.
    ///
    /// # Errors
    /// The reason the call failed.
    fn complete(&self, packet: &Packet) -> Result<ModelResult, ModelError>;
}

/// The offline default: a deterministic extractive summarizer
/// ([`crate::summarizer`]) that covers the whole folded range and keeps the
/// facts later turns need (numbers, names, decisions, open questions, tool
/// outcomes), carrying the previous summary's facts forward on their merit.
/// No network, no randomness: the same packet gives the same summary.
#[derive(Debug, Clone, Copy, Default)]
pub struct Extractive;

impl Extractive {
    /// Summarize a packet.
    pub fn summarize(packet: &Packet) -> String {
        crate::summarizer::summarize(packet)
    }
}

impl Extractive {
    /// The offline summarizer bounding its summaries by the host's token
    /// counter too (the driver's `count_tokens`): its summary's tokens, as
    /// counted, fit the packet's token bound, and its evidence reports them.
    pub fn counting(count: impl Fn(&str) -> u64 + Send + Sync + 'static) -> CountedExtractive {
        CountedExtractive {
            count: std::sync::Arc::new(count),
        }
    }
}

/// [`Extractive`] with the host's token counter ([`Extractive::counting`]).
#[derive(Clone)]
pub struct CountedExtractive {
    count: std::sync::Arc<dyn Fn(&str) -> u64 + Send + Sync>,
}

impl std::fmt::Debug for CountedExtractive {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CountedExtractive")
    }
}

/// The offline summarizer before session 4, kept as the baseline of the
/// summary evaluation (`tests/eval/run`): the first sentence of each frozen
/// turn from the oldest on, the first third of the previous summary, and
/// "(+N more turns)" when the bounds run out.
#[derive(Debug, Clone, Copy, Default)]
pub struct FirstSentences;

/// Model id the extractive summarizer reports.
pub const EXTRACTIVE_MODEL: &str = "foldline-extractive-2";

impl FirstSentences {
    /// Summarize a packet.
    pub fn summarize(packet: &Packet) -> String {
        // Within both limits: the token estimate of the text must fit maxTokens too.
        let by_tokens = packet.bounds.max_tokens.saturating_sub(4).saturating_mul(4);
        let max = packet.bounds.max_chars.min(by_tokens) as usize;
        let mut lines: Vec<String> = Vec::new();
        for m in packet
            .messages
            .iter()
            .filter(|m| m.role == CompactorRole::User)
        {
            if let Some(prev) = m.content.strip_prefix("Previous summary") {
                let body = prev.split_once('\n').map(|x| x.1).unwrap_or("");
                let keep: String = body.chars().take(max / 3).collect();
                lines.push(keep.trim().to_owned());
            } else if m.content.starts_with("Conversation to summarize") {
                // A turn's line opens `[source N · who] `; the lines of
                // its text never do (the core escapes them).
                for line in m.content.lines().filter(|l| l.starts_with("[source ")) {
                    if let Some((head, text)) = line.split_once("] ") {
                        let who = head.rsplit(" · ").next().unwrap_or("").to_owned();
                        lines.push(format!("{who}: {}", first_sentence(text, 160)));
                    }
                }
            } else if m.content.starts_with("[untrusted-history-summary") {
                for line in m.content.lines().filter(|l| l.starts_with("[source ")) {
                    if let Some((_, text)) = line.split_once("] ") {
                        lines.push(format!("correction: {}", first_sentence(text, 160)));
                    }
                }
            }
        }
        let mut out = String::new();
        let total = lines.len();
        for (i, l) in lines.iter().enumerate() {
            let tail = format!("\n(+{} more turns)", total - i);
            if out.chars().count() + l.chars().count() + 1 + tail.chars().count() > max {
                out.push_str(&tail);
                break;
            }
            if !out.is_empty() {
                out.push('\n');
            }
            out.push_str(l);
        }
        crate::summarizer::finish(out, max)
    }
}

fn first_sentence(text: &str, max: usize) -> String {
    let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
    let end = flat
        .find(['.', '?', '!'])
        .map(|i| i + 1)
        .unwrap_or(flat.len());
    let s = &flat[..end];
    if s.chars().count() > max {
        let mut t: String = s.chars().take(max - 1).collect();
        t.push('…');
        t
    } else {
        s.to_owned()
    }
}

/// An offline summarizer's answer, its output tokens by the estimate.
fn offline(text: String, model_id: &str, packet: &Packet) -> ModelResult {
    let tokens = foldline_core::turn::estimate_tokens(text.chars().count() as u64);
    offline_counted(text, model_id, packet, tokens)
}

/// An offline summarizer's answer of `output_tokens`.
fn offline_counted(
    text: String,
    model_id: &str,
    packet: &Packet,
    output_tokens: u64,
) -> ModelResult {
    ModelResult {
        evidence: Evidence {
            model_id: model_id.into(),
            usage: Usage {
                input_tokens: packet.input.tokens,
                output_tokens,
            },
            finish_reason: "stop".into(),
        },
        text,
    }
}

fn stream_lines(r: ModelResult, sink: &mut dyn FnMut(StreamChunk)) {
    for line in r.text.split_inclusive('\n') {
        sink(StreamChunk::Delta(line.to_owned()));
    }
    sink(StreamChunk::Done(r.evidence));
}

impl Model for FirstSentences {
    fn stream(&self, packet: &Packet, sink: &mut dyn FnMut(StreamChunk)) -> Result<(), ModelError> {
        stream_lines(self.complete(packet)?, sink);
        Ok(())
    }

    fn complete(&self, packet: &Packet) -> Result<ModelResult, ModelError> {
        Ok(offline(
            FirstSentences::summarize(packet),
            "foldline-first-sentences-1",
            packet,
        ))
    }
}

impl Model for Extractive {
    fn stream(&self, packet: &Packet, sink: &mut dyn FnMut(StreamChunk)) -> Result<(), ModelError> {
        stream_lines(self.complete(packet)?, sink);
        Ok(())
    }

    fn complete(&self, packet: &Packet) -> Result<ModelResult, ModelError> {
        Ok(offline(
            Extractive::summarize(packet),
            EXTRACTIVE_MODEL,
            packet,
        ))
    }
}

/// A model from a function that summarizes a packet (call your provider
/// with `packet.messages`, the compactor's prompt, ready to use), as the JS
/// package's `modelFromFunction`: its text is streamed as one chunk, with
/// usage estimated when the function does not report it. Build it with
/// [`model_fn`]. An async function runs through a runtime handle:
/// `model_fn(move |p| handle.block_on(summarize(p)))` from a driver that
/// itself runs on `spawn_blocking` (docs/embedding.md).
#[derive(Debug, Clone, Copy)]
pub struct FnModel<F>(pub F);

/// A [`Model`] from `f`: `Ok(text)` is the summary, `Err` a typed failure.
pub fn model_fn<F>(f: F) -> FnModel<F>
where
    F: Fn(&Packet) -> Result<String, ModelError>,
{
    FnModel(f)
}

impl<F> Model for FnModel<F>
where
    F: Fn(&Packet) -> Result<String, ModelError>,
{
    fn stream(&self, packet: &Packet, sink: &mut dyn FnMut(StreamChunk)) -> Result<(), ModelError> {
        let r = self.complete(packet)?;
        sink(StreamChunk::Delta(r.text));
        sink(StreamChunk::Done(r.evidence));
        Ok(())
    }

    fn complete(&self, packet: &Packet) -> Result<ModelResult, ModelError> {
        Ok(offline((self.0)(packet)?, "function", packet))
    }
}

/// A boxed model is a model, so a host can pick one at run time
/// (`Box<dyn Model + Send + Sync>`).
impl<T: Model + ?Sized> Model for Box<T> {
    fn stream(&self, packet: &Packet, sink: &mut dyn FnMut(StreamChunk)) -> Result<(), ModelError> {
        (**self).stream(packet, sink)
    }
    fn complete(&self, packet: &Packet) -> Result<ModelResult, ModelError> {
        (**self).complete(packet)
    }
}

impl Model for CountedExtractive {
    fn stream(&self, packet: &Packet, sink: &mut dyn FnMut(StreamChunk)) -> Result<(), ModelError> {
        stream_lines(self.complete(packet)?, sink);
        Ok(())
    }

    fn complete(&self, packet: &Packet) -> Result<ModelResult, ModelError> {
        let text = crate::summarizer::summarize_counted(packet, &*self.count);
        let tokens = (self.count)(&text);
        Ok(offline_counted(text, EXTRACTIVE_MODEL, packet, tokens))
    }
}
