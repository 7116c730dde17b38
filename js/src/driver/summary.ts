// One model call for a summary, under its deadline: the stream (provisional
// text never leaves this module) or the one buffered replay; what happened
// goes back to the core, which applies the streaming rule.

import type { EffectResult, ModelOutput, Run } from "../types.js";
import { failureKindOf, type ModelResult } from "../model/model.js";
import type { Ctx } from "./read.js";

/** What a model call answers the core. */
export type ModelAnswer = Extract<EffectResult, { kind: "model" }>;

/** A failure's audit detail: its message, as the Rust host records a model error's detail. */
function detailOf(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}

/**
 * One model call under its deadline: the stream (provisional text stays
 * here) or the buffered replay. What happened goes back to the core, which
 * applies the streaming rule.
 */
export async function callModel(c: Ctx, run: Pick<Run, "packet" | "runId">, buffered: boolean, deadlineMs: number): Promise<ModelAnswer> {
  const deadline = AbortSignal.timeout(deadlineMs);
  const output = (r: ModelResult): ModelOutput => ({
    packetId: run.packet.id, runId: run.runId, modelId: r.modelId, usage: r.usage, finishReason: r.finishReason, summary: r.text,
  });
  const failed = (e: unknown, contentReceived: boolean): ModelAnswer => ({
    kind: "model", contentReceived,
    error: deadline.aborted ? { failure: "timeout", detail: `no summary within ${deadlineMs} ms` } : { failure: failureKindOf(e), detail: detailOf(e) },
  });
  if (buffered) {
    try {
      return { kind: "model", contentReceived: true, output: output(await c.o.model.complete(run.packet, deadline)) };
    } catch (e) {
      return failed(e, false);
    }
  }
  let text = "";
  let done: ModelResult | undefined;
  try {
    for await (const chunk of c.o.model.stream(run.packet, deadline)) {
      if (chunk.type === "delta") text += chunk.text; // provisional: never leaves the driver
      else done = { text, modelId: chunk.modelId, usage: chunk.usage, finishReason: chunk.finishReason };
    }
  } catch (e) {
    return failed(e, text.length > 0);
  }
  if (deadline.aborted) return failed(undefined, text.length > 0);
  return { kind: "model", contentReceived: text.length > 0, ...(done ? { output: output(done) } : {}) };
}
