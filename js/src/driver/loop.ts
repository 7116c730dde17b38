// The loop: one run of the core's `step`, each effect it answers carried
// out (a compare-and-append fenced by the lease, the packet stored before any
// model sees it, a model call) until it is done. The Rust driver's run.rs
// (`drive`, `fresh_step`, `fenced_append`).

import { FoldlineError } from "../error.js";
import { MODEL_TIMEOUT_MS } from "../defaults.js";
import { stepHeld } from "../held.js";
import type { EffectResult, Event, Finished, LoopState, StepRequest, Step, Trigger } from "../types.js";
import { state, sync, view, type Ctx, type State } from "./read.js";
import { callModel } from "./summary.js";

/**
 * Compare-and-append a batch at `expectedSeq` under the lease's fence; a
 * conflict reports whether a chain event arrived meanwhile (the core then
 * appends again after the new messages, or ends the run with `fork`).
 */
export async function appendAt(c: Ctx, id: string, s: State, batch: Event[], expectedSeq: number, fence: number): Promise<EffectResult> {
  try {
    const seq = await c.o.journal.append(id, batch, { expectedSeq, fence });
    await sync(c, id);
    return { kind: "appended", seq };
  } catch (e) {
    if (!(e instanceof FoldlineError) || e.code !== "conflict") throw e;
    const before = s.chainEvents;
    await sync(c, id);
    return { kind: "conflict", seq: s.seq, chainMoved: s.chainEvents !== before };
  }
}

/** What a run of `drive` is for, besides its trigger. */
export interface RunOptions { task?: string; owner?: string; onAccepted?: (seq: number) => void; endInterruptedOnly?: boolean; prepareWarm?: boolean }

/** The `step` after a fresh read: the core plans from what was read, at the position it was read at. */
export async function fresh(c: Ctx, id: string, trigger: Trigger, options: RunOptions): Promise<{ request: StepRequest; key: string }> {
  const v = await view(c, id, trigger, options.prepareWarm, options.owner);
  const w = v.s.warm;
  const request: StepRequest = {
    trigger, task: options.task ?? null, endInterruptedOnly: options.endInterruptedOnly ?? false, prepareWarm: options.prepareWarm ?? false,
    warmCandidates: c.o.warmCandidates !== false, warmHeld: w !== undefined, warmSummary: w?.result ?? null,
    modelTimeoutMs: c.o.modelTimeoutMs ?? MODEL_TIMEOUT_MS, view: v.request, seq: v.seq,
  };
  return { request, key: v.key };
}

/**
 * Interpret the core's loop: read, then do each effect `step` answers
 * (append, store the packet, call the model) and feed its result back,
 * until the run is done. What to write, where and when is the core's.
 */
export async function drive(c: Ctx,
  id: string, trigger: Trigger, fence: number,
  options: RunOptions = {},
): Promise<Finished> {
  const { task, onAccepted, endInterruptedOnly = false, prepareWarm = false } = options;
  const timeout = c.o.modelTimeoutMs ?? MODEL_TIMEOUT_MS;
  const s = state(c, id);
  const next = (last: EffectResult, st: LoopState): StepRequest => ({ trigger, task: task ?? null, endInterruptedOnly, prepareWarm, modelTimeoutMs: timeout, state: st, last });
  let { request, key } = await fresh(c, id, trigger, options);
  for (;;) {
    const { state: st, effect } = stepHeld<Step>(s.held, request, key);
    switch (effect.effect) {
      case "done":
        return effect.finished;
      case "read":
        // The state rides along: a run folding a backlog goes on with it.
        ({ request, key } = await fresh(c, id, trigger, options));
        request = { ...request, state: st };
        break;
      case "append": {
        const last = await appendAt(c, id, s, st.batch ?? [], effect.expectedSeq, fence);
        if (last.kind === "appended" && effect.acceptsTask) onAccepted?.(last.seq);
        request = next(last, st);
        break;
      }
      case "putPacket":
        if (!st.run) throw new Error("putPacket without a run");
        await c.o.journal.putPacket(id, st.run.packet); // persisted before any model sees it
        request = next({ kind: "stored" }, st);
        break;
      case "callModel":
        if (!st.run) throw new Error("callModel without a run");
        request = next(await callModel(c, st.run, effect.buffered, effect.deadlineMs), st);
        break;
    }
  }
}

