//! Which turns count — the one place that says it. Of the reconstructed
//! turns, a turn enters the model-bound projection only when the declaration
//! admits it (its source, its author agent, and a sensitive turn only when
//! privacy allows); admitted pinned turns (system, developer, documents, and
//! turns marked pinned) are always kept and never folded (seed 000); every
//! other turn is *eligible* — to be folded by `plan` or kept in the exact
//! tail by `select` — once it is at or after the activation frontier's start
//! and after the chain head's covered sequence.

use crate::records::declaration::Declaration;
use crate::records::turn::Turn;

/// Whether a turn may enter the projection under the declaration.
pub fn admitted(decl: &Declaration, t: &Turn) -> bool {
    decl.admits(&t.source, t.author_agent.as_deref(), t.sensitive)
}

/// The admitted pinned turns, in order.
pub fn pinned<'a>(decl: &Declaration, turns: &'a [Turn]) -> Vec<&'a Turn> {
    turns
        .iter()
        .filter(|t| t.pinned && admitted(decl, t))
        .collect()
}

/// The turns after the frontier's `start` and the head's `covered`
/// sequence that are not pinned, in order: those the declaration admits
/// (eligible), and those it does not (never folded, never sent).
pub struct Eligible<'a> {
    /// Admitted: folded or kept.
    pub admitted: Vec<&'a Turn>,
    /// Not admitted.
    pub refused: Vec<&'a Turn>,
}

/// Sort the turns after `start` (the frontier's) and `covered` (the head's).
pub fn eligible<'a>(
    decl: &Declaration,
    turns: &'a [Turn],
    start: u64,
    covered: Option<u64>,
) -> Eligible<'a> {
    let mut out = Eligible {
        admitted: Vec::new(),
        refused: Vec::new(),
    };
    for t in turns {
        if t.pinned || t.source_seq < start || covered.is_some_and(|c| t.source_seq <= c) {
            continue;
        }
        if admitted(decl, t) {
            out.admitted.push(t);
        } else {
            out.refused.push(t);
        }
    }
    out
}
