//! Declarations: the target and its reciprocal compactor must agree.

use foldline_derive::{Decode, Encode};
use serde::Serialize;

use crate::records::declaration::{Declaration, DeclarationRole};

/// The answer: whether they agree, and every field that does not.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Encode, Decode)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Agreement {
    /// True when no field disagrees.
    pub agree: bool,
    /// The disagreeing fields, in a fixed order.
    pub disagreements: Vec<String>,
}

/// Compare a target and a compactor declaration on ids, enabled state, model
/// profile, sources, privacy admission, history agents, documents and their
/// budget; also check that each has its role.
pub fn agree(target: &Declaration, compactor: &Declaration) -> Agreement {
    let mut d = Vec::new();
    let mut check = |field: &str, same: bool| {
        if !same {
            d.push(field.to_owned());
        }
    };
    check(
        "role",
        target.role == DeclarationRole::Target && compactor.role == DeclarationRole::Compactor,
    );
    check("targetId", target.target_id == compactor.target_id);
    check("compactorId", target.compactor_id == compactor.compactor_id);
    check("enabled", target.enabled == compactor.enabled);
    check(
        "modelProfile",
        target.model_profile == compactor.model_profile,
    );
    check("sources", target.sources == compactor.sources);
    check("privacy", target.privacy == compactor.privacy);
    check(
        "historyAgents",
        target.history_agents == compactor.history_agents,
    );
    check("documents", target.documents == compactor.documents);
    Agreement {
        agree: d.is_empty(),
        disagreements: d,
    }
}
