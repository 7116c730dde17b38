//! `settle` on the request's bytes, for a packet sent as the core wrote it.
//!
//! A host persists the packet `plan` sealed and sends it back to settle. Its
//! bytes are then the packet's canonical encoding, and the packet's id is
//! the hash of those bytes without the `id` member: one SHA-256 pass over
//! the bytes as received checks the id, instead of a parse, a decode, a
//! canonical encoding and the same hash. When it matches, the bytes are
//! exactly what the core wrote, so the two large parts need no decoding:
//! the rendered messages (the boundary does not keep them) and the frozen
//! turns' snapshot (the boundary keeps it as it is, so its bytes are copied
//! into the boundary's encoding and hash, never decoded or encoded again).
//! The rest of the packet and the model's output are decoded as usual and
//! settled by [`settle_intact`].
//!
//! It answers only what the plain path (decode the request, [`validate`])
//! answers, byte for byte, and only on success: any other request — another
//! kind, whitespace or another key order inside the packet, an id that does
//! not match, a field that does not decode, a summary that breaks a rule —
//! goes the plain way, which words the error. Tested against it on the
//! settle vectors and on mutated requests.
//!
//! [`validate`]: crate::validate

use std::ops::Range;

use foldline_json::{outline, Member};

use crate::canonical::{Members, HASH_PREFIX};
use crate::entry::api::{envelope, parse};
use crate::ops::settle::settle_intact;
use crate::ops::validate::{ValidateRequest, ValidateResponse};

/// The members a settle request may have.
const REQUEST: [&[u8]; 4] = [b"kind", b"packet", b"output", b"expectedRunId"];

/// The frozen turns' snapshot, emptied: where it goes back in the boundary.
const NO_TURNS: &[u8] = b"\"turns\":[]";

/// The `validate` answer for a settle request whose packet comes as the
/// core wrote it; `None` for any other request, or when settling fails.
pub(crate) fn settle(input: &[u8]) -> Option<Vec<u8>> {
    // Levels 0..3: the request, the packet, the packet's input evidence.
    let members = outline(input, 3, &mut |level, key| {
        level > 0 || REQUEST.contains(&key)
    })?;
    // A member of the object at `parent`: `Some(None)` when absent, `None`
    // when repeated (the plain path's error to word).
    let find = |parent: Option<usize>, key: &[u8]| -> Option<Option<usize>> {
        let mut found = (0..members.len())
            .filter(|&i| members[i].parent == parent && &input[members[i].key.clone()] == key);
        let first = found.next();
        found.next().is_none().then_some(first)
    };
    // Only settle's members (the outline refused any other), none repeated.
    for key in REQUEST {
        find(None, key)?;
    }
    let kind = find(None, b"kind")??;
    if &input[members[kind].value.clone()] != b"\"settle\"" {
        return None;
    }
    let p = find(None, b"packet")??;
    let id = find(Some(p), b"id")??;
    if !id_matches(input, &members, p, id) {
        return None;
    }
    // Checked: the packet's bytes are its canonical encoding.
    let messages = members[find(Some(p), b"messages")??].value.clone();
    let evidence = find(Some(p), b"input")??;
    let turns = members[find(Some(evidence), b"turns")??].value.clone();
    // The request as sent, with those two emptied: decoded as usual.
    let ValidateRequest::Settle(req) = parse(&without(input, [&messages, &turns])).ok()? else {
        return None;
    };
    let mut boundary = settle_intact(&req).ok()?;
    let turns = &input[turns];
    let mut unhashed = Vec::with_capacity(2048);
    Members::write(&mut unhashed, None, Some("hash"), &boundary);
    let at = emptied_turns(&unhashed)?;
    boundary.hash = foldline_json::sha256_parts(&[&unhashed[..at], turns, &unhashed[at + 2..]]);
    let answer = envelope(Ok(ValidateResponse::Settled {
        boundary: Box::new(boundary),
    }));
    let at = emptied_turns(&answer)?;
    Some([&answer[..at], turns, &answer[at + 2..]].concat())
}

/// Whether the packet's `id` is the hash of the packet's bytes without that
/// member, as [`Packet::seal`] computed it over the canonical encoding.
fn id_matches(input: &[u8], members: &[Member], packet: usize, id: usize) -> bool {
    let value = &input[members[id].value.clone()];
    let Some(claimed) = value
        .strip_prefix(b"\"")
        .and_then(|v| v.strip_suffix(b"\""))
        .filter(|v| v.starts_with(HASH_PREFIX.as_bytes()))
    else {
        return false;
    };
    // The member with the comma that joins it to its neighbour: the one
    // before it, or after it when it comes first.
    let whole = members[packet].value.clone();
    let key_quote = members[id].key.start - 1;
    let end = members[id].value.end;
    let cut = if input[whole.start + 1..key_quote].is_empty() {
        key_quote..end + usize::from(input.get(end) == Some(&b','))
    } else if input[key_quote - 1] == b',' {
        key_quote - 1..end
    } else {
        return false;
    };
    let digest =
        foldline_json::sha256_parts(&[&input[whole.start..cut.start], &input[cut.end..whole.end]]);
    digest.as_bytes() == claimed
}

/// `bytes` with the values at `cuts` (in any order) replaced by `[]`.
fn without(bytes: &[u8], mut cuts: [&Range<usize>; 2]) -> Vec<u8> {
    cuts.sort_by_key(|c| c.start);
    let mut out = Vec::with_capacity(bytes.len());
    let mut at = 0;
    for c in cuts {
        out.extend_from_slice(&bytes[at..c.start]);
        out.extend_from_slice(b"[]");
        at = c.end;
    }
    out.extend_from_slice(&bytes[at..]);
    out
}

/// Where the one emptied snapshot's `[]` is in `encoded`. A key is the only
/// place `"turns":[]` can occur (inside a string its quotes are escaped),
/// and only the input evidence has that key; `None` otherwise.
fn emptied_turns(encoded: &[u8]) -> Option<usize> {
    let (key, _) = NO_TURNS.split_at(NO_TURNS.len() - 2);
    let mut at = (0..encoded.len()).filter(|&i| {
        encoded[i] == b'[' && encoded[..i].ends_with(key) && encoded[i..].starts_with(b"[]")
    });
    let first = at.next()?;
    at.next().is_none().then_some(first)
}
