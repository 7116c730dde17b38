//! `resolve`: walk the boundary chain of the current epoch and fail closed on
//! anything that is not an intact, advancing, single chain.
//!
//! An epoch is the ruleset version plus the target declaration fingerprint.
//! Boundaries and frontiers of retired epochs stay inspectable and are listed,
//! but are ineligible, so an upgrade starts a new frontier instead of bricking
//! the conversation. Every current boundary is re-settled from its packet and
//! run evidence; any field that the core would not have bound is a fabricated
//! run.

use std::collections::BTreeMap;

use foldline_derive::{Decode, Encode};
use serde::Serialize;

use crate::error::{Code, Error, Result};
use crate::history::agree::agree;
use crate::history::amend::{self, Amendment, Snapshot};
use crate::history::reconstruct::reconstruct;
use crate::history::standing::admitted;
use crate::ops::settle::{settle, ModelOutput, SettleRequest};
use crate::records::boundary::{Boundary, ChainHead, InputTurn};
use crate::records::declaration::Declaration;
use crate::records::event::Event;
use crate::records::frontier::Frontier;
use crate::records::packet::Packet;
use crate::records::turn::Route;

/// A resolve request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Encode, Decode)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ResolveRequest {
    /// The registered target declaration.
    pub declaration: Declaration,
    /// The registered compactor declaration, checked for agreement when given.
    #[serde(default)]
    pub compactor: Option<Declaration>,
    /// The conversation route.
    pub route: Route,
    /// Frontier and boundary events, plus corrections and late deliveries
    /// that touch covered history (other events are allowed and ignored).
    pub events: Vec<Event>,
    /// The packets the boundaries settled, by id. Only the packets of
    /// boundaries not listed in `trusted` are needed.
    #[serde(default)]
    pub packets: Vec<Packet>,
    /// Ids of boundaries this host already verified under the same
    /// declarations (an earlier resolution's `accepted`, from events it holds
    /// in memory): their content hash and run evidence are not checked again,
    /// so a compaction does not re-settle every packet of the chain. Their
    /// links, order, route and epoch still are.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub trusted: Vec<String>,
    /// A chain prefix this host verified before (an earlier resolution's
    /// head): the chain is resolved from it, so `events` need hold only the
    /// boundaries after it, and a compaction's cost does not grow with the
    /// length of the chain.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verified: Option<Verified>,
}

/// The head of a chain prefix a host verified before, and what that prefix
/// holds for the covered turns later events touch.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Encode, Decode)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Verified {
    /// The boundary at the verified head, in full, as the journal holds it
    /// (trusted: not re-hashed or re-settled; its epoch, route, declaration
    /// and frontier still are checked, and the next boundary must link to it).
    pub boundary: Boundary,
    /// Its position in the chain (the earlier resolution's `head.length`).
    pub length: u64,
    /// What the verified prefix holds (a boundary's frozen turn, or a later
    /// boundary's absorbed entry) for each covered turn that a correction or
    /// late delivery in `events` touches: the snapshot amendments compare with.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub turns: Vec<InputTurn>,
}

/// The resolved chain.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Encode, Decode)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Resolution {
    /// The current epoch's frontier, if activated.
    pub frontier: Option<Frontier>,
    /// The latest valid boundary, if any.
    pub head: Option<ChainHead>,
    /// Covered-history amendment, if current history diverged from the snapshot.
    pub amendment: Option<Amendment>,
    /// Ids of the current chain's boundaries, oldest first: what a timeline
    /// may draw as completed dividers.
    pub accepted: Vec<String>,
    /// Boundaries of retired epochs (inspectable, ineligible).
    pub retired_boundaries: Vec<String>,
    /// Frontiers of retired epochs.
    pub retired_frontiers: Vec<String>,
    /// The summary this epoch starts from, while it has no boundary of its
    /// own: before activation, the retired chain's last sound boundary (for
    /// `plan` to bind into the new frontier); after, the one the frontier
    /// carries (for `plan` and `select`). Pass it on as `carried`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub carried: Option<ChainHead>,
    /// The first source sequence `plan` and `select` still need besides
    /// pinned turns: after what the head covers, and from the frontier's
    /// start (0: everything). A host keeps a turn when it is pinned, its role
    /// is always pinned, or its sequence is at least this; older turns never
    /// reach a call again, so a call's cost does not grow with history.
    #[serde(default)]
    pub keep_from_seq: u64,
}

