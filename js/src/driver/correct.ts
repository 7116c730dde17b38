// A turn corrected: a `correction` of what it says, numbered after its
// latest, checked as every correction is — the turn it makes must be one a
// compaction could take and leave the pinned turns a context room; a covered
// turn's amendment must stay within `amendmentMaxChars` (the chain is
// resolved with it as if written) — then written with a compare-and-append.
// The Rust driver's `Driver::correct` (corrected.rs).

import { FoldlineError } from "../error.js";
import type { Event, Part } from "../types.js";
import type { Corrected } from "./api.js";
import { counted } from "./tokens.js";
import { corrected, covers, isTurn, load, pinnedTurns, readOriginals, resolveFrom, state, sync, using, type Ctx } from "./read.js";
import { checkNewest } from "./newest.js";
import { checkBesidePinned } from "./room.js";

export function correctTurn(c: Ctx, id: string, turnId: string, content: string | readonly Part[], sender?: string): Promise<Corrected> {
  const parts: Part[] = typeof content === "string" ? [{ type: "text", text: content }] : [...content];
  const s = state(c, id);
  const next = using(s, s.appending.then(async () => {
    for (;;) {
      await load(c, id);
      const turn = s.recent.filter(isTurn).find((e) => e.turnId === turnId);
      if (!turn && !covers(s, turnId)) {
        throw new FoldlineError({ code: "invalid_request", message: `${id} holds no turn ${turnId} a model sees (none, or one before the activation frontier)`, ids: [turnId] });
      }
      let correctionSeq = 1;
      for (const e of s.recent) {
        if (e.type === "correction" && e.turnId === turnId && e.correctionSeq >= correctionSeq) correctionSeq = e.correctionSeq + 1;
      }
      const fix: Extract<Event, { type: "correction" }> = { type: "correction", turnId, correctionSeq, parts };
      if (sender !== undefined) {
        // A covered turn let go is read back to tell who sent it.
        await readOriginals(c, id, s, [fix]);
        const original = s.recent.filter(isTurn).find((e) => e.turnId === turnId);
        if (original === undefined || (original.sender ?? "") !== sender) {
          throw new FoldlineError({ code: "not_author", message: `${sender} did not send turn ${turnId} of ${id}: a member corrects only what they sent`, ids: [turnId] });
        }
      }
      if (turn && turn.type !== "turnMeta") {
        // Measured as the turn it makes (with the host's token count), beside
        // the other pinned turns as their corrections make them.
        const [made] = counted(c, [corrected(turn, fix)]);
        if (made.type === "message" && made.tokens !== undefined) fix.tokens = made.tokens;
        const others = pinnedTurns(s).filter((e) => !(isTurn(e) && e.turnId === turnId));
        checkBesidePinned(c, id, [made], others);
        // An edit of the newest turn must leave it one a context holds whole.
        if (s.recent.filter((e) => e.type === "message").at(-1) === turn) checkNewest(c, id, [made], () => others);
      }
      await readOriginals(c, id, s, [fix]);
      await resolveFrom(c, id, s, [...s.chain, fix]);
      try {
        const seq = await c.o.journal.append(id, [fix], { expectedSeq: s.seq });
        await sync(c, id);
        return { seq, correctionSeq };
      } catch (e) {
        // Another writer appended meanwhile: read it and check again.
        if (!(e instanceof FoldlineError) || e.code !== "conflict") throw e;
      }
    }
  }));
  s.appending = next.catch(() => undefined);
  return next;
}
