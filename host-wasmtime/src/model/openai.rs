//! The OpenAI-compatible chat-completions adapter (OpenAI, Ollama, vLLM,
//! llama.cpp), over ureq (feature `openai`).

use std::sync::atomic::Ordering;
use std::time::Duration;

use foldline_core::boundary::Usage;
use foldline_core::defaults;
use foldline_core::packet::Packet;

use super::{http, Evidence, Model, ModelError, ModelResult, StreamChunk};

/// Options of the OpenAI-compatible adapter.
#[derive(Debug, Clone)]
pub struct OpenAiOptions {
    /// Base URL up to `/v1`.
    pub base_url: String,
    /// Model name.
    pub model: String,
    /// Bearer key (`FOLDLINE_API_KEY` or `OPENAI_API_KEY` when not given).
    pub api_key: Option<String>,
    /// Request timeout.
    pub timeout: Duration,
    /// The output token cap sent (default: the packet's summary limit). A
    /// reasoning model counts its reasoning within it: give it room.
    pub max_tokens: Option<u64>,
}

impl OpenAiOptions {
    /// Options with the key from the environment when not given.
    pub fn new(
        base_url: impl Into<String>,
        model: impl Into<String>,
        api_key: Option<String>,
    ) -> Self {
        OpenAiOptions {
            base_url: base_url.into(),
            model: model.into(),
            api_key: api_key
                .or_else(|| std::env::var("FOLDLINE_API_KEY").ok())
                .or_else(|| std::env::var("OPENAI_API_KEY").ok()),
            timeout: Duration::from_secs(120),
            max_tokens: None,
        }
    }
}

/// Chat completions over HTTP with server-sent-event streaming.
///
/// The output cap goes as `max_tokens`, which every OpenAI-compatible server
/// takes, until the endpoint refuses it (OpenAI's reasoning models answer
/// `400 unsupported_parameter` and ask for `max_completion_tokens`): the
/// request is sent again once with `max_completion_tokens`, and every
/// later one with it, the cap then [`defaults::REASONING_ROOM_TOKENS`] more
/// than the summary's unless [`OpenAiOptions::max_tokens`] sets it.
pub struct OpenAiModel {
    o: OpenAiOptions,
    agent: ureq::Agent,
    completion_tokens: std::sync::atomic::AtomicBool,
}

/// Whether a `400` answer refuses `max_tokens` for `max_completion_tokens`
/// (OpenAI: `{"error": {"param": "max_tokens", "code":
/// "unsupported_parameter", "message": "… Use 'max_completion_tokens'
/// instead."}}`).
fn refuses_max_tokens(text: &str) -> bool {
    let v: serde_json::Value = serde_json::from_str(text).unwrap_or_default();
    let e = &v["error"];
    e["param"] == "max_tokens"
        || e["message"]
            .as_str()
            .is_some_and(|m| m.contains("max_completion_tokens"))
}

#[derive(serde::Deserialize, Default)]
struct Completion {
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    choices: Vec<Choice>,
    #[serde(default)]
    usage: Option<ApiUsage>,
}
#[derive(serde::Deserialize, Default)]
struct Choice {
    #[serde(default)]
    message: Option<Content>,
    #[serde(default)]
    delta: Option<Content>,
    #[serde(default)]
    finish_reason: Option<String>,
}
#[derive(serde::Deserialize, Default)]
struct Content {
    #[serde(default)]
    content: Option<String>,
}
#[derive(serde::Deserialize, Default, Clone, Copy)]
struct ApiUsage {
    #[serde(default)]
    prompt_tokens: u64,
    #[serde(default)]
    completion_tokens: u64,
    #[serde(default)]
    completion_tokens_details: Option<http::OutputDetails>,
}

impl OpenAiModel {
    /// A new adapter.
    pub fn new(o: OpenAiOptions) -> Self {
        let agent = ureq::AgentBuilder::new().timeout(o.timeout).build();
        OpenAiModel {
            o,
            agent,
            completion_tokens: Default::default(),
        }
    }

