//! `settle`: turn one model answer into a bound, hashed boundary.
//!
//! The model supplies only a bounded plain-text summary and its run evidence.
//! The core checks the text (non-empty, within bounds, text only, not cut off)
//! and binds every other field from the packet, so the model never writes
//! provenance. Nothing is trimmed: a summary that breaks a rule is rejected.

use foldline_derive::{Decode, Encode};
use serde::Serialize;

use crate::canonical;
use crate::error::{self, Code, Error, Result};
use crate::records::boundary::{Boundary, RunEvidence, Sizes, Stats, Usage, OUTPUT_CONTRACT};
use crate::records::packet::Packet;
use crate::records::turn::estimate_tokens;
use crate::render::envelope;

/// What the compactor model returned, with its evidence.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Encode, Decode)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ModelOutput {
    /// The packet the run was given.
    pub packet_id: String,
    /// The run id the host assigned.
    pub run_id: String,
    /// The model that answered.
    pub model_id: String,
    /// Provider-reported usage.
    #[serde(default)]
    pub usage: Usage,
    /// Provider-reported finish reason (`stop`, `length`, ...).
    #[serde(default)]
    pub finish_reason: String,
    /// The summary text.
    pub summary: String,
}

/// A settle request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Encode, Decode)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SettleRequest {
    /// The persisted packet.
    pub packet: Packet,
    /// The model's output.
    pub output: ModelOutput,
    /// The run id the host dispatched, when it wants that checked too.
    #[serde(default)]
    pub expected_run_id: Option<String>,
}

/// Finish reasons that mean the text was cut off.
const TRUNCATING: [&str; 3] = ["length", "max_tokens", "max_output_tokens"];

/// Settle a model output against its packet.
///
/// # Errors
/// `run_mismatch`, `empty_summary`, `summary_not_text`, `summary_too_long`,
/// `summary_truncated`, or `divergent_hash` for a packet whose id does not
/// match its content.
pub fn settle(req: &SettleRequest) -> Result<Boundary> {
    if !req.packet.id_is_intact() {
        return Err(Error::new(
            Code::DivergentHash,
            "the packet's id does not match its content",
        )
        .with_ids([req.packet.id.clone()]));
    }
    settle_intact(req)
}

/// [`settle`] of a packet whose id is known to match its content (checked
/// over the bytes it came in: `settle_bytes`).
pub(crate) fn settle_intact(req: &SettleRequest) -> Result<Boundary> {
    let packet = &req.packet;
    let out = &req.output;
    check_run(req)?;
    check_summary(&out.summary, packet, out)?;

    let summary_env = envelope::summary_chars(&out.summary);
    let summary = Sizes {
        chars: summary_env,
        tokens: estimate_tokens(summary_env),
    };
    let s = packet.stats;
    let backlog = s.backlog.map(|b| b.size).unwrap_or_default();
    let after = Sizes {
        chars: error::sum([
            s.pinned.chars,
            summary.chars,
            backlog.chars,
            s.retained_tail.chars,
        ])?,
        tokens: error::sum([
            s.pinned.tokens,
            summary.tokens,
            backlog.tokens,
            s.retained_tail.tokens,
        ])?,
    };
    let id_digest = canonical::sha256(format!("{}\n{}", packet.id, out.run_id).as_bytes());
    let mut b = Boundary {
        id: format!(
            "boundary:{}",
            &id_digest[canonical::HASH_PREFIX.len()..][..32]
        ),
        hash: String::new(),
        sensitive: true,
        output_contract: OUTPUT_CONTRACT.to_owned(),
        ruleset_version: packet.ruleset_version.clone(),
        declaration_fingerprint: packet.declaration_fingerprint.clone(),
        target_id: packet.target_id.clone(),
        compactor_id: packet.compactor_id.clone(),
        history_agents: packet.history_agents.clone(),
        route: packet.route.clone(),
        trigger: packet.trigger,
        previous: packet.previous.clone(),
        frontier: packet.frontier.clone(),
        covered_through_turn_id: packet.covered_through_turn_id.clone(),
        covered_through_seq: packet.covered_through_seq,
        head_seq: packet.head_seq,
        policy: packet.policy,
        stats: Stats {
            summary,
            after,
            ..s
        },
        input: packet.input.clone(),
        amendment_hash: packet.amendment.as_ref().map(|a| a.hash.clone()),
        absorbed: packet
            .amendment
            .as_ref()
            .map(|a| a.absorbed())
            .unwrap_or_default(),
        packet_id: packet.id.clone(),
        run: RunEvidence {
            run_id: out.run_id.clone(),
            model_id: out.model_id.clone(),
            usage: out.usage,
            finish_reason: out.finish_reason.clone(),
        },
        summary: out.summary.clone(),
        preview: preview(&out.summary, packet.bounds.preview_chars),
    };
    b.hash = b.compute_hash();
    Ok(b)
}

/// The output answers this packet from the run the host dispatched:
/// `run_mismatch`.
fn check_run(req: &SettleRequest) -> Result<()> {
    let (packet, out) = (&req.packet, &req.output);
    if out.packet_id != packet.id {
        return Err(Error::new(
            Code::RunMismatch,
            "the model output names another packet than the one being settled",
        )
        .with_ids([out.packet_id.clone(), packet.id.clone()]));
    }
    if out.run_id.trim().is_empty() {
        return Err(Error::new(
            Code::RunMismatch,
            "the model output carries no run id",
        ));
    }
    match &req.expected_run_id {
        Some(expected) if expected != &out.run_id => Err(Error::new(
            Code::RunMismatch,
            "the model output comes from another run than the one dispatched",
        )
        .with_ids([out.run_id.clone(), expected.clone()])),
        _ => Ok(()),
    }
}

fn check_summary(text: &str, packet: &Packet, out: &ModelOutput) -> Result<()> {
    if text.trim().is_empty() {
        return Err(Error::new(Code::EmptySummary, "the summary is empty"));
    }
    if let Some((i, c)) = text
        .chars()
        .enumerate()
        .find(|(_, c)| c.is_control() && *c != '\n' && *c != '\t')
    {
        return Err(Error::new(
            Code::SummaryNotText,
            format!(
                "the summary contains control character U+{:04X} at position {i}",
                c as u32
            ),
        ));
    }
    let n = envelope::chars(text);
    if n > packet.bounds.max_chars {
        return Err(Error::new(
            Code::SummaryTooLong,
            format!(
                "the summary has {n} characters, over the limit of {}",
                packet.bounds.max_chars
            ),
        ));
    }
    if out.usage.output_tokens > packet.bounds.max_tokens {
        return Err(Error::new(
            Code::SummaryTooLong,
            format!(
                "the summary used {} output tokens, over the limit of {}",
                out.usage.output_tokens, packet.bounds.max_tokens
            ),
        ));
    }
    if TRUNCATING.contains(&out.finish_reason.as_str()) {
        return Err(Error::new(
            Code::SummaryTruncated,
            format!(
                "the model stopped with finish reason `{}`: the summary is cut off",
                out.finish_reason
            ),
        ));
    }
    Ok(())
}

/// A bounded preview: whitespace collapsed, at most `max` characters, an
/// ellipsis when cut.
pub fn preview(summary: &str, max: u64) -> String {
    let collapsed = summary.split_whitespace().collect::<Vec<_>>().join(" ");
    let max = max as usize;
    if collapsed.chars().count() <= max {
        return collapsed;
    }
    let mut s: String = collapsed.chars().take(max.saturating_sub(1)).collect();
    s.push('…');
    s
}
