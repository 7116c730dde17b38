//! Turn claims: what a message claims for its turn id, so a journal can
//! refuse a used turn id given other content (`conflicting_turn`) and take
//! a redelivery that says the same.
//!
//! A claim is the JSON array of what the core compares when one turn is
//! delivered again — `[chat, sender, source, sourceSeq, index, role,
//! authorAgent, contentHash, tokens, pinned, sensitive]`, defaults filled
//! in (`""`, `0`, `null`, `false`), written without spaces. The content
//! hash stands for every part. The JS journals write the same text
//! (`turnClaims` in js/src/journal/journal.ts), and both are held to the
//! shared cases in tests/journal/turn-claims.json, so a database one kind
//! of host wrote (a D1 database exported as SQLite) takes redeliveries
//! from the other.
//!
//! Journals before this form kept the SHA-256 of the stored message (64
//! hex digits; [`legacy_claim`]): they are rewritten when the journal is
//! opened, and one an older replica writes later is recognized when it
//! alone stands between a redelivery and its turn.

use foldline_core::event::{Event, Message};

use super::conflicting_turn;
use crate::error::{HostError, Result};

/// What `m` claims for its turn id (the module's form). `m` is a checked
/// message: its content hash is filled in.
///
/// # Errors
/// `invalid_input` when the message cannot be written as JSON (it always
/// can: every field is a string, a number, a boolean or null).
pub fn turn_claim(m: &Message) -> Result<String> {
    serde_json::to_string(&(
        &m.chat,
        &m.sender,
        &m.source,
        m.source_seq,
        m.index,
        &m.role,
        &m.author_agent,
        &m.content_hash,
        m.tokens,
        m.pinned,
        m.sensitive,
    ))
    .map_err(|e| HostError::Input(e.to_string()))
}

/// What each message (or late delivery) of a checked batch claims for its
/// turn id, once per turn id, in the batch's order. A journal keeps one
/// claim per turn id and refuses a batch that would give a used id other
/// content: such an event, once written, would leave the conversation
/// unable to select or compact, for good. Repeats inside the batch are
/// checked here.
///
/// # Errors
/// `conflicting_turn` when the batch itself gives one turn id two contents.
pub fn turn_claims(events: &[Event]) -> Result<Vec<(String, String)>> {
    let mut out: Vec<(String, String)> = Vec::new();
    // Where each turn id's claim is in `out`: a batch of 200,000 messages
    // (an imported export) was a quadratic scan of `out` per message.
    let mut at: std::collections::BTreeMap<&str, usize> = std::collections::BTreeMap::new();
    for e in events {
        let (Event::Message(m) | Event::LateDelivery(m)) = e else {
            continue;
        };
        let claim = turn_claim(m)?;
        match at.get(m.turn_id.as_str()) {
            Some(&i) if out[i].1 != claim => return Err(conflicting_turn(&m.turn_id)),
            Some(_) => {}
            None => {
                at.insert(&m.turn_id, out.len());
                out.push((m.turn_id.clone(), claim));
            }
        }
    }
    Ok(out)
}

/// Whether a stored claim is of the form journals kept before this one
/// (a SHA-256 in hex; a claim of this form opens with `[`).
#[cfg(any(feature = "sqlite", feature = "postgres"))]
pub(crate) fn is_legacy(claim: &str) -> bool {
    !claim.starts_with('[')
}

/// The claim `turn_id` had in the earlier form — the SHA-256 of its
/// message in `events` as the journal stores it — or `None` when the batch
/// holds no such message.
#[cfg(any(feature = "sqlite", feature = "postgres"))]
pub(crate) fn legacy_claim(events: &[Event], turn_id: &str) -> Option<String> {
    use sha2::Digest;
    let m = events.iter().find_map(|e| match e {
        Event::Message(m) | Event::LateDelivery(m) if m.turn_id == turn_id => Some(m),
        _ => None,
    })?;
    let body = serde_json::to_vec(m).ok()?;
    Some(
        sha2::Sha256::digest(&body)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect(),
    )
}

/// Fill the turn-claims table of a journal from the message events `rows`
/// (conversation, body) hold, for the turn ids it lacks (a journal written
/// before the table existed, or whose claims of the earlier form were
/// removed to be written again); the first claim of a turn id wins, as the
/// core's first delivery does.
#[cfg(any(feature = "sqlite", feature = "postgres"))]
pub(crate) fn backfill_claims(
    rows: impl Iterator<Item = (String, String)>,
    mut put: impl FnMut(&str, &str, &str) -> Result<()>,
) -> Result<()> {
    for (conversation, body) in rows {
        let event: Event = super::decode(&body, "event")?;
        for (turn_id, claim) in turn_claims(std::slice::from_ref(&event))? {
            put(&conversation, &turn_id, &claim)?;
        }
    }
    Ok(())
}
