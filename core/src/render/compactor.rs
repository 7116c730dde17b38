//! What the compactor model sees: its system prompt (built-in, appended or
//! replaced by the declaration), the reference documents, the previous
//! summary, the covered-history amendment and the transcript of the turns
//! being folded — the packet's rendered messages.

use crate::error::{self, Code, Error, Result};
use crate::records::amendment::Amendment;
use crate::records::boundary::ChainHead;
use crate::records::declaration::{Declaration, InstructionMode};
use crate::records::packet::{CompactorMessage, CompactorRole, BUILTIN_PROMPT};
use crate::records::turn::{Role, Turn};
use crate::render::envelope;

/// The compactor's system prompt for a declaration (built-in, appended or
/// replaced), asking for a summary of at most `max_chars` characters (the
/// packet's bound: the declaration's, or tighter beside a long newest turn).
pub fn prompt(decl: &Declaration, max_chars: u64) -> String {
    let builtin = BUILTIN_PROMPT.replace("{max}", &max_chars.to_string());
    match &decl.instructions {
        None => builtin,
        Some(i) => match i.mode {
            InstructionMode::Replace => i.text.clone(),
            InstructionMode::Append => format!("{builtin}\n\nAdditional instructions:\n{}", i.text),
        },
    }
}

/// The summary a compaction starts from.
#[derive(Debug, Clone, Copy)]
pub enum Prior<'a> {
    /// The first compaction of a chain that starts from nothing.
    Nothing,
    /// The chain's head.
    Previous(&'a ChainHead),
    /// After an upgrade, the retired epoch's last summary the frontier
    /// carries over (untrusted input from an earlier policy).
    Carried(&'a ChainHead),
}

/// What the compactor model is sent for a frozen prefix: the system prompt
/// with the reference documents among the pinned turns (within their
/// budget), the previous summary, the covered-history amendment, and the
/// transcript of the frozen turns.
///
/// # Errors
/// `prefix_over_bounds` when the documents exceed their budget.
pub fn messages(
    decl: &Declaration,
    max_chars: u64,
    pinned: &[&Turn],
    prior: Prior<'_>,
    amendment: Option<&Amendment>,
    frozen: &[&Turn],
) -> Result<Vec<CompactorMessage>> {
    let mut system = prompt(decl, max_chars);
    let docs: Vec<&&Turn> = pinned.iter().filter(|t| t.role == Role::Document).collect();
    if !docs.is_empty() {
        let doc_chars = error::sum(docs.iter().map(|t| t.chars))?;
        if doc_chars > decl.documents.budget_chars {
            return Err(Error::new(
                Code::PrefixOverBounds,
                format!(
                    "identity/memory documents measure {doc_chars} characters, over their budget of {}",
                    decl.documents.budget_chars
                ),
            )
            .with_ids(docs.iter().map(|t| t.turn_id.clone())));
        }
        system.push_str(
            "\n\nReference documents (to interpret names and obligations; do not summarize them):",
        );
        for d in docs {
            system.push('\n');
            system.push_str(&crate::records::turn::render_parts(&d.parts));
        }
    }
    let mut out = vec![CompactorMessage {
        role: CompactorRole::System,
        content: system,
    }];
    let (label, h) = match prior {
        Prior::Nothing => ("", None),
        Prior::Previous(h) => ("Previous summary", Some(h)),
        Prior::Carried(h) => ("Summary carried over from an earlier policy", Some(h)),
    };
    if let Some(h) = h {
        out.push(CompactorMessage {
            role: CompactorRole::User,
            content: format!(
                "{label} (covers history through source {}):\n{}",
                h.covered_through_seq, h.summary
            ),
        });
    }
    if let Some(a) = amendment {
        out.push(CompactorMessage {
            role: CompactorRole::User,
            content: envelope::amendment_text(a),
        });
    }
    let mut transcript = format!(
        "Conversation to summarize (sources {} to {}):",
        frozen[0].source_seq,
        frozen[frozen.len() - 1].source_seq
    );
    for t in frozen {
        transcript.push('\n');
        transcript.push_str(&envelope::transcript_line(t));
    }
    out.push(CompactorMessage {
        role: CompactorRole::User,
        content: transcript,
    });
    Ok(out)
}
