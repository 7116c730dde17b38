// A typed example of the public surface, checked by `tsc --noEmit`: a chat
// client drawing dividers and an edge function building the context.
import {
  init, createCompactor, MemoryJournal, plan, select, timeline, FoldlineError, createHandler, fromOpenAiMessages, modelFromFunction, modelFromAiSdk,
  type Handler, type ExecutionContext, type Declaration, type Code, type Event, type Model, type PlanOutcome, type TimelineItem, type Selection, type ContextMessage,
} from "../../dist/index.js";
import type { ChatCompletionMessageParam } from "openai/resources/chat/completions";

const declaration: Declaration = {
  targetId: "assistant",
  compactorId: "assistant-compactor",
  budget: { kind: "tokens", window: 8192, mode: "eager" },
};

export async function drawDividers(events: Event[]): Promise<string[]> {
  await init();
  return timeline(events).items.map((item: TimelineItem) =>
    item.type === "divider" ? `── ${item.kind} compaction (${item.state}) through #${item.throughSeq} ──` : item.text,
  );
}

export async function edgeContext(model: Model, conversation: string): Promise<ChatCompletionMessageParam[]> {
  const journal = new MemoryJournal();
  const compactor = createCompactor({ journal, model, declaration });
  await compactor.onMessage(conversation);
  const ctx: Selection<ChatCompletionMessageParam[]> = await compactor.context(conversation, { format: "openai" });
  return ctx.messages ?? [];
}

export function outcomeName(o: PlanOutcome): string {
  switch (o.outcome) {
    case "compact": return `compact ${o.packet.id}`;
    case "refuse": return `refuse ${o.error.code}`;
    default: return o.outcome;
  }
}

export function codeOf(e: unknown): string | undefined {
  return e instanceof FoldlineError ? e.code : undefined;
}

export const manifestOnly = (events: Event[]) =>
  select({ declaration, route: { conversation: "c" }, events, render: false }).manifest.included;

export const planned: PlanOutcome = plan({ declaration, route: { conversation: "c" }, events: [] });

// An edge worker serving the HTTP API of `foldline serve`.
export function edgeWorker(model: Model, tokenSha256: string) {
  const handler: Handler = createHandler({
    journal: new MemoryJournal(), model, declaration,
    members: [{ id: "alice", tokenSha256 }],
  });
  return { fetch: (req: Request, _env: unknown, ctx: ExecutionContext) => handler(req, ctx) };
}

export const imported: Event[] = fromOpenAiMessages(
  [{ role: "user", content: "hi" }, { role: "assistant", content: null, tool_calls: [{ id: "c1", function: { name: "f", arguments: "{}" } }] }],
  { conversation: "c", afterSeq: 2 },
);

// A chat loop from OpenAI-shaped messages with a real-looking token counter
// and a model from a plain function.
export async function chatLoop(count: (text: string) => number): Promise<number> {
  const compactor = createCompactor({
    journal: new MemoryJournal(), declaration, countTokens: count,
    model: modelFromFunction(async (packet) => `summary of ${packet.input.turnCount} turns`),
  });
  const appended = await compactor.append("c", [{ role: "user", content: "hi" }]);
  await compactor.append("c", { format: "anthropic", system: "be brief", messages: [{ role: "assistant", content: "hello" }] });
  await compactor.append("c", { format: "ai-sdk", messages: [{ role: "assistant", content: "again" }] });
  const r = await compactor.onMessage("c");
  if (r.status === "refused") {
    const code: Code = r.code;
    return code.length;
  }
  return appended.seq;
}

// The README's edge example: the typed `.wasm` subpath.
import wasmModule from "foldline/foldline_bg.wasm";
export const loadAtTheEdge = (): Promise<void> => init(wasmModule);

// Format-typed context: each format's messages, assignable to the provider
// packages' own types without casts; a type argument that is not a format
// does not compile.
import type { ModelMessage } from "ai";
// Anthropic's `system` is absent when the context has no system text (the
// API refuses an empty one).
export async function typedFormats(model: Model): Promise<[ModelMessage[], string | undefined, number]> {
  const compactor = createCompactor({ journal: new MemoryJournal(), model, declaration });
  // Rendered unless `render: false`: `messages` is there, no `?? []`.
  const ai: ModelMessage[] = (await compactor.context("c", { format: "ai-sdk" })).messages;
  const anthropic = (await compactor.context("c", { format: "anthropic" })).messages;
  const own = (await compactor.context("c")).messages;
  const manifestOnly = await compactor.context("c", { render: false });
  // @ts-expect-error: with render: false there may be no messages
  const none: ContextMessage[] = manifestOnly.messages;
  void none;
  // @ts-expect-error: a message type is not a format
  await compactor.context<ModelMessage[]>("c", { format: "openai" });
  return [ai, anthropic.system, own.length];
}

// Any AI SDK LanguageModel is a model.
import { MockLanguageModelV4 } from "ai/test";
export const aiSdkModel: Model = modelFromAiSdk(new MockLanguageModelV4({ modelId: "m" }));
