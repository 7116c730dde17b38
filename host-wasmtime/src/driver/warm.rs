//! Warm candidates: a packet and its summary prepared ahead of need, under
//! a lease of their own, used only while the core says they are still valid.

use foldline_core::plan::Trigger;
use foldline_core::run::Finished;

use super::{Driver, RunSpec};
use crate::error::Result;
use crate::journal::Journal;
use crate::model::Model;

impl<J: Journal, M: Model> Driver<J, M> {
    /// Prepare the conversation's warm candidate, if one is waiting: under
    /// the candidate's own lease (`warm_lease_ms`), a run of the core's loop
    /// with `prepare_warm` summarizes its persisted packet and checks the
    /// summary with `settle` (writing nothing); the summary is kept for the
    /// compaction that is due later, which then makes no model call. A
    /// host runs this off the critical path (a server in the background; the
    /// `foldline` program between messages). `Ok(false)`: nothing to prepare.
    ///
    /// # Errors
    /// Journal and runtime failures; a model failure only leaves the
    /// candidate unprepared.
    pub fn prepare_warm(&self, conversation: &str) -> Result<bool> {
        let Some(packet_id) = self.with_cache(conversation, |c| match &c.warm {
            Some((p, None)) => Some(p.id.clone()),
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
        // The core's loop prepares it (`prepareWarm`): the streaming rule
        // and its one buffered replay, the answer checked by settle,
        // nothing written — the same steps as in the JS driver.
        let run = RunSpec {
            trigger: Trigger::Automatic,
            task: None,
            owner: self.owner.clone(),
            end_interrupted_only: false,
            prepare_warm: true,
        };
        let finished = self.drive(conversation, &run, &mut |_| {});
        std::mem::forget(warm);
        self.journal.release_lease(&key, &self.holder)?;
        let Finished::Prepared { summary } = finished? else {
            return Ok(false);
        };
        Ok(self.with_cache(conversation, |c| match &mut c.warm {
            Some((p, slot)) if p.id == packet_id => {
                *slot = Some(*summary);
                true
            }
            _ => false,
        }))
    }
}
