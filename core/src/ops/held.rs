//! Held events: what a host already sent for one conversation, kept between
//! calls, so a message costs what is new, not the whole live window again.
//!
//! A host that calls `step` and `select` on every message sends the same
//! turns each time (everything after the chain head): parsing and decoding
//! them is most of a call. Instead it can [`hold`] them once — and then only
//! each new event — and make those calls through [`call`], which puts the
//! held events in front of the request's own. The answer is byte-identical to
//! the plain call with the held events written out in the request (tested
//! below and in the JS package), so holding is a cache, never a rule.
//!
//! The store of [`Held`] values lives with the host's instance (the
//! WebAssembly module keeps them by a host-chosen id); the core only says how
//! one is updated and used. A host must assume a held value can be lost (a
//! re-instantiated module) and send it again.

use foldline_derive::Decode;
use serde::Serialize;

use crate::api::{envelope, parse, run_bytes};
use crate::event::Event;
use crate::packet::Packet;

/// What a host holds for one conversation.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Held {
    /// Events in journal order, as `plan`, `step` and `select` take them.
    pub events: Vec<Event>,
    /// The prepared warm candidate's packet, offered to `step` as `view.warm`.
    pub warm: Option<Packet>,
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
}

/// Apply a JSON [`HoldRequest`] to `held`; answers the envelope of the
/// number of events now held. A request that does not decode changes nothing.
pub fn hold(held: &mut Held, input: &[u8]) -> Vec<u8> {
    envelope(parse::<HoldRequest>(input).map(|r| {
        if r.reset {
            *held = Held::default();
        }
        if r.clear_warm {
            held.warm = None;
        }
        if r.warm.is_some() {
            held.warm = r.warm;
        }
        held.events.extend(r.events);
        held.events.len() as u64
    }))
}

/// An entry point with the held events in front of the request's own:
/// `step` (its `view`, and `view.warm` when the request has none) and
/// `select`; any other entry runs as [`crate::api::call`] does.
pub fn call(held: &Held, entry: &str, input: &[u8]) -> Vec<u8> {
    let front = |own: Vec<Event>| held.events.iter().cloned().chain(own).collect();
    match entry {
        "step" => envelope(parse(input).and_then(|mut r: crate::StepRequest| {
            if let Some(view) = r.view.as_mut() {
                view.events = front(std::mem::take(&mut view.events));
                if view.warm.is_none() {
                    view.warm = held.warm.clone();
                }
            }
            crate::step(r)
        })),
        "select" => envelope(parse(input).and_then(|mut r: crate::SelectRequest| {
            r.events = front(std::mem::take(&mut r.events));
            crate::select(&r)
        })),
        other => run_bytes(other, input),
    }
}