/// Resolve the chain.
///
/// # Errors
/// `stale_declaration`, `divergent_hash`, `wrong_route`, `fork`,
/// `missing_link`, `frontier_mismatch`, `non_advancing`, `fabricated_run`,
/// `amendment_too_large`, `conflicting_turn`.
pub fn resolve(req: &ResolveRequest) -> Result<Resolution> {
    let decl = &req.declaration;
    check_agreement(req)?;
    let fingerprint = decl.fingerprint();
    let recon = reconstruct(&req.events)?;

    let (frontiers, retired_f): (Vec<&Frontier>, Vec<&Frontier>) = recon
        .frontiers
        .iter()
        .filter(|f| f.route == req.route)
        .partition(|f| f.in_epoch(&fingerprint));
    let in_epoch = |b: &Boundary| {
        b.ruleset_version == crate::RULESET_VERSION && b.declaration_fingerprint == fingerprint
    };
    let verified = req.verified.as_ref();
    let start = verified.map(|v| &v.boundary);
    let (current, retired_b): (Vec<&Boundary>, Vec<&Boundary>) = recon
        .boundaries
        .iter()
        .filter(|b| b.route == req.route || b.declaration_fingerprint == fingerprint)
        .filter(|b| start.is_none_or(|v| v.id != b.id))
        .partition(|b| in_epoch(b));
    if let Some(v) = start {
        if !in_epoch(v) {
            return Err(Error::new(
                Code::StaleDeclaration,
                "the verified head belongs to another epoch; resolve the chain from its start",
            )
            .with_ids([v.id.clone()]));
        }
        check_boundary(v, decl, &req.route, true)?;
    }

    let mut trusted: Vec<&str> = req.trusted.iter().map(String::as_str).collect();
    crate::order::sort_by(&mut trusted, |a, b| a.cmp(b));
    let is_trusted = |id: &str| trusted.binary_search(&id).is_ok();
    for b in &current {
        check_boundary(b, decl, &req.route, is_trusted(&b.id))?;
    }
    let frontier = the_frontier(&frontiers)?;
    let chain = match frontier {
        None if !current.is_empty() || start.is_some() => {
            return Err(Error::new(
                Code::MissingLink,
                "boundaries exist but their activation frontier does not",
            )
            .with_ids(current.iter().chain(start.iter()).map(|b| b.id.clone())))
        }
        None => Vec::new(),
        Some(f) => order_chain(&current, f, start)?,
    };

    // Inserted one by one (a later copy wins, as `collect` would): building
    // from an iterator sorts, and a sort per element type is large in wasm.
    let mut packets: BTreeMap<&str, &Packet> = BTreeMap::new();
    for p in &req.packets {
        packets.insert(&p.id, p);
    }
    for b in chain[usize::from(start.is_some())..]
        .iter()
        .filter(|b| !is_trusted(&b.id))
    {
        check_run(b, &packets)?;
    }

    // Positions before the verified head are not in `chain`.
    let before = verified.map_or(0, |v| v.length.saturating_sub(1));
    let head = chain
        .last()
        .map(|b| ChainHead::of(b, before + chain.len() as u64));
    let amendment = match (frontier, chain.last()) {
        (Some(f), Some(last)) => amend::derive(
            &snapshot(verified.map_or(&[][..], |v| &v.turns), &chain),
            f.start_seq,
            last.covered_through_seq,
            &recon,
            |t| admitted(decl, t),
            decl.amendment_max_chars,
        )?,
        _ => None,
    };
    let carried = match (frontier, chain.is_empty()) {
        (Some(f), true) => carried_by(f, &recon)?,
        (None, _) => last_retired(&recon, &retired_b, &req.route),
        (Some(_), false) => None,
    };
    let keep_from_seq = head
        .as_ref()
        .map_or(0, |h| h.covered_through_seq.saturating_add(1))
        .max(frontier.map_or(0, |f| f.start_seq));
    Ok(Resolution {
        carried,
        keep_from_seq,
        frontier: frontier.cloned(),
        head,
        amendment,
        accepted: chain.iter().map(|b| b.id.clone()).collect(),
        retired_boundaries: retired_b.iter().map(|b| b.id.clone()).collect(),
        retired_frontiers: retired_f.iter().map(|f| f.id.clone()).collect(),
    })
}

/// The boundary a frontier carries over from a retired epoch, checked:
/// the journal holds it, under its id and hash, intact.
fn carried_by(
    f: &Frontier,
    recon: &crate::history::reconstruct::Reconstruction,
) -> Result<Option<ChainHead>> {
    let Some(c) = &f.carried else {
        return Ok(None);
    };
    match recon.boundaries.iter().find(|b| b.id == c.boundary_id) {
        Some(b) if b.hash == c.boundary_hash && b.hash == b.compute_hash() => {
            Ok(Some(ChainHead::of(b, 0)))
        }
        Some(b) => Err(Error::new(
            Code::DivergentHash,
            "the boundary the activation frontier carries over does not match its hash",
        )
        .with_ids([b.id.clone(), f.id.clone()])),
        None => Err(Error::new(
            Code::MissingLink,
            "the activation frontier carries over a boundary the journal does not hold",
        )
        .with_ids([c.boundary_id.clone(), f.id.clone()])),
    }
}

