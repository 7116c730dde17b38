//! Activation frontiers: where a compaction epoch begins.
//!
//! The first eligible turn persists one immutable frontier bound to the ruleset
//! version, the declaration fingerprint, the route, the policy and the admitted
//! history agents. For an established conversation the frontier keeps only the
//! newest complete source groups needed to reach the trigger, so a long history
//! never becomes first-run compactor input. A frontier's id is the hash of its
//! canonical encoding, so its id and hash coincide.

use foldline_derive::{Decode, Encode};
use serde::Serialize;

use crate::canonical;
use crate::records::declaration::{Budget, Declaration};
use crate::records::link::PreviousRef;
use crate::records::turn::Route;

/// An activation-frontier document.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Encode, Decode)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Frontier {
    /// `sha256:` hash of every other field.
    pub id: String,
    /// Ruleset version of the core that created it.
    pub ruleset_version: String,
    /// Fingerprint of the target declaration.
    pub declaration_fingerprint: String,
    /// Target agent.
    pub target_id: String,
    /// Compactor.
    pub compactor_id: String,
    /// Conversation route.
    pub route: Route,
    /// Budget in force.
    pub policy: Budget,
    /// Admitted history agents.
    pub history_agents: Vec<String>,
    /// The turn that activated compaction.
    pub activating_turn_id: String,
    /// Its source sequence.
    pub activating_seq: u64,
    /// First source sequence inside the projection.
    pub start_seq: u64,
    /// Whether older history existed and was left outside (established conversation).
    pub established: bool,
    /// After an upgrade (a new ruleset or declaration): the retired epoch's
    /// last sound boundary, whose summary this epoch starts from. The
    /// frontier then starts right after what it covered, and until this
    /// epoch's first boundary its summary is the context's (enveloped,
    /// untrusted) and the first compaction's previous summary — so an
    /// upgrade never costs what the model knew.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub carried: Option<PreviousRef>,
}

/// The identity of a frontier as bound into packets and boundaries.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Encode, Decode)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FrontierRef {
    /// Frontier id (its hash).
    pub id: String,
    /// Its first source sequence.
    pub start_seq: u64,
}

impl Frontier {
    /// Build and seal a frontier (computes the id).
    pub fn seal(
        decl: &Declaration,
        route: &Route,
        activating: (&str, u64),
        start_seq: u64,
        established: bool,
        carried: Option<PreviousRef>,
    ) -> Frontier {
        let mut f = Frontier {
            id: String::new(),
            ruleset_version: crate::RULESET_VERSION.to_owned(),
            declaration_fingerprint: decl.fingerprint(),
            target_id: decl.target_id.clone(),
            compactor_id: decl.compactor_id.clone(),
            route: route.clone(),
            policy: decl.budget,
            history_agents: decl.history_agents.clone(),
            activating_turn_id: activating.0.to_owned(),
            activating_seq: activating.1,
            start_seq,
            established,
            carried,
        };
        f.id = canonical::hash_without(&f, "id");
        f
    }

    /// Whether the stored id still matches the content.
    pub fn id_is_intact(&self) -> bool {
        thread_local! {
            static LAST: canonical::Memo<Frontier, bool> = const { std::cell::RefCell::new(None) };
        }
        canonical::remembered(&LAST, self, |f| canonical::hash_without(f, "id") == f.id)
    }

    /// Refuse a frontier handed back by a host whose id does not match its
    /// content (`plan` and `select` both check here).
    ///
    /// # Errors
    /// `divergent_hash` naming the frontier.
    pub fn check(&self) -> crate::error::Result<()> {
        if self.id_is_intact() {
            return Ok(());
        }
        Err(crate::error::Error::new(
            crate::error::Code::DivergentHash,
            "the activation frontier's id does not match its content",
        )
        .with_ids([self.id.clone()]))
    }

    /// Whether the frontier belongs to the epoch (ruleset + fingerprint).
    pub fn in_epoch(&self, fingerprint: &str) -> bool {
        self.ruleset_version == crate::RULESET_VERSION
            && self.declaration_fingerprint == fingerprint
    }

    /// The reference bound into packets and boundaries.
    pub fn reference(&self) -> FrontierRef {
        FrontierRef {
            id: self.id.clone(),
            start_seq: self.start_seq,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_frontier_whose_id_does_not_match_its_content_is_refused() {
        let route = Route {
            conversation: "c".into(),
            chat: String::new(),
            sender: String::new(),
        };
        let f = Frontier::seal(
            &Declaration::new("a", "b"),
            &route,
            ("t1", 1),
            1,
            false,
            None,
        );
        assert_eq!(f.check(), Ok(()));
        let moved = Frontier {
            start_seq: 40,
            ..f.clone()
        };
        let e = moved.check().expect_err("a moved start under the same id");
        assert_eq!(e.code, crate::error::Code::DivergentHash);
        assert_eq!(e.ids, [f.id]);
    }
}