    fn post(&self, packet: &Packet, stream: bool) -> Result<ureq::Response, ModelError> {
        let messages = http::messages(packet);
        let mut body = serde_json::json!({
            "model": self.o.model,
            "messages": messages,
            "stream": stream,
        });
        if stream {
            body["stream_options"] = serde_json::json!({"include_usage": true});
        }
        let url = format!("{}/chat/completions", self.o.base_url.trim_end_matches('/'));
        loop {
            let completion = self.completion_tokens.load(Ordering::Relaxed);
            if completion {
                // A reasoning model's cap holds its reasoning too.
                let room = packet.bounds.max_tokens + defaults::REASONING_ROOM_TOKENS;
                body["max_completion_tokens"] = self.o.max_tokens.unwrap_or(room).into();
            } else {
                body["max_tokens"] = self.o.max_tokens.unwrap_or(packet.bounds.max_tokens).into();
            }
            match http::send(&self.agent, &url, self.o.api_key.as_deref(), &body) {
                Err(e) if !completion && matches!(*e, ureq::Error::Status(400, _)) => {
                    let ureq::Error::Status(_, r) = *e else {
                        unreachable!("matched as a 400")
                    };
                    let text = r.into_string().unwrap_or_default();
                    if !refuses_max_tokens(&text) {
                        return Err(ModelError::from_status(400, &http::clip(&text)));
                    }
                    self.completion_tokens.store(true, Ordering::Relaxed);
                    if let Some(o) = body.as_object_mut() {
                        o.remove("max_tokens");
                    }
                }
                other => return other.map_err(http::failure),
            }
        }
    }

    fn usage(u: Option<ApiUsage>) -> Usage {
        let u = u.unwrap_or_default();
        Usage {
            input_tokens: u.prompt_tokens,
            output_tokens: http::summary_tokens(u.completion_tokens, u.completion_tokens_details),
        }
    }
}

impl Model for OpenAiModel {
    fn stream(&self, packet: &Packet, sink: &mut dyn FnMut(StreamChunk)) -> Result<(), ModelError> {
        let resp = self.post(packet, true)?;
        let mut model = self.o.model.clone();
        let mut usage = None;
        let mut finish = String::new();
        for data in http::data_lines(resp) {
            let data = data?;
            let data = data.as_str();
            if data == "[DONE]" {
                if let Some(e) = http::cut_short(&finish) {
                    return Err(e);
                }
                sink(StreamChunk::Done(Evidence {
                    model_id: model,
                    usage: Self::usage(usage),
                    finish_reason: finish,
                }));
                return Ok(());
            }
            let c: Completion = serde_json::from_str(data)
                .map_err(|e| ModelError::from(format!("bad stream chunk: {e}")))?;
            if let Some(m) = c.model {
                model = m;
            }
            if c.usage.is_some() {
                usage = c.usage;
            }
            if let Some(choice) = c.choices.first() {
                if let Some(f) = &choice.finish_reason {
                    finish = f.clone();
                }
                if let Some(t) = choice.delta.as_ref().and_then(|d| d.content.clone()) {
                    if !t.is_empty() {
                        sink(StreamChunk::Delta(t));
                    }
                }
            }
        }
        Err("stream dropped: ended without [DONE]".into())
    }

    fn complete(&self, packet: &Packet) -> Result<ModelResult, ModelError> {
        let resp = self.post(packet, false)?;
        let c: Completion = resp
            .into_json()
            .map_err(|e| ModelError::from(format!("bad response: {e}")))?;
        let choice = c.choices.first();
        let finish = choice.and_then(|ch| ch.finish_reason.as_deref());
        if let Some(e) = finish.and_then(http::cut_short) {
            return Err(e);
        }
        Ok(ModelResult {
            text: choice
                .and_then(|ch| ch.message.as_ref())
                .and_then(|m| m.content.clone())
                .unwrap_or_default(),
            evidence: Evidence {
                model_id: c.model.unwrap_or_else(|| self.o.model.clone()),
                usage: Self::usage(c.usage),
                finish_reason: choice
                    .and_then(|ch| ch.finish_reason.clone())
                    .unwrap_or_default(),
            },
        })
    }
}
