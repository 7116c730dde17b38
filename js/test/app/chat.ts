// A chat client as a new user writes it, against the packed package under
// `tsc --strict` (no DOM lib, no skipLibCheck: foldline's types stand
// alone): messages in the shape the app already holds (OpenAI chat), token
// counts from the app's tokenizer, the app's AI SDK language model as the
// summarizer (deps.ts: gpt-tokenizer and the AI SDK's mock), the context out
// in OpenAI format. Every platform's entry file calls `run`.
import { init, createCompactor, MemoryJournal, modelFromAiSdk, type AiSdkFunctions, type AiSdkLanguageModel, type Declaration, type WasmSource } from "foldline";

/** What the app brings: its tokenizer, its AI SDK model and the SDK's functions. */
export interface Deps {
  countTokens: (text: string) => number;
  model: AiSdkLanguageModel;
  sdk: AiSdkFunctions;
}

export interface Result {
  compacted: number;
  messages: number;
  total: number;
  limit: number;
  newest: string;
  summarizedBy: string;
}

const declaration: Declaration = {
  targetId: "assistant",
  compactorId: "assistant-compactor",
  budget: { kind: "tokens", window: 8192 },
};

export async function run(deps: Deps, wasm?: WasmSource, turns = 300): Promise<Result> {
  await init(wasm);
  const compactor = createCompactor({
    journal: new MemoryJournal(),
    model: modelFromAiSdk(deps.model, deps.sdk),
    declaration,
    countTokens: deps.countTokens,
  });
  let compacted = 0;
  let newest = "";
  let summarizedBy = "";
  let context;
  for (let i = 0; i < turns; i++) {
    newest = `message ${i} about the plan for week ${i % 7}. `.repeat(8);
    await compactor.append("chat", { role: i % 2 ? "assistant" : "user", content: newest });
    // The check, then the context the model would be called with.
    const r = await compactor.onMessageAndContext("chat", { format: "openai" });
    if (r.outcome.status === "compacted") {
      compacted++;
      summarizedBy = r.outcome.boundary.run.modelId;
    }
    context = r.context;
  }
  if (context === undefined) throw new Error("no message was sent");
  const last = context.messages[context.messages.length - 1];
  return {
    compacted,
    messages: context.messages.length,
    total: context.manifest.sizes.total,
    limit: context.manifest.limit,
    newest: typeof last?.content === "string" && last.content === newest ? "verbatim" : "changed",
    summarizedBy,
  };
}
