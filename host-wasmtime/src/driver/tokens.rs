//! Real token counts: the host's tokenizer counts each message as it is
//! appended or corrected, with its framing, so a token budget works from
//! the counts the provider will make instead of the core's estimate
//! (`ceil(chars / 4) + 4`), which undercounts code and most languages
//! other than English. The JS driver's `countTokens` and
//! `messageOverheadTokens` (js/src/driver/append.ts, `counted`).

use std::sync::Arc;

use foldline_core::amendment::Amendment;
use foldline_core::boundary::ChainHead;
use foldline_core::declaration::Budget;
use foldline_core::event::Event;
use foldline_core::turn::{parts_chars, Part};

use super::Driver;
use crate::journal::Journal;
use crate::model::Model;
use crate::sync::lock;

/// A host's token counter: the tokens of one text (tiktoken-rs, a
/// provider's counter).
pub type CountTokens = Arc<dyn Fn(&str) -> u64 + Send + Sync>;

/// Tokens of framing each counted message costs beside its content (role,
/// message separators) unless set: the core's estimate's own overhead.
/// OpenAI's chat framing is 3 per message.
pub use foldline_core::defaults::MESSAGE_OVERHEAD_TOKENS;

/// The tokens of a message of `parts` as a provider counts it: its text,
/// tool calls (name and arguments), tool results and approval reasons,
/// and `framing`. Reasoning and approval requests count nothing here (the
/// core counts reasoning where it is sent).
pub(crate) fn message_tokens(count: &CountTokens, framing: u64, parts: &[Part]) -> u64 {
    parts.iter().fold(framing, |n, p| {
        n.saturating_add(match p {
            Part::Text { text } => count(text),
            Part::ToolCall {
                name, arguments, ..
            } => count(name).saturating_add(count(arguments)),
            Part::ToolResult { content, .. } => count(content),
            Part::ApprovalResponse { reason, .. } => count(reason),
            _ => 0,
        })
    })
}

impl<J: Journal, M: Model> Driver<J, M> {
    /// Each message of `events` that carries no count given its tokens, as
    /// [`Driver::append`] counts them, when the host counts
    /// (`DriverBuilder::count_tokens`); unchanged otherwise. For a host
    /// that writes events itself (the program's `import`).
    pub fn count_tokens_of(&self, events: &mut [Event]) {
        let Some(count) = &self.count_tokens else {
            return;
        };
        for e in events {
            if let Event::Message(m) | Event::LateDelivery(m) = e {
                if m.tokens.is_none() {
                    m.tokens = Some(message_tokens(
                        count,
                        self.message_overhead_tokens,
                        &m.parts,
                    ));
                }
            }
        }
    }

    /// The tokens the host's counter gives the texts `select` measures by
    /// the estimate itself — the summary in force, the amendment's turns
    /// and the prompt (stored turns carry their counts) — beyond that
    /// estimate (`ceil(chars / 4)`, framing aside). Zero when the host does
    /// not count or in character mode.
    pub(super) fn uncounted(
        &self,
        summary: Option<&ChainHead>,
        amendment: Option<&Amendment>,
        prompt: Option<&[Part]>,
    ) -> u64 {
        let Some(count) = &self.count_tokens else {
            return 0;
        };
        if !matches!(self.declaration.budget, Budget::Tokens { .. }) {
            return 0;
        }
        let beyond = |parts: &[Part]| {
            let estimate = parts_chars(parts).div_ceil(4);
            message_tokens(count, 0, parts).saturating_sub(estimate)
        };
        let summary = summary.map_or(0, |h| self.summary_uncounted(count, h));
        let amended = amendment.map_or(0, |a| {
            a.entries
                .iter()
                .map(|e| beyond(&e.parts))
                .fold(0, u64::saturating_add)
        });
        let prompt = prompt.map_or(0, beyond);
        summary.saturating_add(amended).saturating_add(prompt)
    }

    /// [`Driver::uncounted`] of a chain head's summary, counted once per
    /// boundary (the memo is let go whole past 4,096 boundaries).
    fn summary_uncounted(&self, count: &CountTokens, head: &ChainHead) -> u64 {
        if let Some(n) = lock(&self.summaries_counted).get(&head.boundary_id) {
            return *n;
        }
        let estimate = (head.summary.chars().count() as u64).div_ceil(4);
        let n = count(&head.summary).saturating_sub(estimate);
        let mut memo = lock(&self.summaries_counted);
        if memo.len() >= 4096 {
            memo.clear();
        }
        memo.insert(head.boundary_id.clone(), n);
        n
    }

    /// The tokens of a message of `parts`, when the host counts.
    pub(super) fn tokens_of(&self, parts: &[Part]) -> Option<u64> {
        let count = self.count_tokens.as_ref()?;
        Some(message_tokens(count, self.message_overhead_tokens, parts))
    }
}
