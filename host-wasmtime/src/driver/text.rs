//! A conversation's events as the JSON text of a timeline request, kept
//! between drawings: a page drawn after a write reads and encodes only the
//! events written since, not the whole conversation again (at 50,000
//! messages the whole read and its encoding were ~40 % of a drawing).
//!
//! The journal is append-only, so what was read up to a position never
//! changes; the text is a cache, never a rule (a drawing from it is the
//! same request, byte for byte, as one from a whole read). The texts of all
//! conversations together are bounded ([`KEPT_BYTES`]); the least recently
//! drawn are let go first, and a conversation larger than the bound is read
//! whole at each drawing, as before.
//!
//! A page (`limit` items) is drawn from the events it can reach, not the
//! whole conversation: every event but the messages at positions below
//! the page's reach ([`Text::write_page`]), so a page of a conversation of
//! 50,000 messages costs the core its own messages, not every message.

use std::collections::BTreeMap;

use foldline_core::event::Event;

use crate::error::{HostError, Result};
use crate::journal::StoredEvent;

/// The most text kept for all conversations together.
pub(crate) const KEPT_BYTES: usize = foldline_core::defaults::TIMELINE_TEXT_BYTES as usize;

/// One conversation's events, each encoded, joined by commas.
#[derive(Default)]
pub(super) struct Text {
    /// The encoded events.
    json: Vec<u8>,
    /// Each event's journal position, where its text ends and its turn.
    ends: Vec<End>,
    /// Whether a `turnMeta` event is among them (a page is then drawn
    /// from all of them: a turn's metadata and its message may disagree
    /// on its position).
    metas: bool,
    /// When it was last drawn from (a counter).
    used: u64,
}

/// Where one event's text ends, and what a page needs to know of it.
struct End {
    seq: u64,
    end: usize,
    /// A message's (or late delivery's) position, and whether the timeline
    /// draws it (pinned turns are not drawn).
    turn: Option<(u64, bool)>,
}

impl End {
    fn of(seq: u64, end: usize, event: &Event) -> End {
        let turn = match event {
            Event::Message(m) | Event::LateDelivery(m) => {
                Some((m.source_seq, !(m.pinned || m.role.always_pinned())))
            }
            _ => None,
        };
        End { seq, end, turn }
    }
}

impl Text {
    /// Read up to `seq` (`read(after)` reads the journal after a
    /// position) what this text does not hold yet.
    pub(super) fn read_to(
        &mut self,
        seq: u64,
        read: impl FnOnce(u64) -> Result<Vec<StoredEvent>>,
    ) -> Result<()> {
        let held = self.ends.last().map_or(0, |e| e.seq);
        if held >= seq {
            return Ok(());
        }
        // Only positions past what is held (a journal that answered more
        // than was asked adds nothing twice).
        for e in read(held)?.into_iter().filter(|e| e.seq > held) {
            if !self.json.is_empty() {
                self.json.push(b',');
            }
            serde_json::to_writer(&mut self.json, &e.event)
                .map_err(|e| HostError::Input(e.to_string()))?;
            self.metas |= matches!(e.event, Event::TurnMeta(_));
            self.ends.push(End::of(e.seq, self.json.len(), &e.event));
        }
        Ok(())
    }

    /// The text of the events up to `seq`.
    pub(super) fn through(&self, seq: u64) -> &[u8] {
        let n = self.ends.partition_point(|e| e.seq <= seq);
        &self.json[..n.checked_sub(1).map_or(0, |i| self.ends[i].end)]
    }

    /// Write the text of the events up to `seq` that a page of the latest
    /// `limit` items below `before` is drawn from: every event but the
    /// messages below [`reach`] and those at or past `before` (no page
    /// below it draws them). The core draws the same page from them as
    /// from every event, `earlier` included.
    pub(super) fn write_page(
        &self,
        seq: u64,
        limit: Option<u64>,
        before: Option<u64>,
        out: &mut Vec<u8>,
    ) {
        let n = self.ends.partition_point(|e| e.seq <= seq);
        let from = match limit {
            Some(limit) => reach(&self.ends[..n], limit, before),
            None => 0,
        };
        let past = before.unwrap_or(u64::MAX);
        if self.metas || (from == 0 && past == u64::MAX) {
            out.extend_from_slice(self.through(seq));
            return;
        }
        let (mut start, mut first) = (0, true);
        for e in &self.ends[..n] {
            if e.turn.is_none_or(|(at, _)| (from..past).contains(&at)) {
                if !first {
                    out.push(b',');
                }
                out.extend_from_slice(&self.json[start..e.end]);
                first = false;
            }
            start = e.end + 1;
        }
    }
}

