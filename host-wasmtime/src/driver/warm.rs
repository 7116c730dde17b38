//! Warm candidates: a packet and its summary prepared ahead of need, under
//! a lease of their own, used only while the core says they are still valid.

use foldline_core::run::EffectResult;
use foldline_core::settle::SettleRequest;
use foldline_core::validate::ValidateRequest;

use super::Driver;
use crate::error::Result;
use crate::journal::Journal;
use crate::model::{Evidence, Model, ModelResult};

impl<J: Journal, M: Model> Driver<J, M> {
    /// Prepare the conversation's warm candidate, if one is waiting: summarize
    /// its persisted packet under the candidate's own lease
    /// (`warm_lease_ms`), check the summary with `settle`, and keep it for
    /// the compaction that is due later, which then makes no model call. A
    /// host runs this off the critical path (a server in the background; the
    /// `foldline` program between messages). `Ok(false)`: nothing to prepare.
    ///
    /// # Errors
    /// Journal and runtime failures; a model failure only leaves the
    /// candidate unprepared.
    pub fn prepare_warm(&self, conversation: &str) -> Result<bool> {
        let Some(packet) = self.with_cache(conversation, |c| match &c.warm {
            Some((p, None)) => Some(p.clone()),
            _ => None,
        }) else {
            return Ok(false);
        };
        let key = format!("{conversation}#warm");
        if self
            .journal
            .acquire_lease(&key, &self.holder, (self.clock)(), self.warm_lease_ms)?
            .is_none()
        {
            return Ok(false);
        }
        // Given back also if the model panics.
        struct Warm<'a, J: Journal>(&'a J, &'a str, &'a str);
        impl<J: Journal> Drop for Warm<'_, J> {
            fn drop(&mut self) {
                let _ = self.0.release_lease(self.1, self.2);
            }
        }
        let warm = Warm(&self.journal, &key, &self.holder);
        let answer = self.renewing(&key, self.warm_lease_ms, || {
            let call =
                |buffered| self.call_model(&packet, "warm-check", buffered, self.model_timeout_ms);
            let first = call(false);
            // The one buffered replay, by the loop's own rule.
            match &first {
                EffectResult::Model {
                    content_received,
                    output,
                    error,
                } if foldline_core::stream::replay_buffered(
                    *content_received,
                    output.is_some(),
                    error.as_ref().map(|e| e.failure),
                ) =>
                {
                    call(true)
                }
                _ => first,
            }
        });
        std::mem::forget(warm);
        self.journal.release_lease(&key, &self.holder)?;
        let EffectResult::Model {
            output: Some(output),
            ..
        } = answer
        else {
            return Ok(false);
        };
        let checked = self.validate(ValidateRequest::Settle(Box::new(SettleRequest {
            packet: packet.clone(),
            output: output.clone(),
            expected_run_id: None,
        })));
        if checked.is_err() {
            return Ok(false);
        }
        let answer = ModelResult {
            text: output.summary,
            evidence: Evidence {
                model_id: output.model_id,
                usage: output.usage,
                finish_reason: output.finish_reason,
            },
        };
        Ok(self.with_cache(conversation, |c| match &mut c.warm {
            Some((p, slot)) if p.id == packet.id => {
                *slot = Some(answer);
                true
            }
            _ => false,
        }))
    }
}
