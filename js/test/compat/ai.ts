// One AI SDK line (6 or 7), as an app uses it: the real `generateText`
// with a model that reasons (a signature in its metadata) and real tools (one that fails, one that needs the member's approval), its own messages (ai 6's `response.messages`, ai 7's `responseMessages`) appended to
// foldline as they are, the context handed back through `aiSdkPrompt`, and
// a summarizer through `modelFromAiSdk`. Mock language models (the line's
// own `ai/test`) record what reached the provider boundary. Compiled with
// `tsc --strict` against the line's own types (no casts on foldline's side),
// then run; prints one JSON line of findings that run.mjs judges.
import { init, createCompactor, MemoryJournal, modelFromAiSdk, aiSdkPrompt } from "foldline";
import * as ai from "ai";
import * as aiTest from "ai/test";

const SYSTEM = "You are the travel desk. Answer in one sentence.";

// The mock class and result shapes of the line's language-model spec.
type Model = Exclude<ai.LanguageModel, string>;
const mocks = aiTest as unknown as Record<string, new (o: object) => Model>;
const spec = mocks.MockLanguageModelV4 ? 4 : 3;
const Mock = mocks[`MockLanguageModelV${spec}`];
const reason = (unified: string, raw: string) => ({ unified, raw });
const usage = { inputTokens: { total: 10, noCache: 10, cacheRead: 0, cacheWrite: 0 }, outputTokens: { total: 5, text: 5, reasoning: 0 } };

type Prompt = Array<{ role: string; content: unknown }>;
type Content = Array<
  | { type: "text"; text: string }
  | { type: "tool-call"; toolCallId: string; toolName: string; input: string; providerMetadata?: Record<string, Record<string, string>> }
  | { type: "reasoning"; text: string; providerMetadata: Record<string, Record<string, string>> }
>;

/** A language model answering `answer(prompt)`, recording every prompt it is given. */
function model(id: string, seen: Prompt[], answer: (p: Prompt) => Content): Model {
  return new Mock({
    modelId: id,
    doGenerate: async (o: { prompt: Prompt }) => {
      seen.push(o.prompt);
      const content = answer(o.prompt);
      const calls = content.some((c) => c.type === "tool-call");
      return { content, finishReason: reason(calls ? "tool-calls" : "stop", calls ? "tool_calls" : "stop"), usage, warnings: [] };
    },
    doStream: async (o: { prompt: Prompt }) => {
      seen.push(o.prompt);
      const text = answer(o.prompt).map((c) => (c.type === "text" ? c.text : "")).join("");
      const parts = [
        { type: "stream-start", warnings: [] },
        { type: "text-start", id: "t" },
        { type: "text-delta", id: "t", delta: text },
        { type: "text-end", id: "t" },
        { type: "finish", finishReason: reason("stop", "stop"), usage },
      ];
      return { stream: new ReadableStream({ start(c) { for (const p of parts) c.enqueue(p); c.close(); } }) };
    },
  });
}

const weather = ai.tool({
  description: "Weather of a city",
  inputSchema: ai.jsonSchema<{ city: string }>({ type: "object", properties: { city: { type: "string" } }, required: ["city"] }),
  execute: async (): Promise<string> => { throw new Error("weather service down"); },
});
const pay = ai.tool({
  description: "Pay an invoice",
  inputSchema: ai.jsonSchema<{ invoice: number }>({ type: "object", properties: { invoice: { type: "number" } }, required: ["invoice"] }),
  execute: async ({ invoice }: { invoice: number }) => `paid invoice ${invoice}`,
  needsApproval: true,
});
const tools = { weather, pay };

await init();
const summarizerSeen: Prompt[] = [];
const summarizer = model("mock-summarizer", summarizerSeen, () => [{ type: "text", text: "They asked about Tokyo and paid invoice 7." }]);
const journal = new MemoryJournal();
const c = createCompactor({
  journal,
  model: modelFromAiSdk(summarizer, { generateText: ai.generateText, streamText: ai.streamText }),
  declaration: { targetId: "agent", compactorId: "agent-compactor", budget: { kind: "chars", trigger: 6000, retain: 2000 }, summary: { maxChars: 300 } },
});
const id = "trip";
await c.append(id, [{ role: "system", content: SYSTEM }, { role: "user", content: "Weather in Tokyo? Then pay invoice 7." }]);

/** Every step's messages of a result: ai 7's `responseMessages` (its
 *  `response.messages` is the last step's alone: a tool run after its
 *  approval would be missing), ai 6's `response.messages`. */
function stepsOf<M>(r: { response: { messages: M[] } }): M[] {
  return (r as { responseMessages?: M[] }).responseMessages ?? r.response.messages;
}

const chatSeen: Prompt[] = [];
async function turn(answer: (p: Prompt) => Content) {
  const ctx = await c.context(id, { format: "ai-sdk" });
  const r = await ai.generateText({ model: model("mock-chat", chatSeen, answer), tools, ...aiSdkPrompt(ctx.messages ?? []) });
  await c.append(id, { format: "ai-sdk", messages: stepsOf(r) });
  return r;
}
const call = (toolCallId: string, toolName: string, input: string): Content => [{ type: "tool-call", toolCallId, toolName, input }];