/// The lowest position a page of the latest `limit` items below
/// `before` can reach: the (`limit` + 1)-th latest position of a drawn
/// message below `before` (0, everything, when there are fewer). A
/// page spans at most `limit` positions (it is a run of the latest
/// items, widened only within one position), so it lies above this
/// position, and a drawn message at or above it is left before the
/// page: the item just before the page, which names `earlier`, is at
/// or above it too. Dividers are drawn from boundaries, tasks and
/// failures, which are always sent.
fn reach(ends: &[End], limit: u64, before: Option<u64>) -> u64 {
    let mut at: Vec<u64> = ends
        .iter()
        .filter_map(|e| match e.turn {
            Some((p, true)) if before.is_none_or(|b| p < b) => Some(p),
            _ => None,
        })
        .collect();
    at.sort_unstable();
    at.dedup();
    let wanted = usize::try_from(limit)
        .unwrap_or(usize::MAX)
        .saturating_add(1);
    at.len().checked_sub(wanted).map_or(0, |i| at[i])
}

/// The kept texts of every conversation.
pub(super) struct Texts {
    by: BTreeMap<String, Text>,
    bytes: usize,
    bound: usize,
    clock: u64,
}

impl Default for Texts {
    fn default() -> Self {
        Texts::within(KEPT_BYTES)
    }
}

impl Texts {
    /// Texts kept within `bound` bytes.
    pub(super) fn within(bound: usize) -> Self {
        Texts {
            by: BTreeMap::new(),
            bytes: 0,
            bound,
            clock: 0,
        }
    }

    /// The kept text of `conversation` (empty when none is), taken out
    /// while it is read to and drawn from.
    pub(super) fn take(&mut self, conversation: &str) -> Text {
        let text = self.by.remove(conversation).unwrap_or_default();
        self.bytes -= text.json.len();
        text
    }

    /// Keep `text` again, as the most recently drawn.
    pub(super) fn put(&mut self, conversation: &str, mut text: Text) {
        self.clock += 1;
        text.used = self.clock;
        self.keep(conversation, text);
    }

    /// Keep `text`, letting the least recently drawn go while the bound is
    /// passed (a text larger than the bound is not kept).
    fn keep(&mut self, conversation: &str, text: Text) {
        // Another drawing of the conversation, overlapping this one, may
        // have put its own back meanwhile: this one replaces it.
        if let Some(other) = self.by.remove(conversation) {
            self.bytes -= other.json.len();
        }
        if text.json.len() > self.bound {
            return;
        }
        while self.bytes + text.json.len() > self.bound {
            let Some(oldest) = self
                .by
                .iter()
                .min_by_key(|(_, t)| t.used)
                .map(|(k, _)| k.clone())
            else {
                break;
            };
            if let Some(t) = self.by.remove(&oldest) {
                self.bytes -= t.json.len();
            }
        }
        self.bytes += text.json.len();
        self.by.insert(conversation.to_owned(), text);
    }
}

