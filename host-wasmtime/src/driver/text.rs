//! A conversation's events as the JSON text of a timeline request, kept
//! between drawings: a page drawn after a write reads and encodes only the
//! events written since, not the whole conversation again (at 50,000
//! messages the whole read and its encoding were ~40 % of a drawing).
//!
//! The journal is append-only, so what was read up to a position never
//! changes; the text is a cache, never a rule (a drawing from it is the
//! same request, byte for byte, as one from a whole read). The texts of all
//! conversations together are bounded ([`KEPT_BYTES`]); the least recently
//! drawn are let go first. A conversation larger than the bound keeps the
//! text of its latest messages (half the bound) and where every event is:
//! a page that reaches a message let go reads the journal again from the
//! first it reaches to the last (`Journal::read_events_page`), and a whole
//! timeline reads them all again once.
//!
//! A page (`limit` items) is drawn from the events it can reach, not the
//! whole conversation: every event but the messages at positions below
//! the page's reach ([`Text::write_page`]), so a page of a conversation of
//! 50,000 messages costs the core its own messages, not every message.

use std::collections::BTreeMap;
use std::ops::Range;

use foldline_core::event::Event;

use crate::error::{HostError, Result};
use crate::journal::StoredEvent;

/// The most text kept for all conversations together.
pub(crate) const KEPT_BYTES: usize = foldline_core::defaults::TIMELINE_TEXT_BYTES as usize;

/// A reader of the journal: at most `limit` events after a position
/// ([`Journal::read_events_page`](crate::journal::Journal::read_events_page)).
type Read<'a> = &'a mut dyn FnMut(u64, usize) -> Result<Vec<StoredEvent>>;

/// One conversation's events, each encoded.
#[derive(Default)]
pub(super) struct Text {
    /// The encoded events, one after another.
    json: Vec<u8>,
    /// Each event's journal position, where its text is and its turn.
    ends: Vec<End>,
    /// Whether a `turnMeta` event is among them (a page is then drawn
    /// from all of them: a turn's metadata and its message may disagree
    /// on its position).
    metas: bool,
    /// When it was last drawn from (a counter).
    used: u64,
}

/// One event of a text: where its encoding is, and what a page needs to
/// know of it.
struct End {
    seq: u64,
    /// Where its encoding is in the text; `None` when it was let go (the
    /// oldest messages of a conversation larger than its share of the
    /// bound: [`Text::shed`]), to be read again if a page reaches it.
    text: Option<Range<usize>>,
    /// A message's (or late delivery's) position, and whether the timeline
    /// draws it (pinned turns are not drawn).
    turn: Option<(u64, bool)>,
}