/// The retired chain's last sound boundary on this route (what an upgrade
/// carries over): it holds together on its own (its hash is its content's,
/// it links to a sound boundary, no other claims its slot).
fn last_retired(
    recon: &crate::history::reconstruct::Reconstruction,
    retired: &[&Boundary],
    route: &Route,
) -> Option<ChainHead> {
    if retired.is_empty() {
        return None;
    }
    let sound = crate::ops::timeline::sound_boundaries(recon);
    retired
        .iter()
        .filter(|b| &b.route == route && sound.contains(&b.id))
        .max_by(|a, b| (a.covered_through_seq, &a.id).cmp(&(b.covered_through_seq, &b.id)))
        .map(|b| ChainHead::of(b, 0))
}

/// With a compactor declaration, the two must agree (`stale_declaration`
/// naming each disagreement).
fn check_agreement(req: &ResolveRequest) -> Result<()> {
    let Some(c) = &req.compactor else {
        return Ok(());
    };
    let a = agree(&req.declaration, c);
    if a.agree {
        return Ok(());
    }
    Err(Error::new(
        Code::StaleDeclaration,
        "the target and compactor declarations disagree",
    )
    .with_ids(a.disagreements))
}

/// The current epoch's one activation frontier, intact; two are a `fork`.
fn the_frontier<'a>(frontiers: &[&'a Frontier]) -> Result<Option<&'a Frontier>> {
    match frontiers {
        [] => Ok(None),
        [f] if !f.id_is_intact() => Err(Error::new(
            Code::DivergentHash,
            "the activation frontier's id does not match its content",
        )
        .with_ids([f.id.clone()])),
        [f] => Ok(Some(*f)),
        many => Err(Error::new(
            Code::Fork,
            "more than one activation frontier in the current epoch",
        )
        .with_ids(many.iter().map(|f| f.id.clone()))),
    }
}

fn check_boundary(b: &Boundary, decl: &Declaration, route: &Route, trusted: bool) -> Result<()> {
    let ids = || vec![b.id.clone()];
    if !trusted && b.compute_hash() != b.hash {
        return Err(Error::new(
            Code::DivergentHash,
            "a boundary's content does not match its hash",
        )
        .with_ids(ids()));
    }
    if !b.sensitive {
        return Err(Error::new(
            Code::FabricatedRun,
            "a boundary is not marked sensitive; the core always binds it so",
        )
        .with_ids(ids()));
    }
    if b.target_id != decl.target_id
        || b.compactor_id != decl.compactor_id
        || b.history_agents != decl.history_agents
        || b.policy != decl.budget
    {
        return Err(Error::new(
            Code::StaleDeclaration,
            "a boundary's declaration fields differ from the registered declaration",
        )
        .with_ids(ids()));
    }
    if &b.route != route {
        return Err(Error::new(
            Code::WrongRoute,
            "a boundary belongs to another conversation, chat or sender",
        )
        .with_ids(ids()));
    }
    Ok(())
}

/// Order the current epoch's boundaries into one chain from the frontier,
/// or from `start` (a verified head, first in the answer) when given.
fn order_chain<'a>(
    bs: &[&'a Boundary],
    f: &Frontier,
    start: Option<&'a Boundary>,
) -> Result<Vec<&'a Boundary>> {
    let mut by_id: BTreeMap<&str, &Boundary> = BTreeMap::new();
    for b in bs.iter().chain(start.iter()) {
        by_id.insert(&b.id, b);
    }
    let mut children: BTreeMap<Option<&str>, Vec<&Boundary>> = BTreeMap::new();
    // A verified head is the root: its own predecessors are not sent.
    if let Some(b) = start.filter(|b| b.frontier != f.reference()) {
        return Err(Error::new(
            Code::FrontierMismatch,
            "the verified head names another activation frontier than the current one",
        )
        .with_ids([b.id.clone()]));
    }
    for b in bs {
        if b.frontier != f.reference() {
            return Err(Error::new(
                Code::FrontierMismatch,
                "a boundary names another activation frontier than the current one",
            )
            .with_ids([b.id.clone()]));
        }
        let prev = b.previous.as_ref().map(|p| p.boundary_id.as_str());
        if let Some(p) = prev {
            if !by_id.contains_key(p) {
                return Err(Error::new(
                    Code::MissingLink,
                    format!("a boundary names a predecessor `{p}` that is not in the chain"),
                )
                .with_ids([b.id.clone()]));
            }
        }
        children.entry(prev).or_default().push(b);
    }
    if let Some((_, kids)) = children.iter().find(|(_, kids)| kids.len() > 1) {
        return Err(
            Error::new(Code::Fork, "two boundaries extend the same chain position")
                .with_ids(kids.iter().map(|b| b.id.clone())),
        );
    }
    let mut chain: Vec<&Boundary> = Vec::with_capacity(bs.len() + 1);
    chain.extend(start);
    let mut at: Option<&str> = start.map(|b| b.id.as_str());
    while let Some(kids) = children.get(&at) {
        let b = kids[0];
        check_link(b, chain.last().copied(), f)?;
        chain.push(b);
        if chain.len() > bs.len() + 1 {
            break;
        }
        at = Some(b.id.as_str());
    }
    if chain.len() != bs.len() + usize::from(start.is_some()) {
        let on: Vec<&str> = chain.iter().map(|b| b.id.as_str()).collect();
        return Err(Error::new(
            Code::MissingLink,
            "some boundaries are not reachable from the frontier",
        )
        .with_ids(
            bs.iter()
                .filter(|b| !on.contains(&b.id.as_str()))
                .map(|b| b.id.clone()),
        ));
    }
    Ok(chain)
}