/// A timeline request's JSON with `events` written from the kept text:
/// `request` is the request encoded without events (`{"events":[],…}`),
/// `events` writes the events' text.
pub(super) fn with_events(
    request: &[u8],
    events: impl FnOnce(&mut Vec<u8>) -> Result<()>,
) -> Result<Vec<u8>> {
    const EMPTY: &[u8] = b"{\"events\":[]";
    let rest = request.strip_prefix(EMPTY).ok_or_else(|| {
        HostError::Input("a timeline request is encoded with its events first".into())
    })?;
    let mut out = b"{\"events\":[".to_vec();
    events(&mut out)?;
    out.push(b']');
    out.extend_from_slice(rest);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stored(seq: u64) -> StoredEvent {
        let event: Event = serde_json::from_value(serde_json::json!({
            "type": "message", "conversation": "c", "sourceSeq": seq, "turnId": format!("t{seq}"),
            "role": "user", "parts": [{"type": "text", "text": "hello"}]
        }))
        .expect("a message event");
        StoredEvent { seq, event }
    }

    /// The events up to `seq` as a whole read encodes them.
    fn whole(journal: &[StoredEvent], seq: u64) -> Vec<u8> {
        let kept: Vec<&Event> = journal
            .iter()
            .filter(|e| e.seq <= seq)
            .map(|e| &e.event)
            .collect();
        let mut out = serde_json::to_vec(&kept).expect("encoded");
        out.remove(0);
        out.pop();
        out
    }

    fn reader<'a>(
        journal: &[StoredEvent],
        seq: u64,
        asked: &'a mut Vec<u64>,
    ) -> impl FnOnce(u64) -> Result<Vec<StoredEvent>> + use<'a> {
        let all: Vec<StoredEvent> = journal
            .iter()
            .filter(|e| e.seq <= seq)
            .map(|e| stored(e.seq))
            .collect();
        move |after| {
            asked.push(after);
            Ok(all.into_iter().filter(|e| e.seq > after).collect())
        }
    }

    /// What the driver does: take, read to `seq`, draw, put back.
    fn write(
        texts: &mut Texts,
        c: &str,
        seq: u64,
        read: impl FnOnce(u64) -> Result<Vec<StoredEvent>>,
        out: &mut Vec<u8>,
    ) {
        let mut text = texts.take(c);
        text.read_to(seq, read).expect("read");
        out.extend_from_slice(text.through(seq));
        texts.put(c, text);
    }

    #[test]
    fn a_kept_text_reads_only_what_is_new_and_is_the_whole_read_at_each_position() {
        let journal: Vec<StoredEvent> = (1..=6).map(stored).collect();
        let mut texts = Texts::default();
        let mut asked = Vec::new();
        for seq in [2, 2, 5, 3, 6, 0] {
            let mut out = Vec::new();
            write(
                &mut texts,
                "c",
                seq,
                reader(&journal, seq, &mut asked),
                &mut out,
            );
            assert_eq!(out, whole(&journal, seq), "at {seq}");
        }
        // Read from 0, then after 2, then after 5: no event read twice.
        assert_eq!(asked, vec![0, 2, 5]);
    }

    #[test]
    fn a_journal_answering_more_than_asked_adds_nothing_twice() {
        let journal: Vec<StoredEvent> = (1..=6).map(stored).collect();
        let mut text = Text::default();
        // Each read answers from the start, whatever position it was asked from.
        text.read_to(3, |_| Ok((1..=3).map(stored).collect()))
            .expect("read");
        text.read_to(6, |_| Ok((1..=6).map(stored).collect()))
            .expect("read");
        assert_eq!(text.through(6), whole(&journal, 6).as_slice());
    }

    #[test]
    fn the_least_recently_drawn_text_goes_first_past_the_bound() {
        let journal: Vec<StoredEvent> = (1..=10).map(stored).collect();
        let one = whole(&journal, 10).len();
        let mut texts = Texts::within(3 * one);
        let mut asked = Vec::new();
        for c in ["a", "b", "c", "a", "d"] {
            write(
                &mut texts,
                c,
                10,
                reader(&journal, 10, &mut asked),
                &mut Vec::new(),
            );
        }
        assert!(texts.bytes <= 3 * one);
        // "b" was drawn least recently when "d" came; "a" was drawn again.
        let kept: Vec<&str> = texts.by.keys().map(String::as_str).collect();
        assert_eq!(kept, ["a", "c", "d"]);
        // A text larger than the bound is not kept.
        let mut small = Texts::within(one - 1);
        write(
            &mut small,
            "a",
            10,
            reader(&journal, 10, &mut asked),
            &mut Vec::new(),
        );
        assert!(small.by.is_empty() && small.bytes == 0);
    }

    #[test]
    fn overlapping_drawings_of_one_conversation_keep_one_text() {
        let journal: Vec<StoredEvent> = (1..=4).map(stored).collect();
        let mut texts = Texts::default();
        let mut asked = Vec::new();
        let mut first = texts.take("c");
        let mut second = texts.take("c");
        first
            .read_to(4, reader(&journal, 4, &mut asked))
            .expect("read");
        second
            .read_to(3, reader(&journal, 3, &mut asked))
            .expect("read");
        let (a, b) = (first.json.len(), second.json.len());
        texts.put("c", first);
        texts.put("c", second);
        assert_eq!((texts.by.len(), texts.bytes), (1, b));
        assert!(a > b);
    }

    #[test]
    fn a_page_is_written_from_the_messages_it_can_reach() {
        let journal: Vec<StoredEvent> = (1..=100).map(stored).collect();
        let mut text = Text::default();
        text.read_to(100, |_| Ok((1..=100).map(stored).collect()))
            .expect("read");
        let page = |limit: Option<u64>, before: Option<u64>| {
            let mut out = Vec::new();
            text.write_page(100, limit, before, &mut out);
            out
        };
        // The page's positions and one before it; nothing earlier.
        assert_eq!(page(Some(5), None), whole(&journal[94..], 100));
        assert_eq!(page(Some(5), Some(50)), whole(&journal[43..49], 100));
        assert_eq!(page(Some(0), None), whole(&journal[99..], 100));
        // Without a limit: all below `before`.
        assert_eq!(page(None, Some(50)), whole(&journal[..49], 100));
        assert_eq!(page(None, None), whole(&journal, 100));
        assert_eq!(page(Some(100), None), whole(&journal, 100));
        assert_eq!(page(Some(u64::MAX), None), whole(&journal, 100));
    }

    #[test]
    fn events_are_written_into_the_request_in_place_of_none() {
        let out = with_events(b"{\"events\":[],\"accepted\":[]}", |o| {
            o.extend_from_slice(b"1,2");
            Ok(())
        })
        .expect("spliced");
        assert_eq!(out, b"{\"events\":[1,2],\"accepted\":[]}");
        assert!(with_events(b"{\"accepted\":[]}", |_| Ok(())).is_err());
    }
}
