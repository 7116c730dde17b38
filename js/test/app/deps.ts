// The app's own dependencies, typed as the app that has them compiles them
// (the AI SDK's types need the DOM lib): a real tokenizer (gpt-tokenizer,
// o200k) and the AI SDK's mock model, streaming its summary, with the SDK's
// own streamText and generateText passed in (so bundles carry them).
import { encode } from "gpt-tokenizer";
import { generateText, streamText } from "ai";
import { MockLanguageModelV4, convertArrayToReadableStream } from "ai/test";
import type { Deps } from "./chat.js";

export function deps(): Deps {
  const model = new MockLanguageModelV4({
    modelId: "mock-summarizer",
    doStream: async () => ({
      stream: convertArrayToReadableStream([
        { type: "text-start", id: "s" },
        { type: "text-delta", id: "s", delta: "The member planned the week; " },
        { type: "text-delta", id: "s", delta: "the assistant answered each day." },
        { type: "text-end", id: "s" },
        { type: "finish", finishReason: { unified: "stop", raw: "stop" }, usage: { inputTokens: { total: 900, noCache: 900, cacheRead: 0, cacheWrite: 0 }, outputTokens: { total: 12, text: 12, reasoning: 0 } } },
      ]),
    }),
  });
  return { countTokens: (text) => encode(text).length, model, sdk: { streamText, generateText } };
}
