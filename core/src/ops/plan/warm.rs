//! Whether a warm candidate, prepared ahead of need, is still the packet
//! compaction would freeze now (seed 002 "Warm candidates").

use super::{WarmRefusal, WarmVerdict};
use crate::history::group;
use crate::records::packet::Packet;
use crate::records::turn::Turn;

/// Check whether a warm candidate is still valid against the fresh packet and
/// current eligible turns: same epoch, same previous boundary and amendment,
/// and its frozen turns are still, unchanged, a prefix of current history that
/// ends on a unit boundary.
pub fn warm_verdict(warm: &Packet, fresh: &Packet, eligible: &[&Turn]) -> WarmVerdict {
    let verdict = |reason: Option<WarmRefusal>| WarmVerdict {
        packet_id: warm.id.clone(),
        valid: reason.is_none(),
        reason,
    };
    if !warm.id_is_intact() {
        return verdict(Some(WarmRefusal::DivergentHash));
    }
    if warm.declaration_fingerprint != fresh.declaration_fingerprint
        || warm.ruleset_version != fresh.ruleset_version
    {
        return verdict(Some(WarmRefusal::StaleDeclaration));
    }
    if warm.previous != fresh.previous || warm.frontier != fresh.frontier {
        return verdict(Some(WarmRefusal::StalePrevious));
    }
    if warm.amendment.as_ref().map(|a| &a.hash) != fresh.amendment.as_ref().map(|a| &a.hash) {
        return verdict(Some(WarmRefusal::StaleAmendment));
    }
    let n = warm.input.turns.len();
    if n > eligible.len() {
        return verdict(Some(WarmRefusal::NotPrefix));
    }
    for (w, t) in warm.input.turns.iter().zip(eligible) {
        if w.turn_id != t.turn_id || w.content_hash != t.content_hash {
            return verdict(Some(WarmRefusal::Diverged));
        }
    }
    let on_unit_edge = n == eligible.len() || group::units(eligible).iter().any(|u| u.start == n);
    if !on_unit_edge {
        return verdict(Some(WarmRefusal::SplitsUnit));
    }
    verdict(None)
}
