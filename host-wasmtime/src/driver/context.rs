//! The model-bound context a driver answers: the core's `select` over what
//! the driver has read, within its limit as the host counts (the texts the
//! core measures by its estimate counted too), and a member's context that
//! finds no room for their compression's fragments sent without them.
//! js/src/driver/context.ts (`selectContext`) is its twin.

use std::collections::BTreeSet;

use foldline_core::event::Event;
use foldline_core::select::{SelectRequest, Selection};
use foldline_core::Code;

use super::{slim, ContextOptions, Driver};
use crate::error::{HostError, Result};
use crate::journal::Journal;
use crate::model::Model;

impl<J: Journal, M: Model> Driver<J, M> {
    /// The context [`Driver::context`] answers. A member's context that
    /// finds no room for their compression's fragments beside the pinned
    /// turns and the newest turn (`over_budget`, `tail_turn_too_large`:
    /// a conversation admitted before the members' surface existed, whose
    /// admission left the fragments no room) goes without the member's
    /// state, as every context went before — its manifest then carries no
    /// `member` — rather than fail every time the member writes.
    pub(super) fn select_context(
        &self,
        conversation: &str,
        o: ContextOptions,
        read_new: bool,
    ) -> Result<Selection> {
        match self.select_counted(conversation, &o, read_new) {
            Err(HostError::Core(e)) if o.member.is_some() && no_room(&e) => {
                let bare = ContextOptions { member: None, ..o };
                self.select_counted(conversation, &bare, false)
            }
            r => r,
        }
    }

    /// The context within its limit as the host counts
    /// ([`Driver::uncounted`]).
    fn select_counted(
        &self,
        conversation: &str,
        o: &ContextOptions,
        read_new: bool,
    ) -> Result<Selection> {
        let (sel, uncounted) = self.select_within(conversation, o, read_new, o.limit)?;
        let m = &sel.manifest;
        match uncounted {
            // As the host counts, the texts the core estimates (the
            // summary, the amendment, the prompt) put the context over its
            // limit: it is selected again within the limit less their excess
            // (when the pinned turns, the summary and the prompt leave the
            // newest turn room there; else it goes as it was).
            n if n > 0 && m.sizes.total.saturating_add(n) > m.limit => {
                let within = Some(m.limit.saturating_sub(n));
                match self.select_within(conversation, o, false, within) {
                    Ok((fit, _)) => Ok(fit),
                    Err(HostError::Core(e)) if no_room(&e) => Ok(sel),
                    Err(e) => Err(e),
                }
            }
            _ => Ok(sel),
        }
    }

    /// One `select` of [`Driver::select_context`] within `limit`, with the
    /// tokens the host counts beyond the core's estimate of the texts it
    /// measures itself ([`Driver::uncounted`]).
    fn select_within(
        &self,
        conversation: &str,
        o: &ContextOptions,
        read_new: bool,
        limit: Option<u64>,
    ) -> Result<(Selection, u64)> {
        let mut uncounted = 0;
        let slim = |events: &[Event]| {
            let memory = self.foldline.limits().memory_bytes;
            slim::slimmed(
                events,
                &self.declaration,
                limit,
                memory,
                (&BTreeSet::new(), 0),
            )
        };
        self.read_and_call(
            conversation,
            "select",
            read_new,
            Some(&slim),
            |_, res, _, events| {
                uncounted = self.uncounted(
                    res.head.as_ref().or(res.carried.as_ref()),
                    res.amendment.as_ref(),
                    o.prompt.as_deref(),
                );
                SelectRequest {
                    declaration: self.declaration.clone(),
                    route: (self.route_of)(conversation),
                    frontier: res.frontier,
                    head: res.head,
                    amendment: res.amendment,
                    events,
                    prompt: o.prompt.clone(),
                    prompt_sender: o.prompt_sender.clone(),
                    format: o.format,
                    limit,
                    render: true,
                    member: o.member,
                    carried: res.carried,
                }
            },
        )
        .map(|sel| (sel, uncounted))
    }
}

/// Whether a `select` failed for lack of room: the pinned turns, the
/// envelopes and the prompt over the limit, or the newest turn past what
/// they leave.
fn no_room(e: &foldline_core::Error) -> bool {
    matches!(e.code, Code::OverBudget | Code::TailTurnTooLarge)
}
