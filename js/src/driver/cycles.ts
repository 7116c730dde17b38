// Tool cycles at the door. Compaction neither splits a cycle (from the turn
// that asked through its answers: tool calls and results, approval
// requests and responses) nor keeps part of one, so a cycle past what one
// compaction can take could never be folded, and an open one past a
// context's room could never be sent: 200 tool results of 2,000
// characters, accepted one by one, left every context without them and
// every compaction `nothing_to_fold`, for good. The append check refuses
// the answer that makes either (`turn_too_large`), measured by the core's
// own `select` (the context's room, as for the newest turn) and `validate`
// (what one compaction can take, of one turn the cycle's size). The Rust
// driver's `cycles.rs`.

import { MIN_TAIL_CHARS, MIN_TAIL_TOKENS } from "../defaults.js";
import { FoldlineError } from "../error.js";
import { turnMetaWith } from "../hash.js";
import { validate } from "../ops.js";
import type { Event, TurnMeta } from "../types.js";
import { isPinned, type Ctx } from "./read.js";

/** What a cycle is measured from of one turn (a message, or the metadata kept of an older one). */
interface Turn { event: Event; meta: TurnMeta }

/** The turn `e` is, unless never folded or no turn. */
function turnOf(e: Event): Turn | undefined {
  if (isPinned(e)) return undefined;
  if (e.type === "message") return { event: e, meta: turnMetaWith(e, "") };
  if (e.type === "turnMeta") return { event: e, meta: e };
  return undefined;
}

const answers = (t: Turn): readonly string[] => t.meta.toolResults ?? [];

/** A cycle: the positions of the turn that asked and of the answer. */
type Span = [number, number];

/** The characters and counted tokens of the cycle `span` of `turns`. */
function size(turns: Turn[], [start, end]: Span): [number, number] {
  let chars = 0, tokens = 0;
  for (const t of turns.slice(start, end + 1)) {
    chars += t.meta.chars;
    tokens += t.meta.tokens ?? 0;
  }
  return [chars, tokens];
}

/**
 * The cycles the answers of `turns[from..]` close, whose ask is among
 * `turns` (the latest ask of each id before the answer, as the core links
 * them): one pass, whatever answers find no ask.
 */
function cycles(turns: Turn[], from: number): Span[] {
  const asked = new Map<string, number>();
  const spans: Span[] = [];
  turns.forEach((t, end) => {
    if (end >= from) for (const id of answers(t)) { const start = asked.get(id); if (start !== undefined) spans.push([start, end]); }
    for (const id of t.meta.toolCalls ?? []) asked.set(id, end);
  });
  return spans;
}

/** The span of `spans` with the most characters (the first of them). */
function widest(turns: Turn[], spans: Span[]): Span | undefined {
  let best: Span | undefined;
  for (const s of spans) if (!best || size(turns, s)[0] > size(turns, best)[0]) best = s;
  return best;
}

/**
 * Refuse (`turn_too_large`, naming the answer) a batch whose answers close a
 * cycle — over `stored()` (the turns held of the conversation) and the
 * batch's — that one compaction could not take whole, or whose last turn
 * answers a cycle a context could not hold whole beside the pinned turns
 * and the least summary (`fits`: the newest-turn check of `newest.ts`).
 */
export function checkCycles(c: Ctx, id: string, events: Event[], stored: () => Event[], fits: (newest: Event[], what: () => string, turnId: string) => void): void {
  const batch = events.map(turnOf).filter((t): t is Turn => t !== undefined);
  if (batch.every((t) => answers(t).length === 0)) return;
  const held = stored().map(turnOf).filter((t): t is Turn => t !== undefined);
  const turns = [...held, ...batch];
  const spans = cycles(turns, held.length);
  const last = turns.length - 1;
  const tail = events.at(-1);
  const endsOpen = tail !== undefined && (turnOf(tail)?.meta.toolResults ?? []).length > 0;
  const fitsCycle = (span: Span): void => {
    const [chars, tokens] = size(turns, span);
    if (chars <= MIN_TAIL_CHARS / 2 && tokens <= MIN_TAIL_TOKENS / 2) return;
    const [from, answer] = [turns[span[0]].meta.turnId, turns[span[1]].meta.turnId];
    fits(turns.slice(span[0], span[1] + 1).map((t) => t.event),
      () => `the tool cycle from ${from} through ${answer} is larger than a context holds whole beside the pinned turns and a summary (compaction neither splits it nor keeps part of it)`, answer);
  };
  // The cycle the batch's last turn answers, still open: it goes to the
  // model whole, so it must fit a context.
  const open = endsOpen ? widest(turns, spans.filter((s) => s[1] === last)) : undefined;
  if (open) fitsCycle(open);
  // Any cycle must be one a compaction can take whole; one that fits a
  // context does (the open one was just found to).
  const span = widest(turns, spans);
  if (!span || span === open) return;
  try {
    fitsCycle(span);
  } catch (e) {
    if (!(e instanceof FoldlineError) || e.code !== "turn_too_large") throw e;
    foldable(c, id, turns, span);
  }
}

/** Whether one compaction could take the cycle `span` of `turns` whole: the core's admission of one turn of its size. */
function foldable(c: Ctx, id: string, turns: Turn[], span: Span): void {
  const [chars] = size(turns, span);
  const [from, answer] = [turns[span[0]].meta.turnId, turns[span[1]].meta.turnId];
  const counts = turns.slice(span[0], span[1] + 1).map((t) => t.meta.tokens);
  const route = c.routeOf(id);
  const whole: Event = {
    type: "message", conversation: id, chat: route.chat ?? "", sourceSeq: 1, index: 0, turnId: answer, role: "user",
    parts: [{ type: "text", text: "x".repeat(chars) }],
    ...(counts.every((t) => t !== undefined) ? { tokens: counts.reduce((a, b) => a + (b ?? 0), 0) } : {}),
  };
  try {
    validate({ kind: "events", route, events: [whole], declaration: c.o.declaration });
  } catch (e) {
    if (!(e instanceof FoldlineError) || e.code !== "turn_too_large") throw e;
    throw new FoldlineError({
      code: "turn_too_large",
      message: `the tool cycle from ${from} through ${answer} is larger than one compaction can take whole (compaction neither splits it nor keeps part of it): ${e.message.replace(/^turn_too_large: /, "").replace(/^events\[0\] /, "")}`,
      ids: [answer],
    });
  }
}