impl End {
    fn of(seq: u64, text: Range<usize>, event: &Event) -> End {
        let turn = match event {
            Event::Message(m) | Event::LateDelivery(m) => {
                Some((m.source_seq, !(m.pinned || m.role.always_pinned())))
            }
            _ => None,
        };
        End {
            seq,
            text: Some(text),
            turn,
        }
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
            let start = self.json.len();
            serde_json::to_writer(&mut self.json, &e.event)
                .map_err(|e| HostError::Input(e.to_string()))?;
            self.metas |= matches!(e.event, Event::TurnMeta(_));
            self.ends
                .push(End::of(e.seq, start..self.json.len(), &e.event));
        }
        Ok(())
    }

    /// The memory it takes: its text and where each event is.
    fn size(&self) -> usize {
        self.json.len() + self.ends.len() * std::mem::size_of::<End>()
    }

    /// Let go of the text of the oldest drawn messages until the text
    /// holds at most `bytes` with its index (every other event's text
    /// stays):
    /// a conversation larger than its share of the bound keeps its latest
    /// messages, which the pages after a write draw, and the index of all
    /// of them, from which a page finds its reach.
    fn shed(&mut self, bytes: usize) {
        let mut left = self.size();
        for e in &mut self.ends {
            if left <= bytes {
                break;
            }
            // Only messages the timeline draws (a pinned turn's text stays,
            // as in the JS driver's `shed`).
            if matches!(e.turn, Some((_, true))) {
                if let Some(r) = e.text.take() {
                    left -= r.len();
                }
            }
        }
        let mut json = Vec::with_capacity(left.saturating_sub(self.size() - self.json.len()));
        for r in self.ends.iter_mut().filter_map(|e| e.text.as_mut()) {
            let start = json.len();
            json.extend_from_slice(&self.json[r.clone()]);
            *r = start..json.len();
        }
        self.json = json;
    }

    /// Read again the events whose text was let go (once, for a drawing
    /// of many pages: the whole timeline).
    pub(super) fn restore(&mut self, read: Read<'_>) -> Result<()> {
        let lacking: Vec<u64> = (self.ends.iter())
            .filter(|e| e.text.is_none())
            .map(|e| e.seq)
            .collect();
        if lacking.is_empty() {
            return Ok(());
        }
        let mut again = read_again(&lacking, read)?;
        let mut json =
            Vec::with_capacity(self.json.len() + again.values().map(Vec::len).sum::<usize>());
        for e in &mut self.ends {
            let start = json.len();
            match &e.text {
                Some(r) => json.extend_from_slice(&self.json[r.clone()]),
                None => json.extend(again.remove(&e.seq).ok_or_else(|| gone(e.seq))?),
            }
            e.text = Some(start..json.len());
        }
        self.json = json;
        Ok(())
    }

    /// Write the text of the events up to `seq` that a page of the latest
    /// `limit` items below `before` is drawn from: every event but the
    /// messages below [`reach`] and those at or past `before` (no page
    /// below it draws them). The core draws the same page from them as
    /// from every event, `earlier` included. Events whose text was let go
    /// are read again (`read`), from the first the page reaches to the
    /// last.
    pub(super) fn write_page(
        &self,
        seq: u64,
        limit: Option<u64>,
        before: Option<u64>,
        out: &mut Vec<u8>,
        read: Read<'_>,
    ) -> Result<()> {
        let n = self.ends.partition_point(|e| e.seq <= seq);
        let ends = &self.ends[..n];
        let from = match limit {
            Some(limit) => reach(ends, limit, before),
            None => 0,
        };
        let past = before.unwrap_or(u64::MAX);
        let all = self.metas || (from == 0 && past == u64::MAX);
        let wanted = |e: &End| all || e.turn.is_none_or(|(at, _)| (from..past).contains(&at));
        let lacking: Vec<u64> = ends
            .iter()
            .filter(|e| e.text.is_none() && wanted(e))
            .map(|e| e.seq)
            .collect();
        let again = read_again(&lacking, read)?;
        let mut first = true;
        for e in ends.iter().filter(|e| wanted(e)) {
            if !first {
                out.push(b',');
            }
            first = false;
            match &e.text {
                Some(r) => out.extend_from_slice(&self.json[r.clone()]),
                None => out.extend_from_slice(again.get(&e.seq).ok_or_else(|| gone(e.seq))?),
            }
        }
        Ok(())
    }
}

/// The events at `seqs` (ascending) read again, each encoded: one read of
/// the span from the first to the last (positions are dense), nothing when
/// there are none.
fn read_again(seqs: &[u64], read: Read<'_>) -> Result<BTreeMap<u64, Vec<u8>>> {
    let mut out = BTreeMap::new();
    let (Some(&first), Some(&last)) = (seqs.first(), seqs.last()) else {
        return Ok(out);
    };
    let limit = usize::try_from(last - first + 1).unwrap_or(usize::MAX);
    for e in read(first - 1, limit)? {
        if seqs.binary_search(&e.seq).is_ok() {
            let text = serde_json::to_vec(&e.event).map_err(|e| HostError::Input(e.to_string()))?;
            out.insert(e.seq, text);
        }
    }
    Ok(out)
}

