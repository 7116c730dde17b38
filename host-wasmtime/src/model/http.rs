//! What the OpenAI-protocol adapters share: the request with its bearer key,
//! a failed request as a typed model failure, and the `data:` payloads of a
//! server-sent-event stream.

use std::io::{BufRead, BufReader};

use foldline_core::packet::{CompactorRole, Packet};
use foldline_core::stream::FailureKind;

use super::ModelError;

/// The packet's rendered messages as the OpenAI APIs take them: `{"role",
/// "content"}`, the chat's `messages` and the Responses API's `input` alike.
pub(super) fn messages(packet: &Packet) -> Vec<serde_json::Value> {
    packet
        .messages
        .iter()
        .map(|m| {
            let role = match m.role {
                CompactorRole::System => "system",
                CompactorRole::User => "user",
            };
            serde_json::json!({"role": role, "content": m.content})
        })
        .collect()
}

/// POST `body` as JSON to `url`, with the bearer key when there is one.
///
/// # Errors
/// The request's failure (boxed: `ureq::Error` is large).
pub(super) fn send(
    agent: &ureq::Agent,
    url: &str,
    key: Option<&str>,
    body: &serde_json::Value,
) -> Result<ureq::Response, Box<ureq::Error>> {
    let mut req = agent.post(url).set("content-type", "application/json");
    if let Some(k) = key {
        req = req.set("authorization", &format!("Bearer {k}"));
    }
    req.send_string(&body.to_string()).map_err(Box::new)
}

/// The first 300 characters of a provider's answer, for the audit record.
pub(super) fn clip(text: &str) -> String {
    text.chars().take(300).collect()
}

/// A request that failed, as a model failure: an HTTP status by its class, a
/// transport error (a timeout as one).
pub(super) fn failure(e: Box<ureq::Error>) -> ModelError {
    match *e {
        ureq::Error::Status(code, r) => {
            ModelError::from_status(code, &clip(&r.into_string().unwrap_or_default()))
        }
        other => {
            let detail = format!("transport: {other}");
            if detail.contains("timed out") {
                ModelError::new(FailureKind::Timeout, detail)
            } else {
                ModelError::from(detail)
            }
        }
    }
}

/// The `data:` payloads of an event stream, in order; a read that fails is
/// a dropped stream (a timeout as one).
pub(super) fn data_lines(resp: ureq::Response) -> impl Iterator<Item = Result<String, ModelError>> {
    BufReader::new(resp.into_reader())
        .lines()
        .filter_map(|line| match line {
            Err(e) => {
                let kind = if matches!(
                    e.kind(),
                    std::io::ErrorKind::TimedOut | std::io::ErrorKind::WouldBlock
                ) {
                    FailureKind::Timeout
                } else {
                    FailureKind::Other
                };
                Some(Err(ModelError::new(kind, format!("stream dropped: {e}"))))
            }
            Ok(line) => line
                .trim()
                .strip_prefix("data:")
                .map(|d| Ok(d.trim().to_owned())),
        })
}

/// The reasoning tokens an OpenAI usage names among its output tokens
/// (`completion_tokens_details` of a chat completion, `output_tokens_details`
/// of a response).
#[derive(serde::Deserialize, Default, Clone, Copy)]
pub(super) struct OutputDetails {
    #[serde(default)]
    reasoning_tokens: u64,
}

/// The summary's own output tokens: a reasoning model's usage counts its
/// reasoning among them, which the summary's cap (`settle` refuses a
/// summary over `maxTokens`) is not about.
pub(super) fn summary_tokens(output: u64, details: Option<OutputDetails>) -> u64 {
    output.saturating_sub(details.unwrap_or_default().reasoning_tokens)
}

/// A finish that cut the summary short other than at its cap (which
/// `settle` refuses as `summary_truncated`), as a model failure: a content
/// filter's stop (`content_filter`; a response `incomplete` for it) and a
/// response `cancelled` leave a partial summary that would otherwise settle
/// as whole, and the facts after the cut would be lost with the turns it
/// covers. js/src/model/http.ts `cutShort` is its twin.
pub(super) fn cut_short(finish: &str) -> Option<ModelError> {
    let kind = match finish {
        "content_filter" => FailureKind::ProviderRefusal,
        "incomplete" | "cancelled" => FailureKind::Other,
        _ => return None,
    };
    Some(ModelError::new(
        kind,
        format!("the provider cut the summary short: finish reason `{finish}`"),
    ))
}
