import type { Packet, Usage } from "../types.js";

/** One chunk of a summary stream. */
export type StreamChunk =
  | { type: "delta"; text: string }
  | { type: "done"; modelId: string; usage: Usage; finishReason: string };

/** A buffered summary answer. */
export interface ModelResult { text: string; modelId: string; usage: Usage; finishReason: string }

/**
 * What foldline needs from a model: summarize a packet's rendered messages,
 * streaming, and the same through a buffered call (used for the one replay of
 * a stream that ended before any content).
 */
export interface Model {
  stream(packet: Packet, signal?: AbortSignal): AsyncIterable<StreamChunk>;
  complete(packet: Packet, signal?: AbortSignal): Promise<ModelResult>;
}

/**
 * A model failure an adapter can tell apart, so the audit reason says what
 * happened (a provider refusal, a timeout, a budget stop, a transport
 * failure) while the member sees only the generic notice.
 */
export class ModelError extends Error {
  constructor(readonly kind: "providerRefusal" | "timeout" | "budgetStop" | "other", message: string) {
    super(message);
    this.name = "ModelError";
  }
}

/** The failure kind of anything a model call threw. */
export function failureKindOf(e: unknown): "providerRefusal" | "timeout" | "budgetStop" | "other" {
  if (e instanceof ModelError) return e.kind;
  if (e instanceof Error && (e.name === "AbortError" || e.name === "TimeoutError")) return "timeout";
  return "other";
}
