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
