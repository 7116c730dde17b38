//! Covered-history amendments.
//!
//! A correction or late delivery inside covered history never mutates a
//! boundary. Comparing current effective history with the chain's exact
//! snapshot yields a bounded typed amendment that goes beside the boundary to
//! the model (`select`) and to the next compactor (`plan`), until a later
//! boundary absorbs it. An oversized amendment fails closed.

use std::collections::BTreeMap;

use crate::canonical;
use crate::error::{Code, Error, Result};
use crate::history::reconstruct::Reconstruction;
pub use crate::records::amendment::{AbsorbedEntry, Amendment, AmendmentEntry, EntryKind};
use crate::records::turn::{content_hash, Role, Turn};
use crate::render::envelope;

/// What the chain's boundaries hold for one covered turn.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Snapshot {
    /// Source sequence.
    pub source_seq: u64,
    /// Role.
    pub role: Role,
    /// Content hash.
    pub content_hash: String,
}

impl Amendment {
    /// Build from entries, computing size and hash; fail closed over the bound.
    ///
    /// # Errors
    /// `amendment_too_large` when the rendered envelope exceeds `max_chars`.
    pub fn build(mut entries: Vec<AmendmentEntry>, max_chars: u64) -> Result<Amendment> {
        crate::order::sort_by(&mut entries, |a, b| {
            (a.source_seq, &a.turn_id).cmp(&(b.source_seq, &b.turn_id))
        });
        let mut a = Amendment {
            hash: canonical::hash(&entries),
            entries,
            chars: 0,
        };
        a.chars = envelope::amendment_chars(&a);
        if a.chars > max_chars {
            return Err(Error::new(
                Code::AmendmentTooLarge,
                format!(
                    "the covered-history amendment renders to {} characters, over the bound of {max_chars}",
                    a.chars
                ),
            )
            .with_ids(a.entries.iter().map(|e| e.turn_id.clone())));
        }
        Ok(a)
    }

    /// Whether the amendment's hash still matches its entries.
    pub fn is_intact(&self) -> bool {
        canonical::hash(&self.entries) == self.hash
    }

    /// Refuse an amendment handed back by a host whose hash or size does not
    /// match its entries: the hash binds the entries, and the size is what
    /// budgets reserve, so neither may be taken on trust. `plan` and `select`
    /// both check here.
    ///
    /// # Errors
    /// `divergent_hash`, saying which of the two differs.
    pub fn check(&self) -> Result<()> {
        if !self.is_intact() {
            return Err(Error::new(
                Code::DivergentHash,
                "the amendment's hash does not match its entries",
            ));
        }
        let chars = envelope::amendment_chars(self);
        if chars != self.chars {
            return Err(Error::new(
                Code::DivergentHash,
                format!(
                    "the amendment says it renders to {} characters; its entries render to {chars}",
                    self.chars
                ),
            ));
        }
        Ok(())
    }

    /// The entries as a boundary absorbs them.
    pub fn absorbed(&self) -> Vec<AbsorbedEntry> {
        self.entries
            .iter()
            .map(|e| AbsorbedEntry {
                turn_id: e.turn_id.clone(),
                source_seq: e.source_seq,
                role: e.role,
                content_hash: e.new_hash.clone(),
            })
            .collect()
    }
}

/// Compare current history in `[start_seq, covered_through]` with the chain
/// snapshot and derive the amendment, if anything diverged.
///
/// # Errors
/// `amendment_too_large` over the bound.
pub fn derive(
    snapshot: &BTreeMap<String, Snapshot>,
    start_seq: u64,
    covered_through: u64,
    recon: &Reconstruction,
    admit: impl Fn(&Turn) -> bool,
    max_chars: u64,
) -> Result<Option<Amendment>> {
    let mut entries = Vec::new();
    for t in &recon.turns {
        // Metadata-only turns carry no content to amend with; their corrections do.
        if t.pinned
            || t.metadata_only
            || t.source_seq < start_seq
            || t.source_seq > covered_through
            || !admit(t)
        {
            continue;
        }
        match snapshot.get(&t.turn_id) {
            Some(s) if s.content_hash == t.content_hash => {}
            Some(s) => entries.push(AmendmentEntry {
                turn_id: t.turn_id.clone(),
                source_seq: t.source_seq,
                kind: EntryKind::Corrected,
                role: t.role,
                old_hash: Some(s.content_hash.clone()),
                new_hash: t.content_hash.clone(),
                parts: t.parts.clone(),
            }),
            None => entries.push(AmendmentEntry {
                turn_id: t.turn_id.clone(),
                source_seq: t.source_seq,
                kind: EntryKind::Late,
                role: t.role,
                old_hash: None,
                new_hash: t.content_hash.clone(),
                parts: t.parts.clone(),
            }),
        }
    }
    for c in &recon.orphan_corrections {
        if let Some(s) = snapshot.get(&c.turn_id) {
            let h = content_hash(&c.parts);
            if h != s.content_hash {
                entries.push(AmendmentEntry {
                    turn_id: c.turn_id.clone(),
                    source_seq: s.source_seq,
                    kind: EntryKind::Corrected,
                    role: s.role,
                    old_hash: Some(s.content_hash.clone()),
                    new_hash: h,
                    parts: c.parts.clone(),
                });
            }
        }
    }
    if entries.is_empty() {
        return Ok(None);
    }
    Amendment::build(entries, max_chars).map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::turn::Part;

    fn amendment() -> Amendment {
        let entry = AmendmentEntry {
            turn_id: "t1".into(),
            source_seq: 1,
            kind: EntryKind::Corrected,
            role: Role::User,
            old_hash: Some("sha256:00".into()),
            new_hash: "sha256:11".into(),
            parts: vec![Part::Text {
                text: "the budget is 1,200 euros".into(),
            }],
        };
        Amendment::build(vec![entry], 8_000).expect("within its bound")
    }

    #[test]
    fn an_amendment_whose_size_or_hash_lies_is_refused() {
        let a = amendment();
        assert_eq!(a.check(), Ok(()));
        let smaller = Amendment {
            chars: a.chars - 1,
            ..a.clone()
        };
        let e = smaller
            .check()
            .expect_err("a smaller size than its entries render to");
        assert_eq!(e.code, Code::DivergentHash);
        assert!(e.message.contains("characters"), "{}", e.message);
        let mut edited = a.clone();
        edited.entries[0].source_seq = 2;
        assert_eq!(edited.check().map_err(|e| e.code), Err(Code::DivergentHash));
    }
}
