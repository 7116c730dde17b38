// Warm candidates (seed 002): a packet summarized ahead of need, under a
// lease of its own, kept only if settle accepts it; the core decides when it
// is used. The Rust driver's warm.rs.

import { validate } from "../ops.js";
import { MODEL_TIMEOUT_MS, WARM_LEASE_MS } from "../defaults.js";
import type { Ctx, State } from "./read.js";
import { callModel, replayBuffered } from "./summary.js";

/** Summarize a warm candidate under its own lease and keep the summary if settle accepts it. */
export async function prepareWarm(c: Ctx, id: string, w: NonNullable<State["warm"]>): Promise<void> {
  const key = `${id}#warm`;
  try {
    if ((await c.o.journal.acquireLease(key, c.holder, c.o.warmLeaseMs ?? WARM_LEASE_MS)) === undefined) return;
    try {
      const at = { packet: w.packet, runId: "warm-check" };
      const ms = c.o.modelTimeoutMs ?? MODEL_TIMEOUT_MS;
      let answer = await callModel(c, at, false, ms);
      // The one buffered replay, by the loop's own rule.
      if (replayBuffered(answer)) answer = await callModel(c, at, true, ms);
      if (!answer.output) return; // the compaction that is due will try itself
      validate({ kind: "settle", packet: w.packet, output: answer.output });
      const { modelId, usage, finishReason, summary } = answer.output;
      w.result = { text: summary, modelId, usage: usage ?? { inputTokens: 0, outputTokens: 0 }, finishReason: finishReason ?? "stop" };
    } finally {
      await c.o.journal.releaseLease(key, c.holder);
    }
  } catch {
    // A warm candidate is an optimization: any failure leaves it unprepared.
  }
}
