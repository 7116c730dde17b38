// A model from the Vercel AI SDK: any `LanguageModel` of any provider the AI
// SDK supports. `ai` is an optional peer dependency, loaded on first use.

import type { Packet, Usage } from "../types.js";
import { cutShort, summaryTokens } from "./http.js";
import { ModelError, type Model, type ModelResult, type StreamChunk } from "./model.js";

/** The part of an AI SDK `LanguageModel` this adapter relies on (kept structural, so these types need no `ai`). */
export interface AiSdkLanguageModel { readonly modelId: string; readonly provider: string }

/** The part of the AI SDK's usage this adapter reads: a reasoning model's reasoning is counted among its output tokens. */
export interface AiSdkUsage {
  inputTokens?: number;
  outputTokens?: number;
  /** `ai` 6 and 7. */
  outputTokenDetails?: { reasoningTokens?: number };
  /** `ai` 5. */
  reasoningTokens?: number;
}

/**
 * The two functions of the `ai` package this adapter calls. Pass them
 * (`modelFromAiSdk(model, { streamText, generateText })`) in a bundled app —
 * a browser, workerd, an edge function — where the package cannot be loaded
 * by name at run time; in Node they are loaded on first use when omitted.
 */
export interface AiSdkFunctions {
  generateText(o: unknown): Promise<{ text: string; finishReason: string; usage: AiSdkUsage; response?: { modelId?: string } }>;
  streamText(o: unknown): {
    textStream: AsyncIterable<string>;
    finishReason: PromiseLike<string>;
    usage: PromiseLike<AiSdkUsage>;
    response: PromiseLike<{ modelId?: string }>;
  };
}

let ai: Promise<AiSdkFunctions> | undefined;
function load(): Promise<AiSdkFunctions> {
  const name = "ai";
  ai ??= (import(name) as Promise<AiSdkFunctions>).catch((e) => {
    ai = undefined;
    throw new ModelError("other", `modelFromAiSdk needs the "ai" package (npm install ai; in a bundled app pass its functions: modelFromAiSdk(model, { streamText, generateText })): ${String(e)}`);
  });
  return ai;
}

/** The AI SDK's usage as the summary's evidence: the reasoning it counts among the output tokens left out (`ai` 6 and 7 name it in `outputTokenDetails`, 5 at the top). */
function usageOf(u: AiSdkUsage): Usage {
  return { inputTokens: u.inputTokens ?? 0, outputTokens: summaryTokens(u.outputTokens, u.outputTokenDetails?.reasoningTokens ?? u.reasoningTokens) };
}

/**
 * The packet as an AI SDK call on every line: the compactor's system prompt
 * as `system` (ai 5 and 6 know only that) and as `instructions` (ai 7, where
 * `system` is its deprecated alias), the rest as user messages.
 */
function call(model: AiSdkLanguageModel, packet: Packet, signal?: AbortSignal) {
  const system = packet.messages.filter((m) => m.role === "system").map((m) => m.content).join("\n\n");
  const messages = packet.messages.filter((m) => m.role !== "system").map((m) => ({ role: "user" as const, content: m.content }));
  return { model, system, instructions: system, messages, abortSignal: signal, maxRetries: 0 };
}

/**
 * A `Model` from an AI SDK `LanguageModel` (`openai("gpt-4o-mini")`,
 * `anthropic(…)`, a gateway model, a mock): streams through `streamText`,
 * the buffered replay through `generateText`, with the compactor's deadline.
 * `sdk`: those two functions, in a bundled app (see {@link AiSdkFunctions}).
 */
export function modelFromAiSdk(model: AiSdkLanguageModel, sdk?: AiSdkFunctions): Model {
  const functions = (): Promise<AiSdkFunctions> => (sdk ? Promise.resolve(sdk) : load());
  return {
    async *stream(packet: Packet, signal?: AbortSignal): AsyncIterable<StreamChunk> {
      const { streamText } = await functions();
      const r = streamText(call(model, packet, signal));
      for await (const text of r.textStream) if (text) yield { type: "delta", text };
      const [usage, finishReason, response] = await Promise.all([r.usage, r.finishReason, r.response]);
      const cut = cutShort(finishReason);
      if (cut) throw cut;
      yield {
        type: "done", modelId: response.modelId ?? model.modelId, finishReason,
        usage: usageOf(usage),
      };
    },
    async complete(packet: Packet, signal?: AbortSignal): Promise<ModelResult> {
      const { generateText } = await functions();
      const r = await generateText(call(model, packet, signal));
      const cut = cutShort(r.finishReason);
      if (cut) throw cut;
      return {
        text: r.text, modelId: r.response?.modelId ?? model.modelId, finishReason: r.finishReason,
        usage: usageOf(r.usage),
      };
    },
  };
}
