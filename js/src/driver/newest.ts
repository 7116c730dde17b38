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
import { checkCycles } from "./cycles.js";

/** The head of a chain whose summary is the least a compaction writes. */
const LEAST: ChainHead = { boundaryId: "boundary:least", boundaryHash: "", coveredThroughSeq: 0, coveredThroughTurnId: "", frontierId: "", summary: "x".repeat(SUMMARY_MIN_CHARS), length: 1 };

const meta = (e: Event): Event[] =>
  e.type === "message" || e.type === "lateDelivery" ? [{ type: "turnMeta", ...turnMetaWith(e, "") }] : e.type === "turnMeta" ? [e] : [];

/**
 * Refuse (`turn_too_large`) a batch whose last turn, unless the assistant's
 * or pinned, a context could not hold whole beside `pinned()` (the
 * conversation's, asked for only for a long turn), the batch's pinned
 * turns, the fragments' room and the least summary; and one whose tool
 * cycles, over `stored()` (the turns held of the conversation) and the
 * batch's, break the cycles' rules (`cycles.ts`).
 */
export function checkNewest(c: Ctx, id: string, events: Event[], pinned: () => Event[], stored: () => Event[] = () => []): void {
  checkNewestTurn(c, id, events, pinned);
  // The pinned turns are asked for only for a long cycle.
  checkCycles(c, id, events, stored, (newest, what, turnId) => fitsNewest(c, id, [...pinned(), ...events.filter(isPinned)], newest, what, turnId));
}

/** The newest turn's room (`checkNewest` less the cycles). */
function checkNewestTurn(c: Ctx, id: string, events: Event[], pinned: () => Event[]): void {
  const last = events.at(-1);
  if (last?.type !== "message" || last.role === "assistant" || isPinned(last)) return;
  // Admitted pinned turns leave an ordinary turn room beside the least
  // summary (`admissible_pinned`): half of one, with a room's label, fits.
  const newest = turnMetaWith(last, "");
  if (newest.chars <= MIN_TAIL_CHARS / 2 && (newest.tokens ?? 0) <= MIN_TAIL_TOKENS / 2 && !events.some(isPinned)) return;
  const at = events.length - 1;
  fitsNewest(c, id, [...pinned(), ...events.filter(isPinned)], [last],
    () => `events[${at}] is larger than a context holds as its newest turn beside the pinned turns and a summary`, last.turnId);
}

/** Refuse (`turn_too_large`, naming `turnId`, `what` saying why) when a context could not hold the `newest` turns whole beside `held` (the pinned turns), the fragments' room and the least summary. */
function fitsNewest(c: Ctx, id: string, held: Event[], newest: Event[], what: () => string, turnId: string): void {
  const metas = [...held, ...fragments(c, id), ...newest].flatMap(meta);
  try {
    select({ declaration: c.o.declaration, route: c.routeOf(id), head: LEAST, events: metas, render: false });
  } catch (e) {
    if (!(e instanceof FoldlineError) || e.code !== "tail_turn_too_large") throw e;
    throw new FoldlineError({ code: "turn_too_large", message: `${what()}: ${e.message.replace(/^tail_turn_too_large: /, "")}`, ids: [turnId] });
  }
}
