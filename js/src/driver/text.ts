// The timeline, drawn from a conversation's events kept as the JSON text of
// the request between drawings (the Rust driver's driver/text.rs): a page
// drawn after a write reads and encodes only the events written since, not
// the whole conversation again. The journal is append-only, so what was read
// up to a position never changes: the text is a cache, never a rule (the
// request is the same, character for character, as one from a whole read).
// All conversations' texts together stay within `timelineTextChars`; the
// least recently drawn are let go first. A conversation larger than the
// bound keeps the text of its latest messages (half the bound) and where
// every event is: a page that reaches a message let go reads the journal
// again from the first it reaches to the last (`readEventsPage` when the
// journal has it), and a whole timeline reads them all again
// once. A page (`limit` items) is drawn from
// the events it can reach: every event but the messages below the page's
// reach (`reach`), so a page of a long conversation costs the core its own
// messages, not every message.

import { FoldlineError } from "../error.js";
import { callText } from "../call.js";
import { PINNED_ROLES, TIMELINE_PAGE_ITEMS, TIMELINE_TEXT_CHARS } from "../defaults.js";
import type { Timeline, TimelinePage } from "../types.js";
import type { StoredEvent } from "../journal/journal.js";
import { load, state, type Ctx } from "./read.js";

/** One conversation's events, each encoded. */
interface Text {
  /** The encoded events, in journal order; `undefined` for a message whose text was let go (`shed`), read again when a page reaches it. */
  parts: Array<string | undefined>;
  /** Each one's journal position. */
  seqs: number[];
  /** Each message's (or late delivery's) position, when the timeline draws it (pinned turns are not drawn); -1 for every other event. */
  turns: number[];
  /** Whether a `turnMeta` event is among them (a page is then drawn from all of them: a turn's metadata and its message may disagree on its position). */
  metas: boolean;
  /** The length of the parts kept, with a comma after each, and `INDEX_CHARS` for each event. */
  chars: number;
  /** When it was last drawn from (a counter). */
  used: number;
}

/**
 * A reader of the journal: the events after a position, or (`limit`) at
 * least the first `limit` of them (`readEventsPage` when the journal has it).
 */
type Read = (after: number, limit?: number) => Promise<StoredEvent[]>;

/** What knowing where one event is (its position and turn) counts against the bound, in UTF-16 units (16 bytes). */
const INDEX_CHARS = 8;

/** The kept texts of every conversation of a compactor. */
export class Texts {
  private by = new Map<string, Text>();
  private chars = 0;
  private clock = 0;
  constructor(private readonly bound: number = TIMELINE_TEXT_CHARS) {}

  /**
   * Read `id`'s events up to `seq` (`read(after)` reads only what the text
   * does not hold yet), and answer the text of those a page is drawn from
   * (all of them without a `limit`): one read for any number of pages
   * (`whole`: every page of the timeline; messages let go are read again
   * once, here).
   */
  async through(id: string, seq: number, read: Read, whole = false): Promise<(page: TimelinePage) => Promise<string>> {
    // Taken out while the journal is read: a drawing that overlaps this one reads for itself.
    const t = this.by.get(id) ?? { parts: [], seqs: [], turns: [], metas: false, chars: 0, used: 0 };
    this.by.delete(id);
    this.chars -= t.chars;
    const held = t.seqs.length ? t.seqs[t.seqs.length - 1] : 0;
    if (held < seq) {
      for (const e of await read(held)) {
        if (e.seq <= held) continue; // a journal that answered more than was asked adds nothing twice
        const part = JSON.stringify(e.event);
        const ev = e.event;
        const drawn = (ev.type === "message" || ev.type === "lateDelivery") && !ev.pinned && !PINNED_ROLES.has(ev.role);
        t.parts.push(part);
        t.seqs.push(e.seq);
        t.turns.push(drawn ? ev.sourceSeq : -1);
        t.metas ||= ev.type === "turnMeta";
        t.chars += part.length + 1 + INDEX_CHARS;
      }
    }
    let n = t.seqs.length;
    while (n > 0 && t.seqs[n - 1] > seq) n--;
    if (whole) await restore(t, read);
    // Events a later drawing adds go after the first `n`: never in these
    // pages; and the pages draw from these parts, whatever `keep` lets go.
    const parts = t.parts.slice(0, n), seqs = t.seqs.slice(0, n), turns = t.turns.slice(0, n), metas = t.metas;
    t.used = ++this.clock;
    this.keep(id, t);
    return async (page) => {
      // Only a page the core takes is sliced (it refuses any other, naming it):
      // every event but the messages below the page's reach and those at or
      // past `before` (no page below it draws them).
      const count = (x: unknown) => Number.isSafeInteger(x) && (x as number) >= 0;
      const sliced = (page.limit === undefined || count(page.limit)) && (page.before === undefined || count(page.before)) && !metas;
      const from = sliced && page.limit !== undefined ? reach(turns, page.limit, page.before) : 0;
      const past = sliced && page.before !== undefined ? page.before : Infinity;
      const wanted = (i: number) => turns[i] < 0 || (turns[i] >= from && turns[i] < past);
      // Messages let go that the page reaches: read again, from the first.
      const again = await readAgain(seqs.filter((_, i) => parts[i] === undefined && wanted(i)), read);
      const out: string[] = [];
      for (let i = 0; i < n; i++) {
        if (!wanted(i)) continue;
        const part = parts[i] ?? again.get(seqs[i]);
        if (part === undefined) throw gone(seqs[i]);
        out.push(part);
      }
      return out.join(",");
    };
  }

