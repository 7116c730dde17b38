//! The chat timeline: messages plus compaction dividers.
//!
//! Derived only from durable events (messages, boundaries, manual-compaction
//! task events), so every viewer sees the same timeline and a reload loses
//! nothing. A divider is not a chat message. A failed compaction — automatic
//! or manual — shows one failed divider with the generic notice (an outage of
//! consecutive automatic failures, one); its reason stays in the audit
//! record, never member-facing.

use std::collections::{BTreeMap, BTreeSet};

use foldline_derive::{Decode, Encode};
use serde::Serialize;

use crate::error::Result;
use crate::history::reconstruct::{reconstruct, Reconstruction};
use crate::ops::stream::MEMBER_NOTICE;
use crate::records::event::{Event, TaskEvent, TaskState, TriggerKind};
use crate::records::turn::{render_parts, Part, Role};

/// A timeline request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Encode, Decode)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TimelineRequest {
    /// The conversation's durable events.
    pub events: Vec<Event>,
    /// Ids of the boundaries the resolved chain accepts (`resolve`'s
    /// `accepted`). When given, only these draw as completed dividers: a
    /// tampered, forked or retired boundary never does, and a manual task
    /// whose boundary was rejected shows as failed. Without it (a stateless
    /// caller) a boundary draws only when it holds together on its own: its
    /// hash is its content's, it links by id and hash to a drawn previous
    /// boundary (or starts a chain), and no other boundary claims its chain
    /// slot; the resolved chain also checks packets, epochs and declarations.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accepted: Option<Vec<String>>,
    /// Ids of boundaries of retired epochs (`resolve`'s
    /// `retiredBoundaries`), with `accepted`: those that hold together on
    /// their own still draw, as completed dividers marked `retired` — an
    /// upgrade does not make history disappear from the chat.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub retired: Vec<String>,
    /// One page of the timeline instead of all of it (a chat page opening
    /// a long conversation, or scrolling back): the latest `limit` items
    /// at positions below `before`. An item's position is a message's
    /// `sourceSeq` or a divider's `throughSeq`; the items of one position
    /// are never split, so a page may hold a few more than `limit`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<u64>,
    /// With `limit` (or alone: every item below it), only items at
    /// positions below this one (the previous page's `earlier`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub before: Option<u64>,
}

/// State of a divider.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Encode, Decode)]
#[serde(rename_all = "camelCase")]
pub enum DividerState {
    /// A manual compaction is running.
    Pending,
    /// A boundary exists.
    Completed,
    /// The compaction failed (the generic notice; the reason is audited).
    Failed,
}

/// One timeline item.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Encode, Decode)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum TimelineItem {
    /// A chat message.
    #[serde(rename_all = "camelCase")]
    Message {
        /// Turn id.
        turn_id: String,
        /// Source sequence.
        source_seq: u64,
        /// Role.
        role: Role,
        /// The member who sent it (in a room, who of its members).
        #[serde(default, skip_serializing_if = "String::is_empty")]
        sender: String,
        /// Text as shown.
        text: String,
        /// The turn's parts as data (text, tool calls and results), for a
        /// client that draws tool activity itself.
        parts: Vec<Part>,
        /// Delivered late.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        late: bool,
        /// Corrected.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        corrected: bool,
        /// Known only by metadata: the client shows its own copy.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        metadata_only: bool,
    },
    /// A compaction divider.
    #[serde(rename_all = "camelCase")]
    Divider {
        /// Automatic or manual.
        kind: TriggerKind,
        /// Pending, completed or failed.
        state: DividerState,
        /// First source sequence covered (completed), if known.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        from_seq: Option<u64>,
        /// Last source sequence covered, or the head the task was accepted at.
        through_seq: u64,
        /// Turns folded (completed dividers).
        count: u64,
        /// The boundary (completed dividers).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        boundary_id: Option<String>,
        /// The manual task, if any.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        task_id: Option<String>,
        /// Generic notice (failed dividers).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        notice: Option<String>,
        /// Made under a retired policy (ruleset or declaration): still what
        /// the chat folded, no longer the chain compaction builds on.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        retired: bool,
    },
}

/// The timeline.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Encode, Decode)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Timeline {
    /// Items in order.
    pub items: Vec<TimelineItem>,
    /// A page left earlier items out: the `before` that asks for them (one
    /// past the last item left out).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub earlier: Option<u64>,
}

