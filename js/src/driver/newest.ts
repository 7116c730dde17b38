// The newest turn's room, at the door: a member's message or a tool's
// result is sent to the model at once, whole, beside the pinned turns and
// the summary, so one past the room a context leaves it would make every
// `select` fail `tail_turn_too_large` until a later message let a
// compaction fold it — the question never sent. A batch's last turn (the
// assistant's excepted: no call waits on an answer, and the next message
// folds it) is held to that room, measured by the core's own `select` over
// the turns' metadata beside the least summary a compaction writes. The
// Rust driver's `check_newest` (newest.rs).

import { MIN_TAIL_CHARS, MIN_TAIL_TOKENS, SUMMARY_MIN_CHARS } from "../defaults.js";
import { FoldlineError } from "../error.js";
import { turnMetaWith } from "../hash.js";
import { select } from "../ops.js";
import type { ChainHead, Event } from "../types.js";
import { isPinned, type Ctx } from "./read.js";
import { fragments } from "./room.js";

/** The head of a chain whose summary is the least a compaction writes. */
const LEAST: ChainHead = { boundaryId: "boundary:least", boundaryHash: "", coveredThroughSeq: 0, coveredThroughTurnId: "", frontierId: "", summary: "x".repeat(SUMMARY_MIN_CHARS), length: 1 };

const meta = (e: Event): Event[] =>
  e.type === "message" || e.type === "lateDelivery" ? [{ type: "turnMeta", ...turnMetaWith(e, "") }] : e.type === "turnMeta" ? [e] : [];

/** Refuse (`turn_too_large`) a batch whose last turn, unless the assistant's or pinned, a context could not hold whole beside `pinned()` (the conversation's, asked for only for a long turn), the batch's pinned turns, the fragments' room and the least summary. */
export function checkNewest(c: Ctx, id: string, events: Event[], pinned: () => Event[]): void {
  const last = events.at(-1);
  if (last?.type !== "message" || last.role === "assistant" || isPinned(last)) return;
  // Admitted pinned turns leave an ordinary turn room beside the least
  // summary (`admissible_pinned`): half of one, with a room's label, fits.
  const newest = turnMetaWith(last, "");
  if (newest.chars <= MIN_TAIL_CHARS / 2 && (newest.tokens ?? 0) <= MIN_TAIL_TOKENS / 2 && !events.some(isPinned)) return;
  const metas = [...pinned(), ...events.filter(isPinned), ...fragments(c, id)].flatMap(meta);
  metas.push({ type: "turnMeta", ...newest });
  try {
    select({ declaration: c.o.declaration, route: c.routeOf(id), head: LEAST, events: metas, render: false });
  } catch (e) {
    if (!(e instanceof FoldlineError) || e.code !== "tail_turn_too_large") throw e;
    throw new FoldlineError({
      code: "turn_too_large",
      message: `events[${events.length - 1}] is larger than a context holds as its newest turn beside the pinned turns and a summary: ${e.message.replace(/^tail_turn_too_large: /, "")}`,
      ids: [last.turnId],
    });
  }
}