// 1. The model reasons (its provider's signature in the metadata, as the
//    SDK's Anthropic provider returns it) and calls a tool (the call signed
//    as Gemini 3 signs it) that fails: the SDK writes an error result.
const thought = { type: "reasoning" as const, text: "Weather first.", providerMetadata: { anthropic: { signature: "sig-w" } } };
const signature = { google: { thoughtSignature: "sig-call" } };
const r1 = await turn(() => [thought, { ...call("call-w", "weather", '{"city":"Tokyo"}')[0], providerMetadata: signature }]);
const cyclePrompt = () => chatSeen[1] ?? [];
// 2. A tool that needs approval: the SDK asks; the member approves; the SDK
//    runs the tool from the history foldline hands back, then answers.
const r2 = await turn(() => call("call-p", "pay", '{"invoice":7}'));
const asked = stepsOf(r2).flatMap((m) => (Array.isArray(m.content) ? (m.content as Array<{ type: string; approvalId?: string }>) : [])).find((p) => p.type === "tool-approval-request");
if (asked?.approvalId) {
  await c.append(id, { format: "ai-sdk", messages: [{ role: "tool", content: [{ type: "tool-approval-response", approvalId: asked.approvalId, approved: true }] }] });
}
await turn(() => [{ type: "text", text: "Tokyo's forecast is unavailable; invoice 7 is paid." }]);
const lastPrompt = chatSeen.at(-1) ?? [];

// 3. An interrupted tool run: the model's call is in the journal without
//    its result (the app stopped before running it) and the member wrote
//    on. The SDK refuses a history with a call unanswered
//    (MissingToolResultsError); the context sends the call as text.
await c.append(id, { format: "ai-sdk", messages: [{ role: "assistant", content: [{ type: "tool-call", toolCallId: "call-x", toolName: "weather", input: { city: "Osaka" } }] }] });
await c.append(id, { role: "user", content: "Forget Osaka: a museum in Kyoto?" });
let interrupted = "";
try {
  await turn(() => [{ type: "text", text: "The Kyoto National Museum." }]);
} catch (e) {
  interrupted = String(e);
}
const interruptedPrompt = chatSeen.at(-1) ?? [];

// 4. A long chat: the summarizer runs through modelFromAiSdk.
let compacted = 0;
for (let i = 0; i < 80; i++) {
  await c.append(id, [{ role: "user", content: `Day ${i}: what should we see? ${"Details of the plan. ".repeat(8)}` }, { role: "assistant", content: `On day ${i}, the old town. ${"More suggestions here. ".repeat(8)}` }]);
  if ((await c.onMessage(id)).status === "compacted") compacted++;
}
const after = await c.context(id, { format: "ai-sdk" });
await ai.generateText({ model: model("mock-chat", chatSeen, () => [{ type: "text", text: "ok" }]), ...aiSdkPrompt(after.messages ?? []) });

const parts = (p: Prompt): Array<Record<string, unknown>> => p.flatMap((m) => (Array.isArray(m.content) ? (m.content as Array<Record<string, unknown>>).map((x) => ({ role: m.role, ...x })) : []));
const stored = (await journal.readEvents(id)).map((s) => s.event).flatMap((e) => (e.type === "message" ? e.parts : []));
console.log(JSON.stringify({
  spec,
  errorWrittenBySdk: stepsOf(r1).some((m) => Array.isArray(m.content) && (m.content as Array<{ type: string; output?: { type?: string } }>).some((p) => p.type === "tool-result" && String(p.output?.type).startsWith("error"))),
  storedError: stored.some((p) => p.type === "toolResult" && p.callId === "call-w" && p.isError === true),
  storedApproval: stored.some((p) => p.type === "approvalRequest") && stored.some((p) => p.type === "approvalResponse"),
  paidStored: stored.some((p) => p.type === "toolResult" && p.callId === "call-p"),
  systemFirst: lastPrompt[0]?.role === "system" && String(lastPrompt[0]?.content) === SYSTEM,
  errorArrives: parts(lastPrompt).some((p) => p.role === "tool" && p.toolCallId === "call-w" && String((p.output as { type?: string })?.type).startsWith("error")),
  callArrives: parts(lastPrompt).some((p) => p.type === "tool-call" && p.toolCallId === "call-w"),
  paidArrives: parts(lastPrompt).some((p) => p.type === "tool-result" && p.toolCallId === "call-p" && JSON.stringify(p.output).includes("paid invoice 7")),
  reasoningInItsCycle: parts(cyclePrompt()).some((p) => p.role === "assistant" && p.type === "reasoning" && p.text === "Weather first."
    && JSON.stringify(p.providerOptions) === '{"anthropic":{"signature":"sig-w"}}'),
  // Still open in the approval's turns; over once the member writes again.
  callSignatureInItsCycle: parts(cyclePrompt()).some((p) => p.type === "tool-call" && p.toolCallId === "call-w" && JSON.stringify(p.providerOptions) === JSON.stringify(signature))
    && !parts(interruptedPrompt).some((p) => p.type === "tool-call" && p.providerOptions !== undefined),
  reasoningNotAfter: parts(lastPrompt).some((p) => p.type === "reasoning") && !parts(interruptedPrompt).some((p) => p.type === "reasoning")
    && !parts(chatSeen.at(-1) ?? []).some((p) => p.type === "reasoning"),
  interruptedGoesOn: interrupted || parts(interruptedPrompt).some((p) => p.role === "assistant" && p.type === "text" && String(p.text).startsWith("[tool call weather]")),
  compacted,
  summarizerInstructions: summarizerSeen.length > 0 && summarizerSeen.every((p) => p[0]?.role === "system" && String(p[0].content).length > 200),
  systemAfterCompaction: chatSeen.at(-1)?.[0]?.role === "system" && String(chatSeen.at(-1)?.[0]?.content).startsWith(SYSTEM),
}));