/// Derive the timeline.
///
/// # Errors
/// `conflicting_turn` for contradictory events.
pub fn timeline(req: &TimelineRequest) -> Result<Timeline> {
    let recon = reconstruct(&req.events)?;
    let sound = match (&req.accepted, req.retired.is_empty()) {
        (Some(_), true) => BTreeSet::new(),
        _ => sound_boundaries(&recon),
    };
    let retired = |id: &str| {
        req.accepted.is_some() && req.retired.iter().any(|x| x == id) && sound.contains(id)
    };
    let accepted = |id: &str| match &req.accepted {
        Some(a) => a.iter().any(|x| x == id) || retired(id),
        None => sound.contains(id),
    };
    let tasks = latest_tasks(&recon.tasks);
    let mut items = Items::new();
    // A message is drawn (its text rendered, its parts copied) only once it
    // is known to be on the page: a page of a long conversation costs its
    // own items, not every message's.
    for t in recon.turns.iter().filter(|t| !t.pinned) {
        items.insert((t.source_seq, 0, t.index, &t.turn_id), Entry::Turn(t));
    }
    boundary_dividers(&mut items, &recon, &tasks, &accepted, &retired);
    task_dividers(&mut items, &recon, &tasks, &accepted);
    failure_dividers(&mut items, &recon);
    // A page: the last `limit` items below `before`, widened so that no
    // position is split.
    let drawn: Vec<(u64, Entry<'_>)> = items.into_iter().map(|(k, i)| (k.0, i)).collect();
    let end = req
        .before
        .map_or(drawn.len(), |b| drawn.partition_point(|d| d.0 < b));
    // In u64: a limit past usize (32 bits in WebAssembly) is every item.
    let mut start = req
        .limit
        .map_or(0, |l| (end as u64).saturating_sub(l) as usize);
    while start > 0 && start < end && drawn[start - 1].0 == drawn[start].0 {
        start -= 1;
    }
    // The previous page ends with the last item left out.
    let earlier = start.checked_sub(1).map(|i| drawn[i].0.saturating_add(1));
    let items = drawn
        .into_iter()
        .take(end)
        .skip(start)
        .map(|(_, e)| match e {
            Entry::Turn(t) => message(t),
            Entry::Item(i) => i,
        })
        .collect();
    Ok(Timeline { items, earlier })
}

/// The boundaries that hold together without the resolved chain: each
/// one's hash is its content's, it links by id and hash to a sound previous
/// boundary (or starts a chain at its frontier), and it is the only
/// boundary in its chain slot (its epoch and what it follows). A tampered
/// boundary, a fork, and everything after them are left out.
pub(crate) fn sound_boundaries(recon: &Reconstruction) -> BTreeSet<String> {
    let slot = |b: &crate::records::boundary::Boundary| {
        let after = b
            .previous
            .as_ref()
            .map_or(&b.frontier.id, |p| &p.boundary_id);
        (b.declaration_fingerprint.clone(), after.clone())
    };
    let mut claims: BTreeMap<(String, String), usize> = BTreeMap::new();
    for b in &recon.boundaries {
        *claims.entry(slot(b)).or_default() += 1;
    }
    let mut order: Vec<&crate::records::boundary::Boundary> = recon.boundaries.iter().collect();
    order.sort_by(|a, b| (a.covered_through_seq, &a.id).cmp(&(b.covered_through_seq, &b.id)));
    let mut sound: BTreeMap<&str, &str> = BTreeMap::new();
    for b in order {
        let linked = match &b.previous {
            None => true,
            Some(p) => sound.get(p.boundary_id.as_str()) == Some(&p.boundary_hash.as_str()),
        };
        if linked && claims[&slot(b)] == 1 && b.hash == b.compute_hash() {
            sound.insert(&b.id, &b.hash);
        }
    }
    sound.into_keys().map(str::to_owned).collect()
}

/// The timeline's items by (position, rank, tiebreak, id); rank 0 is a
/// message, 1 a divider.
type Items<'a> = BTreeMap<(u64, u8, u32, &'a str), Entry<'a>>;

/// An item before the page is chosen: a message still as its turn.
enum Entry<'a> {
    Turn(&'a crate::records::turn::Turn),
    Item(TimelineItem),
}

/// A turn as the chat shows it.
fn message(t: &crate::records::turn::Turn) -> TimelineItem {
    TimelineItem::Message {
        turn_id: t.turn_id.clone(),
        source_seq: t.source_seq,
        role: t.role,
        sender: t.sender.clone(),
        text: render_parts(&t.parts),
        parts: t.parts.clone(),
        late: t.late,
        corrected: t.corrected,
        metadata_only: t.metadata_only,
    }
}

