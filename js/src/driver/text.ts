// The timeline, drawn from a conversation's events kept as the JSON text of
// the request between drawings (the Rust driver's driver/text.rs): a page
// drawn after a write reads and encodes only the events written since, not
// the whole conversation again. The journal is append-only, so what was read
// up to a position never changes: the text is a cache, never a rule (the
// request is the same, character for character, as one from a whole read).
// All conversations' texts together stay within `timelineTextChars`; the
// least recently drawn are let go first, and a conversation larger than the
// bound is read whole at each drawing.

import { FoldlineError } from "../error.js";
import { callText } from "../call.js";
import { TIMELINE_TEXT_CHARS } from "../defaults.js";
import type { Timeline, TimelinePage } from "../types.js";
import type { StoredEvent } from "../journal/journal.js";
import { load, state, type Ctx } from "./read.js";

/** One conversation's events, each encoded. */
interface Text {
  /** The encoded events, in journal order. */
  parts: string[];
  /** Each one's journal position. */
  seqs: number[];
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

  /** The text of `id`'s events up to `seq`, reading (`read(after)`) only what it does not hold yet. */
  async through(id: string, seq: number, read: (after: number) => Promise<StoredEvent[]>): Promise<string> {
    // Taken out while the journal is read: a drawing that overlaps this one reads for itself.
    const t = this.by.get(id) ?? { parts: [], seqs: [], chars: 0, used: 0 };
    this.by.delete(id);
    this.chars -= t.chars;
    const held = t.seqs.length ? t.seqs[t.seqs.length - 1] : 0;
    if (held < seq) {
      for (const e of await read(held)) {
        if (e.seq <= held) continue; // a journal that answered more than was asked adds nothing twice
        const part = JSON.stringify(e.event);
        t.parts.push(part);
        t.seqs.push(e.seq);
        t.chars += part.length + 1;
      }
    }
    let n = t.seqs.length;
    while (n > 0 && t.seqs[n - 1] > seq) n--;
    const text = (n === t.parts.length ? t.parts : t.parts.slice(0, n)).join(",");
    t.used = ++this.clock;
    this.keep(id, t);
    return text;
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
  const { limit, before } = page;
  const rest = JSON.stringify({ accepted, ...(retired.length ? { retired } : {}), limit, before });
  return callText<Timeline>("timeline", `{"events":[${events}],${rest.slice(1)}`);
}
