// A chat client as a new user writes it, against the packed package under
// `tsc --strict`: messages in the shape the app already holds (OpenAI chat),
// a token counter, a model from a plain function, the context out in OpenAI
// format. Every platform's entry file calls `run`.
import { init, createCompactor, MemoryJournal, modelFromFunction, type Declaration } from "foldline";

export interface Result {
  compacted: number;
  messages: number;
  total: number;
  limit: number;
  newest: string;
}

const declaration: Declaration = {
  targetId: "assistant",
  compactorId: "assistant-compactor",
  budget: { kind: "tokens", window: 8192 },
};

export async function run(wasm?: URL, turns = 300): Promise<Result> {
  await init(wasm);
  const compactor = createCompactor({
    journal: new MemoryJournal(),
    model: modelFromFunction(async (packet) => `Summary of ${packet.input.turnCount} turns.`),
    declaration,
    countTokens: (text) => Math.ceil(text.length / 4),
  });
  let compacted = 0;
  let newest = "";
  for (let i = 0; i < turns; i++) {
    newest = `message ${i} about the plan for week ${i % 7}. `.repeat(8);
    await compactor.append("chat", { role: i % 2 ? "assistant" : "user", content: newest });
    const r = await compactor.onMessage("chat");
    if (r.status === "compacted") compacted++;
  }
  const context = await compactor.context("chat", { format: "openai" });
  const last = context.messages?.[context.messages.length - 1];
  return {
    compacted,
    messages: context.messages?.length ?? 0,
    total: context.manifest.sizes.total,
    limit: context.manifest.limit,
    newest: typeof last?.content === "string" && last.content === newest ? "verbatim" : "changed",
  };
}