  /** Keep `t`, letting the least recently drawn go while the bound is passed (one larger than the bound is not kept). */
  private keep(id: string, t: Text): void {
    // Another drawing of the conversation, overlapping this one, may have put its own back meanwhile: this one replaces it.
    const other = this.by.get(id);
    if (other) {
      this.by.delete(id);
      this.chars -= other.chars;
    }
    if (t.chars > this.bound) shed(t, this.bound / 2);
    if (t.chars > this.bound) return;
    while (this.chars + t.chars > this.bound) {
      let oldest: [string, Text] | undefined;
      for (const kv of this.by) if (!oldest || kv[1].used < oldest[1].used) oldest = kv;
      if (!oldest) break;
      this.by.delete(oldest[0]);
      this.chars -= oldest[1].chars;
    }
    this.chars += t.chars;
    this.by.set(id, t);
  }
}

/**
 * Let go of the text of the oldest drawn messages until `t` holds at most
 * `chars` (every other event stays): a conversation larger than its share
 * of the bound keeps its latest messages, which the pages after a write
 * draw, and where every event is, from which a page finds its reach.
 */
function shed(t: Text, chars: number): void {
  for (let i = 0; i < t.parts.length && t.chars > chars; i++) {
    const part = t.parts[i];
    if (t.turns[i] < 0 || part === undefined) continue;
    t.chars -= part.length + 1;
    t.parts[i] = undefined;
  }
}

/** Read again the messages `t` let go of (once, for a drawing of many pages). */
async function restore(t: Text, read: Read): Promise<void> {
  const again = await readAgain(t.seqs.filter((_, i) => t.parts[i] === undefined), read);
  t.parts.forEach((p, i) => {
    if (p !== undefined) return;
    const part = again.get(t.seqs[i]);
    if (part === undefined) throw gone(t.seqs[i]);
    t.parts[i] = part;
    t.chars += part.length + 1;
  });
}

/**
 * The events at `seqs` (in journal order) read again, each encoded: one read
 * of the span from the first to the last (positions are dense), nothing when
 * there are none (the Rust driver's `read_again`).
 */
async function readAgain(seqs: number[], read: Read): Promise<Map<number, string>> {
  const again = new Map<number, string>();
  if (!seqs.length) return again;
  const first = seqs[0], last = seqs[seqs.length - 1], wanted = new Set(seqs);
  for (const e of await read(first - 1, last - first + 1)) if (wanted.has(e.seq)) again.set(e.seq, JSON.stringify(e.event));
  return again;
}

/** A journal that no longer answers a position it answered before (the journal's failure, as its own errors are). */
function gone(seq: number): Error {
  return new Error(`the journal no longer answers the event at position ${seq}, which it answered before`);
}

/**
 * The lowest position a page of the latest `limit` items below `before` can
 * reach: the (`limit` + 1)-th latest position of a drawn message below
 * `before` (0, everything, when there are fewer). A page spans at most
 * `limit` positions (a run of the latest items, widened only within one
 * position), so it lies above this position, and a drawn message at or
 * above it is left before the page: the item just before the page, which
 * names `earlier`, is at or above it too. Dividers are drawn from
 * boundaries, tasks and failures, which are always sent (the Rust driver's
 * `reach` in driver/text.rs).
 */
function reach(turns: number[], limit: number, before: number | undefined): number {
  const at = [...new Set(turns.filter((p) => p >= 0 && (before === undefined || p < before)))].sort((a, b) => a - b);
  const i = at.length - (limit + 1);
  return i >= 0 ? at[i] : 0;
}

/**
 * The chat timeline of `id`, or one page of it, as far as its resolution
 * read the journal (a boundary another writer appends meanwhile draws with
 * the next resolution, not as one it refused), from the kept text and what
 * was written after it.
 */
export async function drawTimeline(c: Ctx, texts: Texts, id: string, page: TimelinePage = {}): Promise<Timeline> {
  let accepted: string[] = [];
  let retired: string[] = [];
  let seq = 0;
  try {
    const { s, res } = await load(c, id);
    accepted = res.accepted;
    retired = res.retiredBoundaries;
    seq = s.seq;
  } catch (e) {
    if (!(e instanceof FoldlineError)) throw e; // a rejected chain draws no completed divider
    seq = state(c, id).seq;
  }
  const j = c.o.journal;
  const read = (after: number, limit?: number) => (limit !== undefined && j.readEventsPage ? j.readEventsPage(id, after, limit) : j.readEvents(id, after));
  const size = Math.max(1, c.o.timelinePageItems ?? TIMELINE_PAGE_ITEMS);
  const one = page.limit !== undefined && page.limit <= size;
  const events = await texts.through(id, seq, read, !one);
  const draw = async (p: TimelinePage): Promise<Timeline> => {
    const rest = JSON.stringify({ accepted, ...(retired.length ? { retired } : {}), limit: p.limit, before: p.before });
    return callText<Timeline>("timeline", `{"events":[${await events(p)}],${rest.slice(1)}`);
  };
  if (one) return draw(page);
  // A whole timeline, or a page larger than one call's, in pages from the
  // latest back (each one's `earlier` the next one's `before`): no core
  // call takes a whole long conversation (the Rust driver's `draw_in_pages`).
  const pages: Timeline["items"][] = [];
  let left = page.limit;
  for (let before = page.before; ;) {
    const t = await draw({ limit: left === undefined ? size : Math.min(size, left), before });
    pages.push(t.items);
    if (left !== undefined) left -= t.items.length;
    if (t.earlier === undefined || left === 0 || t.items.length === 0) {
      return { items: pages.reverse().flat(), ...(page.limit !== undefined && t.earlier !== undefined ? { earlier: t.earlier } : {}) };
    }
    before = t.earlier;
  }
}