/// The latest state of each manual task.
fn latest_tasks(all: &[TaskEvent]) -> BTreeMap<&str, &TaskEvent> {
    let mut tasks: BTreeMap<&str, &TaskEvent> = BTreeMap::new();
    for t in all {
        if tasks
            .get(t.task_id.as_str())
            .is_none_or(|prev| t.state > prev.state)
        {
            tasks.insert(&t.task_id, t);
        }
    }
    tasks
}

/// A completed divider for each boundary the chain accepts, naming the
/// manual task that made it.
fn boundary_dividers<'a>(
    items: &mut Items<'a>,
    recon: &'a Reconstruction,
    tasks: &BTreeMap<&str, &TaskEvent>,
    accepted: &dyn Fn(&str) -> bool,
    retired: &dyn Fn(&str) -> bool,
) {
    let mut task_of_boundary: BTreeMap<&str, &str> = BTreeMap::new();
    for t in tasks.values() {
        if let (TaskState::Completed, Some(b)) = (t.state, &t.boundary_id) {
            task_of_boundary.insert(b, &t.task_id);
        }
    }
    for b in recon.boundaries.iter().filter(|b| accepted(&b.id)) {
        let from = b
            .previous
            .as_ref()
            .map(|p| p.covered_through_seq.saturating_add(1))
            .unwrap_or(b.frontier.start_seq);
        items.insert(
            (b.covered_through_seq, 1, 0, &b.id),
            Entry::Item(TimelineItem::Divider {
                kind: b.trigger,
                state: DividerState::Completed,
                from_seq: Some(from),
                through_seq: b.covered_through_seq,
                count: b.input.turn_count,
                boundary_id: Some(b.id.clone()),
                task_id: task_of_boundary.get(b.id.as_str()).map(|s| s.to_string()),
                notice: None,
                retired: retired(&b.id),
            }),
        );
    }
}

/// A manual task's divider where no accepted boundary shows it: pending,
/// failed (with the generic notice; also when its boundary was rejected),
/// or completed.
fn task_dividers<'a>(
    items: &mut Items<'a>,
    recon: &Reconstruction,
    tasks: &BTreeMap<&'a str, &'a TaskEvent>,
    accepted: &dyn Fn(&str) -> bool,
) {
    let boundary_ids: Vec<&str> = recon
        .boundaries
        .iter()
        .map(|b| b.id.as_str())
        .filter(|id| accepted(id))
        .collect();
    for t in tasks.values() {
        let (state, notice) = match t.state {
            TaskState::Requested => (DividerState::Pending, None),
            TaskState::Failed => (DividerState::Failed, Some(MEMBER_NOTICE.to_owned())),
            TaskState::Completed => match &t.boundary_id {
                Some(b) if boundary_ids.contains(&b.as_str()) => continue, // shown by its boundary
                Some(b) if !accepted(b) => (DividerState::Failed, Some(MEMBER_NOTICE.to_owned())),
                _ => (DividerState::Completed, None),
            },
        };
        items.insert(
            (t.head_seq, 1, 1, &t.task_id),
            Entry::Item(TimelineItem::Divider {
                kind: TriggerKind::Manual,
                state,
                from_seq: None,
                through_seq: t.head_seq,
                count: 0,
                boundary_id: t.boundary_id.clone(),
                task_id: Some(t.task_id.clone()),
                notice,
                retired: false,
            }),
        );
    }
}

/// Failed automatic compactions: the member sees the generic notice once
/// per outage, not once per attempt. Consecutive failures on one chain head
/// (nothing was folded between them) draw one divider, at the head the
/// latest of them tried to fold (a manual one shows through its task).
fn failure_dividers<'a>(items: &mut Items<'a>, recon: &'a Reconstruction) {
    let mut failed: Vec<&crate::records::event::FailureEvent> = recon
        .failures
        .iter()
        .filter(|f| f.trigger == TriggerKind::Automatic)
        .collect();
    crate::order::sort_by(&mut failed, |a, b| {
        (a.head_seq, &a.run_id).cmp(&(b.head_seq, &b.run_id))
    });
    for (i, f) in failed.iter().enumerate() {
        let outage_goes_on = failed
            .get(i + 1)
            .is_some_and(|next| next.previous_boundary_id == f.previous_boundary_id);
        if outage_goes_on {
            continue;
        }
        items.insert(
            (f.head_seq, 1, 2, &f.run_id),
            Entry::Item(TimelineItem::Divider {
                kind: TriggerKind::Automatic,
                state: DividerState::Failed,
                from_seq: None,
                through_seq: f.head_seq,
                count: 0,
                boundary_id: None,
                task_id: None,
                notice: Some(MEMBER_NOTICE.to_owned()),
                retired: false,
            }),
        );
    }
}