/// A journal that no longer answers a position it answered before.
fn gone(seq: u64) -> HostError {
    HostError::Storage(format!(
        "the journal no longer answers the event at position {seq}, which it answered before"
    ))
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
        self.bytes -= text.size();
        text
    }

    /// Keep `text` again, as the most recently drawn.
    pub(super) fn put(&mut self, conversation: &str, mut text: Text) {
        self.clock += 1;
        text.used = self.clock;
        self.keep(conversation, text);
    }

    /// Keep `text`, letting the least recently drawn go while the bound is
    /// passed; a text larger than the bound first lets go of its oldest
    /// messages ([`Text::shed`]) down to half of it, so it grows a while
    /// before it sheds again. What cannot be let go of (every event but
    /// the messages) past the bound is not kept.
    fn keep(&mut self, conversation: &str, mut text: Text) {
        // Another drawing of the conversation, overlapping this one, may
        // have put its own back meanwhile: this one replaces it.
        if let Some(other) = self.by.remove(conversation) {
            self.bytes -= other.size();
        }
        if text.size() > self.bound {
            text.shed(self.bound / 2);
        }
        if text.size() > self.bound {
            return;
        }
        while self.bytes + text.size() > self.bound {
            let Some(oldest) = self
                .by
                .iter()
                .min_by_key(|(_, t)| t.used)
                .map(|(k, _)| k.clone())
            else {
                break;
            };
            if let Some(t) = self.by.remove(&oldest) {
                self.bytes -= t.size();
            }
        }
        self.bytes += text.size();
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
        text.write_page(seq, None, None, out, &mut |_, _| panic!("nothing let go"))
            .expect("written");
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
        let mut out = Vec::new();
        text.write_page(6, None, None, &mut out, &mut |_, _| {
            panic!("nothing let go")
        })
        .expect("written");
        assert_eq!(out, whole(&journal, 6));
    }

    #[test]
    fn the_least_recently_drawn_text_goes_first_past_the_bound() {
        let journal: Vec<StoredEvent> = (1..=10).map(stored).collect();
        let mut text = Text::default();
        text.read_to(10, |_| Ok(journal.clone())).expect("read");
        let one = text.size();
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
        // A text larger than the bound keeps half of it, its latest messages.
        let mut small = Texts::within(one / 2);
        write(
            &mut small,
            "a",
            10,
            reader(&journal, 10, &mut asked),
            &mut Vec::new(),
        );
        assert!(small.by.len() == 1 && small.bytes > 0 && small.bytes <= one / 4);
        // Not even where its events are fits: nothing is kept.
        let mut none = Texts::within(0);
        write(
            &mut none,
            "a",
            10,
            reader(&journal, 10, &mut asked),
            &mut Vec::new(),
        );
        assert!(none.by.is_empty() && none.bytes == 0);
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
        let (a, b) = (first.size(), second.size());
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
            text.write_page(100, limit, before, &mut out, &mut |_, _| {
                panic!("nothing let go")
            })
            .expect("written");
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

    /// A frontier among messages: an event a text never lets go of.
    fn frontier_at(seq: u64) -> StoredEvent {
        let event: Event = serde_json::from_value(serde_json::json!({
            "type": "frontier", "activatingSeq": 1, "activatingTurnId": "t1", "compactorId": "a",
            "declarationFingerprint": "sha256:00", "established": false, "historyAgents": [],
            "id": format!("f{seq}"), "policy": {"kind": "chars", "retain": 10, "trigger": 20},
            "route": {"chat": "", "conversation": "c", "sender": ""},
            "rulesetVersion": "foldline-ruleset/2", "startSeq": 1, "targetId": "a"
        }))
        .expect("a frontier event");
        StoredEvent { seq, event }
    }

    /// A conversation larger than the bound keeps its latest messages and
    /// every other event: a page of the latest is drawn without a read; one
    /// that reaches a message let go reads the journal once, from the first
    /// it reaches; the whole text is read again once; every page is the
    /// page of a whole read, byte for byte.
    /// 100 events: longer messages, a frontier at every tenth position.
    fn messages_and_frontiers() -> Vec<StoredEvent> {
        let longer = |seq| {
            let mut e = stored(seq);
            if let Event::Message(m) = &mut e.event {
                m.parts = vec![foldline_core::turn::Part::Text {
                    text: "a longer message ".repeat(20),
                }];
            }
            e
        };
        (1..=100)
            .map(|seq| {
                if seq % 10 == 0 {
                    frontier_at(seq)
                } else {
                    longer(seq)
                }
            })
            .collect()
    }

    /// A reader of `journal` that notes what it is asked.
    fn noting<'a>(
        journal: &'a [StoredEvent],
        asked: &'a std::cell::RefCell<Vec<(u64, usize)>>,
    ) -> impl FnMut(u64, usize) -> Result<Vec<StoredEvent>> + 'a {
        move |after, limit| {
            asked.borrow_mut().push((after, limit));
            Ok((journal.iter().filter(|e| e.seq > after))
                .take(limit)
                .cloned()
                .collect())
        }
    }

    #[test]
    fn a_text_past_the_bound_lets_go_of_its_oldest_messages_and_reads_them_again() {
        let journal = messages_and_frontiers();
        let mut text = Text::default();
        text.read_to(100, |_| Ok(journal.clone())).expect("read");
        let all = text.size();
        let mut texts = Texts::within(all / 2);
        texts.put("c", text);
        let text = texts.take("c");
        assert!(
            text.size() <= all / 4 && texts.bytes == 0,
            "{}",
            text.json.len()
        );
        let let_go: Vec<u64> = (text.ends.iter())
            .filter(|e| e.text.is_none())
            .map(|e| e.seq)
            .collect();
        assert!(
            !let_go.is_empty() && let_go.iter().all(|s| s % 10 != 0),
            "{let_go:?}"
        );
        let expected = |limit: Option<u64>, before: Option<u64>| {
            let mut whole_text = Text::default();
            whole_text
                .read_to(100, |_| Ok(journal.clone()))
                .expect("read");
            let mut out = Vec::new();
            (whole_text.write_page(100, limit, before, &mut out, &mut |_, _| panic!("whole")))
                .expect("written");
            out
        };
        let asked = std::cell::RefCell::new(Vec::new());
        let page = |limit: Option<u64>, before: Option<u64>| {
            let mut out = Vec::new();
            text.write_page(100, limit, before, &mut out, &mut noting(&journal, &asked))
                .expect("written");
            out
        };
        assert_eq!(page(Some(5), None), expected(Some(5), None));
        assert!(asked.borrow().is_empty(), "the latest page read {asked:?}");
        assert_eq!(page(Some(5), Some(20)), expected(Some(5), Some(20)));
        assert_eq!(page(None, None), expected(None, None));
        // Each read from the first message let go the page reaches to the
        // last: 14 to 19 below 20 (20 is a frontier, kept), every one let go
        // for the whole.
        let (first, last) = (let_go[0], let_go[let_go.len() - 1]);
        let whole_span = usize::try_from(last - first + 1).unwrap();
        assert_eq!(*asked.borrow(), vec![(13, 6), (first - 1, whole_span)]);
        let mut text = text;
        let reads = std::cell::RefCell::new(Vec::new());
        text.restore(&mut noting(&journal, &reads)).expect("read");
        assert_eq!(*reads.borrow(), vec![(first - 1, whole_span)]);
        assert!(text.ends.iter().all(|e| e.text.is_some()));
        let mut out = Vec::new();
        text.write_page(100, None, None, &mut out, &mut |_, _| panic!("restored"))
            .expect("written");
        assert_eq!(out, expected(None, None));
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
