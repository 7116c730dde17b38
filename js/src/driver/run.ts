// One run of the loop answered as the member-facing result: an automatic
// check planned without the lease first, the lease taken only for a run
// that writes; a warm candidate handed to its preparation. The Rust
// driver's run.rs (`run`, `finish`).

import type { Finished, Step, Trigger } from "../types.js";
import type { OnMessageResult } from "./api.js";
import { stepHeld } from "../held.js";
import { state, type Ctx } from "./read.js";
import { drive, fresh } from "./loop.js";
import { leased } from "./lease.js";
import { prepareWarm } from "./warm.js";

/**
 * An automatic check that finds nothing to write (most messages: a skip
 * below the trigger) needs no writer lease: it is planned first without one,
 * and only a run with something to write takes the lease and plans again
 * under it (its writes stay compare-and-append at the position read, fenced
 * by the lease). As the Rust driver's `run`.
 */
async function unleased(c: Ctx, id: string, trigger: Trigger): Promise<Finished | undefined> {
  if (trigger.kind !== "automatic") return undefined;
  const { request, key } = await fresh(c, id, trigger, {});
  const { effect } = stepHeld<Step>(state(c, id).held, request, key);
  return effect.effect === "done" ? effect.finished : undefined;
}

/** One run of the loop, answered as the member-facing result. */
export async function run(c: Ctx, id: string, trigger: Trigger, task?: { id: string; owner?: string; onAccepted?: (seq: number) => void }): Promise<OnMessageResult> {
  const f = (await unleased(c, id, trigger)) ?? (await leased(c, id, (fence) => drive(c, id, trigger, fence, { task: task?.id, owner: task?.owner, onAccepted: task?.onAccepted })));
  if (f === undefined) return { status: "busy" };
  const s = state(c, id);
  switch (f.status) {
    case "skipped":
      // The compactor's progress advances without inference: a watermark
      // beside the journal, not an event.
      if (f.outcome.outcome === "skip") await c.o.journal.noteSkipped?.(id, f.outcome.record);
      return { status: f.status, outcome: f.outcome };
    case "paused":
      return { status: f.status, outcome: f.outcome };
    case "warm":
      // One candidate per head: kept while it is prepared, judged by the
      // core when compaction is due, dropped then either way.
      if (f.prepare && f.packet) {
        s.warm = { packet: f.packet };
        s.warm.preparing = prepareWarm(c, id, s.warm); // off the critical path: not awaited
      }
      return { status: "warm", outcome: { outcome: "warm", packet: f.packet ?? s.warm?.packet ?? null } };
    case "refused":
      return { status: "refused", code: f.error.code, message: f.error.message };
    case "compacted":
      s.warm = undefined;
      return { status: "compacted", boundary: f.boundary };
    case "failed":
      s.warm = undefined;
      c.o.audit?.(id, f.report);
      return { status: "failed", notice: f.report.notice };
    case "ended":
    case "prepared":
      throw new Error("a compaction run ended as an interrupted-task sweep or a preparation");
  }
}