/// One link of the chain: the first boundary covers something after its
/// frontier; a later one names its predecessor by hash and prior coverage,
/// and covers further.
fn check_link(b: &Boundary, prev: Option<&Boundary>, f: &Frontier) -> Result<()> {
    let Some(prev) = prev else {
        if b.covered_through_seq < f.start_seq {
            return Err(Error::new(
                Code::NonAdvancing,
                "the first boundary covers nothing after its frontier",
            )
            .with_ids([b.id.clone()]));
        }
        return Ok(());
    };
    let both = || [b.id.clone(), prev.id.clone()];
    let Some(link) = b.previous.as_ref() else {
        return Err(
            Error::new(Code::MissingLink, "a later boundary has no previous link")
                .with_ids([b.id.clone()]),
        );
    };
    if link.boundary_hash != prev.hash {
        return Err(Error::new(
            Code::DivergentHash,
            "a boundary names its predecessor with another hash",
        )
        .with_ids(both()));
    }
    if link.covered_through_seq != prev.covered_through_seq {
        return Err(Error::new(
            Code::MissingLink,
            "a boundary's recorded prior coverage differs from its predecessor's",
        )
        .with_ids(both()));
    }
    if b.covered_through_seq <= prev.covered_through_seq {
        return Err(Error::new(
            Code::NonAdvancing,
            format!(
                "a boundary covers through {} but its predecessor already covered through {}",
                b.covered_through_seq, prev.covered_through_seq
            ),
        )
        .with_ids(both()));
    }
    Ok(())
}

/// Re-settle a boundary from its packet and run evidence; any difference means
/// the boundary claims something the core did not bind.
fn check_run(b: &Boundary, packets: &BTreeMap<&str, &Packet>) -> Result<()> {
    let fabricated = |why: &str| {
        Error::new(
            Code::FabricatedRun,
            format!("a boundary's run evidence does not hold: {why}"),
        )
        .with_ids([b.id.clone()])
    };
    let Some(packet) = packets.get(b.packet_id.as_str()) else {
        return Err(fabricated("its packet is not among the persisted packets"));
    };
    let again = settle(&SettleRequest {
        packet: (*packet).clone(),
        output: ModelOutput {
            packet_id: b.packet_id.clone(),
            run_id: b.run.run_id.clone(),
            model_id: b.run.model_id.clone(),
            usage: b.run.usage,
            finish_reason: b.run.finish_reason.clone(),
            summary: b.summary.clone(),
        },
        expected_run_id: None,
    })
    .map_err(|e| fabricated(&format!("re-settling its packet fails ({})", e.code)))?;
    if &again != b {
        return Err(fabricated(
            "a bound field differs from what its packet and run produce",
        ));
    }
    Ok(())
}

/// What the chain holds for each covered turn — first what a verified
/// prefix holds (`before`), then each boundary's frozen turns, later
/// boundaries' absorbed amendments overriding the original snapshot.
fn snapshot(before: &[InputTurn], chain: &[&Boundary]) -> BTreeMap<String, Snapshot> {
    let mut map = BTreeMap::new();
    let mut put = |turn_id: &str, source_seq, role, content_hash: &str| {
        let s = Snapshot {
            source_seq,
            role,
            content_hash: content_hash.to_owned(),
        };
        map.insert(turn_id.to_owned(), s);
    };
    for t in before {
        put(&t.turn_id, t.source_seq, t.role, &t.content_hash);
    }
    for b in chain {
        for t in &b.input.turns {
            put(&t.turn_id, t.source_seq, t.role, &t.content_hash);
        }
        for a in &b.absorbed {
            put(&a.turn_id, a.source_seq, a.role, &a.content_hash);
        }
    }
    map
}
