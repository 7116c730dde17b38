//! `foldline import FILE`: a file's messages or events into a conversation,
//! checked whole before anything is written.

use std::io::Read;
use std::process::ExitCode;

use std::collections::BTreeMap;

use foldline_core::event::Event;
use foldline_wasmtime::driver::Outcome;
use foldline_wasmtime::journal::{self, Journal};
use foldline_wasmtime::{import, HostError};

use crate::{route, ImportArgs, ProgramDriver};

/// `foldline import FILE`: the file's messages or events, appended after
/// the conversation's last turn (one batch with `--no-compact`, else one by
/// one with the driver after each), refused whole (naming the file) when
/// any of them would not be accepted. Messages an earlier run of the file
/// wrote are not written again (`import::resume`).
pub fn import_file(d: &ProgramDriver, conv: &str, a: &ImportArgs) -> Result<ExitCode, HostError> {
    let (file, format, compact) = (&a.file, a.format, !a.no_compact);
    let read = if file.as_os_str() == "-" {
        let mut text = String::new();
        std::io::stdin().read_to_string(&mut text).map(|_| text)
    } else {
        std::fs::read_to_string(file)
    };
    let text = read.map_err(|e| HostError::Input(format!("{}: {e}", file.display())))?;
    let named = |e: HostError| match e {
        HostError::Input(m) => HostError::Input(format!("{}: {m}", file.display())),
        other => other,
    };
    let stored: Vec<_> = (d.journal().read_events(conv, 0)?.into_iter())
        .map(|s| s.event)
        .collect();
    if stored.is_empty() {
        foldline_wasmtime::ids::check_new_conversation(conv)?;
    }
    let after = stored
        .iter()
        .filter_map(|e| e.turn_seq())
        .max()
        .unwrap_or(0);
    let (mut events, raw) = import::parse_as(&text, &route(conv), after, format).map_err(named)?;
    drop(text);
    let held = match raw {
        false => import::resume::skip_imported(&mut events, &stored, &route(conv), after),
        true => 0,
    };
    if events.is_empty() && held > 0 {
        out!(
            "nothing to import: {conv} holds the {held} messages of {} already",
            file.display()
        );
        return Ok(ExitCode::SUCCESS);
    }
    // Counted as every writer counts them (`--tokenizer`).
    d.count_tokens_of(&mut events);
    // The append check first, as every other writer makes it: a message no
    // compaction could take, a foreign route or a wrong content hash
    // written here would leave the conversation unable to select.
    d.check_events(conv, &events).map_err(|e| match e {
        HostError::Core(e) => HostError::Core(foldline_core::Error {
            message: format!("{}: {} (nothing imported)", file.display(), e.message),
            ..e
        }),
        other => other,
    })?;
    refuse_conflicts(conv, &stored, &events).map_err(named)?;
    let active = stored.iter().any(|e| matches!(e, Event::Frontier(_)));
    let n = import_events(d, conv, events, compact, active)?;
    match held {
        0 => out!("imported {n} events into {conv}"),
        _ => out!("imported {n} events into {conv} ({held} before them held already, from an earlier run)"),
    }
    Ok(ExitCode::SUCCESS)
}

/// An import may carry raw foldline events with their own turn ids: before
/// anything is written, no turn id may take other content than the
/// conversation (or the import itself) gave it, or the import is refused
/// naming the turn — an append-only journal could never be repaired. The
/// rule is the journal's own ([`journal::turn_claims`], which it holds at
/// each append), checked over the whole import first, so an import that
/// compacts as it goes never stops half written; natively, so a long
/// conversation costs no call of the core over all of it. Only turns whose
/// id the journal holds already, or the import gives twice, can conflict,
/// so only theirs are hashed (an import of new messages hashes none here;
/// the journal hashes each once, when it writes it).
fn refuse_conflicts(conv: &str, stored: &[Event], events: &[Event]) -> Result<(), HostError> {
    let turn = |e: &Event| match e {
        Event::Message(m) | Event::LateDelivery(m) => Some(m.turn_id.clone()),
        _ => None,
    };
    let mut times: BTreeMap<String, usize> = BTreeMap::new();
    for id in events.iter().filter_map(turn) {
        *times.entry(id).or_default() += 1;
    }
    let held: Vec<Event> = (stored.iter())
        .filter(|e| turn(e).is_some_and(|id| times.contains_key(&id)))
        .cloned()
        .collect();
    let known: BTreeMap<String, String> = journal::turn_claims(&held)?.into_iter().collect();
    let suspects: Vec<Event> = (events.iter())
        .filter(|e| turn(e).is_some_and(|id| known.contains_key(&id) || times[&id] > 1))
        .cloned()
        .collect();
    let claims = journal::turn_claims(&journal::check_batch(conv, &suspects)?);
    let conflict = |turn: &str| {
        HostError::Input(format!(
            "conflicting_turn: turn {turn:?} is already in the journal with other content; a turn id names one message (nothing imported)"
        ))
    };
    for (turn, claim) in claims.map_err(|e| match e {
        HostError::Core(e) => conflict(e.ids.first().map_or("", String::as_str)),
        other => other,
    })? {
        if known.get(&turn).is_some_and(|k| *k != claim) {
            return Err(conflict(&turn));
        }
    }
    Ok(())
}

/// Append `events` to `conv`: in one batch, or (`compact`) one by one with
/// the driver after each message, as a live conversation would, with a
/// progress bar. `active`: the conversation holds its activation frontier
/// already (the caller has read it).
pub fn import_events(
    d: &ProgramDriver,
    conv: &str,
    events: Vec<foldline_core::event::Event>,
    compact: bool,
    mut active: bool,
) -> Result<usize, HostError> {
    let n = events.len();
    if !compact {
        d.journal().append(conv, &events)?;
        return Ok(n);
    }
    let bar = indicatif::ProgressBar::new(n as u64);
    bar.set_style(
        indicatif::ProgressStyle::with_template("{bar:40} {pos}/{len} events, {msg}")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    let mut boundaries = 0;
    // The append check measured the corrections and late deliveries against
    // the chain as it was: nothing is compacted until the last of them is
    // written, so none lands on a turn a compaction of this import covered
    // (an amendment the check did not bound). A conversation not yet
    // activated is checked at each message until its first turn that is not
    // pinned, which activates it, all the same (activated later, the turns
    // before would never be summarized); the backlog is folded once the
    // last of them is written.
    let amending = events
        .iter()
        .rposition(|e| matches!(e, Event::Correction(_) | Event::LateDelivery(_)));
    for (i, e) in events.into_iter().enumerate() {
        let message = matches!(e, Event::Message(_));
        let passes = match amending {
            Some(last) if i < last => {
                // The first turn that is not pinned activates (a pinned one is not eligible).
                let first = message && !active;
                active |= first && !e.is_pinned();
                usize::from(first)
            }
            Some(last) if i == last => usize::MAX,
            _ => usize::from(message),
        };
        d.journal().append(conv, std::slice::from_ref(&e))?;
        for _ in 0..passes {
            let outcome = d.on_message(conv)?;
            match &outcome {
                Outcome::Compacted(_) => {
                    boundaries += 1;
                    bar.set_message(format!("{boundaries} compactions"));
                }
                // Between messages, as a live conversation would: the
                // compaction that is due later uses the prepared summary.
                Outcome::Warm(_) => {
                    d.prepare_warm(conv)?;
                }
                _ => {}
            }
            // One pass per message; the held-back backlog until it is folded.
            if !matches!(outcome, Outcome::Compacted(_)) {
                break;
            }
        }
        bar.inc(1);
    }
    bar.finish_and_clear();
    Ok(n)
}
