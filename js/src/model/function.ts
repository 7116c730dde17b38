// A model from a plain function: `(packet, signal) => Promise<string>`.

import type { Packet } from "../types.js";
import type { Model, ModelResult, StreamChunk } from "./model.js";

/** What the function may answer: the summary text, or the text with its evidence. */
export type FunctionAnswer = string | { text: string; modelId?: string; inputTokens?: number; outputTokens?: number; finishReason?: string };

/**
 * A `Model` from a function that summarizes a packet (send `packet.messages`
 * to your model; they are the compactor's prompt, ready to use). Its answer
 * is streamed as one chunk; usage not given is estimated (four characters a
 * token). The signal carries the compactor's deadline.
 */
export function modelFromFunction(
  summarize: (packet: Packet, signal?: AbortSignal) => Promise<FunctionAnswer>,
  options: { modelId?: string } = {},
): Model {
  async function complete(packet: Packet, signal?: AbortSignal): Promise<ModelResult> {
    const a = await summarize(packet, signal);
    const r = typeof a === "string" ? { text: a } : a;
    if (typeof r?.text !== "string") throw new TypeError("modelFromFunction: the function must answer a string or { text }");
    return {
      text: r.text,
      modelId: r.modelId ?? options.modelId ?? "function",
      usage: { inputTokens: r.inputTokens ?? packet.input.tokens, outputTokens: r.outputTokens ?? Math.ceil(r.text.length / 4) },
      finishReason: r.finishReason ?? "stop",
    };
  }
  return {
    async *stream(packet: Packet, signal?: AbortSignal): AsyncIterable<StreamChunk> {
      const r = await complete(packet, signal);
      yield { type: "delta", text: r.text };
      yield { type: "done", modelId: r.modelId, usage: r.usage, finishReason: r.finishReason };
    },
    complete,
  };
}
