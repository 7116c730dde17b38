//! The OpenAI Responses API (`POST /v1/responses`) as a summarizer: for the
//! models OpenAI serves only there, and any server that speaks it.

use foldline_core::boundary::Usage;
use foldline_core::defaults;
use foldline_core::packet::Packet;
use serde::Deserialize;

use super::{http, Evidence, Model, ModelError, ModelResult, OpenAiOptions, StreamChunk};

/// Summaries through the OpenAI Responses API, streamed as server-sent
/// events (`response.output_text.delta`, then `response.completed`). The
/// packet's messages go as `input`, nothing is stored at the provider
/// (`store: false`), and the cap goes as `max_output_tokens`, which holds a
/// reasoning model's reasoning too: by default
/// [`defaults::REASONING_ROOM_TOKENS`] more than the summary's limit
/// ([`OpenAiOptions::max_tokens`] sets it).
pub struct OpenAiResponsesModel {
    o: OpenAiOptions,
    agent: ureq::Agent,
}

/// A response as far as a summary needs it.
#[derive(Deserialize, Default)]
struct Answer {
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    status: Option<String>,
    #[serde(default)]
    output: Vec<Item>,
    #[serde(default)]
    usage: Option<AnswerUsage>,
    #[serde(default)]
    incomplete_details: Option<Reason>,
    #[serde(default)]
    error: Option<Message>,
}
#[derive(Deserialize, Default)]
struct Item {
    #[serde(default, rename = "type")]
    kind: String,
    #[serde(default)]
    content: Vec<Text>,
}
#[derive(Deserialize, Default)]
struct Text {
    #[serde(default, rename = "type")]
    kind: String,
    #[serde(default)]
    text: String,
}
#[derive(Deserialize, Default, Clone, Copy)]
struct AnswerUsage {
    #[serde(default)]
    input_tokens: u64,
    #[serde(default)]
    output_tokens: u64,
    #[serde(default)]
    output_tokens_details: Option<http::OutputDetails>,
}
#[derive(Deserialize, Default)]
struct Reason {
    #[serde(default)]
    reason: Option<String>,
}
#[derive(Deserialize, Default)]
struct Message {
    #[serde(default)]
    message: Option<String>,
}
/// A streamed event as far as a summary needs it.
#[derive(Deserialize, Default)]
struct Streamed {
    #[serde(default, rename = "type")]
    kind: String,
    #[serde(default)]
    delta: Option<String>,
    #[serde(default)]
    response: Option<Answer>,
    #[serde(default)]
    message: Option<String>,
}

impl Answer {
    /// The evidence a chat completion would give: `stop`, `length` when
    /// the cap ended it, `content_filter` when a filter did.
    fn evidence(&self, model: &str) -> Evidence {
        let reason = self
            .incomplete_details
            .as_ref()
            .and_then(|d| d.reason.as_deref());
        let finish = match (self.status.as_deref(), reason) {
            (Some("completed"), _) => "stop",
            (_, Some("max_output_tokens")) => "length",
            (_, Some("content_filter")) => "content_filter",
            (other, _) => other.unwrap_or_default(),
        }
        .to_owned();
        let usage = self.usage.unwrap_or_default();
        Evidence {
            model_id: self.model.clone().unwrap_or_else(|| model.to_owned()),
            usage: Usage {
                input_tokens: usage.input_tokens,
                output_tokens: http::summary_tokens(
                    usage.output_tokens,
                    usage.output_tokens_details,
                ),
            },
            finish_reason: finish,
        }
    }

    /// A failed response's message.
    fn failure(&self, fallback: Option<&str>) -> ModelError {
        let m = self.error.as_ref().and_then(|e| e.message.as_deref());
        ModelError::from(format!(
            "the response failed: {}",
            m.or(fallback).unwrap_or_default()
        ))
    }
}

impl OpenAiResponsesModel {
    /// A new adapter.
    pub fn new(o: OpenAiOptions) -> Self {
        let agent = ureq::AgentBuilder::new().timeout(o.timeout).build();
        OpenAiResponsesModel { o, agent }
    }

    fn post(&self, packet: &Packet, stream: bool) -> Result<ureq::Response, ModelError> {
        let input = http::messages(packet);
        let room = packet.bounds.max_tokens + defaults::REASONING_ROOM_TOKENS;
        let body = serde_json::json!({
            "model": self.o.model,
            "input": input,
            "max_output_tokens": self.o.max_tokens.unwrap_or(room),
            "store": false,
            "stream": stream,
        });
        let url = format!("{}/responses", self.o.base_url.trim_end_matches('/'));
        http::send(&self.agent, &url, self.o.api_key.as_deref(), &body).map_err(http::failure)
    }
}

impl Model for OpenAiResponsesModel {
    fn stream(&self, packet: &Packet, sink: &mut dyn FnMut(StreamChunk)) -> Result<(), ModelError> {
        for data in http::data_lines(self.post(packet, true)?) {
            let e: Streamed = serde_json::from_str(&data?)
                .map_err(|e| ModelError::from(format!("bad stream event: {e}")))?;
            match (e.kind.as_str(), e.response) {
                ("response.output_text.delta", _) => {
                    if let Some(t) = e.delta.filter(|t| !t.is_empty()) {
                        sink(StreamChunk::Delta(t));
                    }
                }
                ("response.completed" | "response.incomplete", Some(r)) => {
                    let evidence = r.evidence(&self.o.model);
                    if let Some(e) = http::cut_short(&evidence.finish_reason) {
                        return Err(e);
                    }
                    sink(StreamChunk::Done(evidence));
                    return Ok(());
                }
                ("response.failed", Some(r)) => return Err(r.failure(None)),
                ("error", _) => return Err(Answer::default().failure(e.message.as_deref())),
                _ => {}
            }
        }
        Err("stream dropped: ended without response.completed".into())
    }

    fn complete(&self, packet: &Packet) -> Result<ModelResult, ModelError> {
        let r: Answer = self
            .post(packet, false)?
            .into_json()
            .map_err(|e| ModelError::from(format!("bad response: {e}")))?;
        if r.status.as_deref() == Some("failed") {
            return Err(r.failure(None));
        }
        let text = r
            .output
            .iter()
            .filter(|o| o.kind == "message")
            .flat_map(|o| &o.content)
            .filter(|c| c.kind == "output_text")
            .map(|c| c.text.as_str())
            .collect();
        let evidence = r.evidence(&self.o.model);
        if let Some(e) = http::cut_short(&evidence.finish_reason) {
            return Err(e);
        }
        Ok(ModelResult { text, evidence })
    }
}
