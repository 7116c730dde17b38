//! Held events: what a host already sent for one conversation, kept between
//! calls, so a message costs what is new, not the whole live window again.
//!
//! A host that calls `step` and `select` on every message sends the same
//! turns each time (everything after the chain head): parsing and decoding
//! them is most of a call. Instead it can [`hold`] them once — and then only
//! each new event — and make those calls through [`call`], which puts the
//! held events in front of the request's own. The view's chain state (the
//! declaration, route, owner, frontier, head and amendment, which change
//! only with the chain) can be held too: a starting `step` without a view
//! then plans from it, and `context` is `select` with it. Every answer is
//! byte-identical to the plain call with what is held written out in the
//! request (`core/tests/held.rs`, and the JS package's tests), so holding is a
//! cache, never a rule.
//!
//! The store of [`Held`] values lives with the host's instance (the
//! WebAssembly module keeps them by a host-chosen id); the core only says how
//! one is updated and used. A host must assume a held value can be lost (a
//! re-instantiated module) and send it again.

use foldline_derive::Decode;
use serde::Serialize;

use crate::entry::api::{envelope, parse, run_bytes};
use crate::error::{Code, Error, Result};
use crate::history::reconstruct::{reconstruct, Reconstruction};
use crate::ops::plan::PlanRequest;
use crate::ops::select::{SelectRequest, Selection};
use crate::records::event::Event;
use crate::records::packet::Packet;
use crate::records::turn::Part;
use crate::render::format::Format;

/// What a host holds for one conversation.
#[derive(Debug, Clone, Default)]
pub struct Held {
    /// Events in journal order, as `plan`, `step` and `select` take them.
    pub events: Vec<Event>,
    /// The prepared warm candidate's packet, offered to `step` as `view.warm`.
    pub warm: Option<Packet>,
    /// The view's chain state (declaration, route, owner, frontier, head,
    /// amendment; no events): a starting `step` without a view plans from
    /// it, and `context` selects with it.
    pub view: Option<PlanRequest>,
    /// `events` reconstructed, once, for every call until they change.
    recon: Option<Reconstruction>,
}

/// An update of what is held.
#[derive(Debug, Clone, PartialEq, Serialize, Decode)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HoldRequest {
    /// Drop what is held before anything is added.
    #[serde(default)]
    pub reset: bool,
    /// Events to add after what is held, in order.
    #[serde(default)]
    pub events: Vec<Event>,
    /// The prepared warm candidate's packet to hold (replacing any).
    #[serde(default)]
    pub warm: Option<Packet>,
    /// Drop the held warm candidate.
    #[serde(default)]
    pub clear_warm: bool,
    /// The view's chain state to hold, replacing any (its `events` are not
    /// kept: the held ones are used).
    #[serde(default)]
    pub view: Option<PlanRequest>,
}

/// What `context` takes: the held view and events selected, as `select`
/// with these options.
#[derive(Debug, Clone, PartialEq, Serialize, Decode)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ContextRequest {
    /// As `select`'s.
    #[serde(default)]
    pub prompt: Option<Vec<Part>>,
    /// As `select`'s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_sender: Option<String>,
    /// As `select`'s.
    #[serde(default)]
    pub format: Format,
    /// As `select`'s.
    #[serde(default)]
    pub limit: Option<u64>,
    /// As `select`'s (default true).
    #[serde(default = "yes")]
    pub render: bool,
    /// As `select`'s: the member's compression state at the run's start.
    #[serde(default)]
    pub member: Option<crate::ops::member::seams::MemberInput>,
}

fn yes() -> bool {
    true
}

/// Apply a JSON [`HoldRequest`] to `held`; answers the envelope of the
/// number of events now held. A request that does not decode changes nothing.
pub fn hold(held: &mut Held, input: &[u8]) -> Vec<u8> {
    envelope(parse::<HoldRequest>(input).map(|r| {
        if r.reset {
            *held = Held::default();
        }
        if !r.events.is_empty() {
            held.recon = None;
        }
        if r.clear_warm {
            held.warm = None;
        }
        if r.warm.is_some() {
            held.warm = r.warm;
        }
        if let Some(mut view) = r.view {
            view.events = Vec::new();
            held.view = Some(view);
        }
        held.events.extend(r.events);
        held.events.len() as u64
    }))
}

/// An entry point with the held events in front of the request's own:
/// `step` (its `view`, and `view.warm` when the request has none) and
/// `select`; any other entry runs as [`crate::api::call`] does. The held
/// events are lent to the call, not copied, and held again after it; when
/// the request brings none of its own, they are reconstructed once for every
/// call until they change.
pub fn call(held: &mut Held, entry: &str, input: &[u8]) -> Vec<u8> {
    match entry {
        "step" => envelope(parse(input).and_then(|mut r: crate::StepRequest| {
            // A step at the start of a run (or after its `read`, with the
            // state the read came with) without a view plans from the held one.
            let starting = r
                .state
                .as_ref()
                .is_none_or(|s| s.stage == crate::ops::run::Stage::Start);
            let view = match r.view.take() {
                None if starting => held.view.clone(),
                view => view,
            };
            let Some(mut view) = view else {
                return crate::ops::run::step(r);
            };
            if view.warm.is_none() {
                view.warm = held.warm.clone();
            }
            let own = std::mem::take(&mut view.events);
            lend(held, own, |events, recon| {
                view.events = events;
                let out = crate::ops::run::step_viewing(r, Some(&mut view), recon);
                (std::mem::take(&mut view.events), out)
            })
        })),
        "select" => envelope(parse(input).and_then(|r| select(held, r))),
        "context" => envelope(parse(input).and_then(|c: ContextRequest| {
            let Some(v) = &held.view else {
                return Err(Error::new(
                    Code::InvalidRequest,
                    "`context` selects with the held view: hold one first",
                ));
            };
            let r = SelectRequest {
                declaration: v.declaration.clone(),
                route: v.route.clone(),
                frontier: v.frontier.clone(),
                head: v.head.clone(),
                amendment: v.amendment.clone(),
                events: Vec::new(),
                prompt: c.prompt,
                prompt_sender: c.prompt_sender,
                format: c.format,
                limit: c.limit,
                render: c.render,
                member: c.member,
                carried: v.carried.clone(),
            };
            select(held, r)
        })),
        other => run_bytes(other, input),
    }
}

/// `select` with the held events in front of the request's own.
fn select(held: &mut Held, mut r: SelectRequest) -> Result<Selection> {
    let own = std::mem::take(&mut r.events);
    lend(held, own, |events, recon| {
        r.events = events;
        let out = crate::ops::select::select_from(&r, recon);
        (std::mem::take(&mut r.events), out)
    })
}

/// Run `f` on the held events followed by `own` — lent, not copied: `f`
/// hands them back and the held ones are held again — and, when `own` is
/// empty, on their reconstruction, made once and kept until they change.
fn lend<T>(
    held: &mut Held,
    own: Vec<Event>,
    f: impl FnOnce(Vec<Event>, Option<&Reconstruction>) -> (Vec<Event>, T),
) -> T {
    let recon = match own.is_empty() {
        true => held.recon.take().or_else(|| reconstruct(&held.events).ok()),
        false => None,
    };
    let n = held.events.len();
    let mut all = std::mem::take(&mut held.events);
    all.extend(own);
    let (mut all, out) = f(all, recon.as_ref());
    all.truncate(n);
    held.events = all;
    if recon.is_some() {
        held.recon = recon;
    }
    out
}
