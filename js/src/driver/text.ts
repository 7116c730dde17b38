// The timeline, drawn from a conversation's events kept as the JSON text of
// the request between drawings (the Rust driver's driver/text.rs): a page
// drawn after a write reads and encodes only the events written since, not
// the whole conversation again. The journal is append-only, so what was read
// up to a position never changes: the text is a cache, never a rule (the
// request is the same, character for character, as one from a whole read).
// All conversations' texts together stay within `timelineTextChars`; the
// least recently drawn are let go first, and a conversation larger than the
// bound is read whole at each drawing. A page (`limit` items) is drawn from
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
  /** The encoded events, in journal order. */
  parts: string[];
  /** Each one's journal position. */
  seqs: number[];
  /** Each message's (or late delivery's) position, when the timeline draws it (pinned turns are not drawn); -1 for every other event. */
  turns: number[];
  /** Whether a `turnMeta` event is among them (a page is then drawn from all of them: a turn's metadata and its message may disagree on its position). */
  metas: boolean;
  /** Their length, with the commas between them. */
  chars: number;
  /** When it was last drawn from (a counter). */
  used: number;
}

/** The kept texts of every conversation of a compactor. */
export class Texts {
  private by = new Map<string, Text>();
  private chars = 0;
  private clock = 0;
  constructor(private readonly bound: number = TIMELINE_TEXT_CHARS) {}

  /**
   * Read `id`'s events up to `seq` (`read(after)` reads only what the text
   * does not hold yet), and answer the text of those a page is drawn from
   * (all of them without a `limit`): one read for any number of pages.
   */
  async through(id: string, seq: number, read: (after: number) => Promise<StoredEvent[]>): Promise<(page: TimelinePage) => string> {
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
        t.chars += part.length + 1;
      }
    }
    let n = t.seqs.length;
    while (n > 0 && t.seqs[n - 1] > seq) n--;
    t.used = ++this.clock;
    this.keep(id, t);
    // Events a later drawing adds go after the first `n`: never in these pages.
    return (page) => {
      // Only a page the core takes is sliced (it refuses any other, naming it):
      // every event but the messages below the page's reach and those at or
      // past `before` (no page below it draws them).
      const whole = (x: unknown) => Number.isSafeInteger(x) && (x as number) >= 0;
      const sliced = (page.limit === undefined || whole(page.limit)) && (page.before === undefined || whole(page.before)) && !t.metas;
      const from = sliced && page.limit !== undefined ? reach(t.turns.slice(0, n), page.limit, page.before) : 0;
      const past = sliced && page.before !== undefined ? page.before : Infinity;
      const kept = from > 0 || past !== Infinity
        ? t.parts.slice(0, n).filter((_, i) => t.turns[i] < 0 || (t.turns[i] >= from && t.turns[i] < past))
        : n === t.parts.length ? t.parts : t.parts.slice(0, n);
      return kept.join(",");
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
  const events = await texts.through(id, seq, (after) => c.o.journal.readEvents(id, after));
  const draw = (p: TimelinePage): Timeline => {
    const rest = JSON.stringify({ accepted, ...(retired.length ? { retired } : {}), limit: p.limit, before: p.before });
    return callText<Timeline>("timeline", `{"events":[${events(p)}],${rest.slice(1)}`);
  };
  if (page.limit !== undefined) return draw(page);
  // A whole timeline, in pages from the latest back (each one's `earlier`
  // the next one's `before`): no core call takes a whole long conversation.
  const limit = Math.max(1, c.o.timelinePageItems ?? TIMELINE_PAGE_ITEMS);
  const pages: Timeline["items"][] = [];
  for (let before = page.before; ;) {
    const t = draw({ limit, before });
    pages.push(t.items);
    if (t.earlier === undefined) break;
    before = t.earlier;
  }
  return { items: pages.reverse().flat() };
}
