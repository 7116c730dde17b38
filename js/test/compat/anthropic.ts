// One `@anthropic-ai/sdk` line (0.x's last, 1.x), as an app uses it: the
// real client against a local server over HTTP that records every request
// body; the request's separate system prompt and the member's message
// appended as `MessageParam`s, the client's own response (`Message`:
// thinking, text, two tool uses) appended as it is, the tool results (one
// an error) and a system message in the conversation as `MessageParam`s, the context handed back to
// `messages.create` as `system` and `messages` with extended thinking on
// (the recording server refuses, as the API does, a tool cycle whose last
// assistant message lacks its thinking block), and a summarizer built on
// the same client; a system prompt of the SDK's `TextBlockParam`s (prompt
// caching's form), and a conversation without one (no empty `system`,
// which the API refuses). Compiled with `tsc --strict` against the line's own
// types (no casts on foldline's side), then run; prints one JSON line that
// run.mjs judges.
import { createServer } from "node:http";
import Anthropic from "@anthropic-ai/sdk";
import type { MessageParam, TextBlockParam } from "@anthropic-ai/sdk/resources/messages";
import { init, createCompactor, MemoryJournal, modelFromFunction } from "foldline";

const SYSTEM = "You are the travel desk. Answer in one sentence.";
type Block = { type: string; text?: string; id?: string; name?: string; input?: unknown; tool_use_id?: string; content?: unknown; is_error?: boolean };
type Block2 = Block & { thinking?: string; signature?: string };
type Body = { model: string; system?: string; thinking?: { type: string }; messages: Array<{ role: string; content: string | Block2[] }> };

/**
 * The API's refusals this run can meet: an empty system prompt, and with
 * thinking on, a last assistant message that calls a tool and does not
 * open with its thinking.
 */
function refusal(body: Body): string | undefined {
  if (typeof body.system === "string" && body.system.trim() === "") return "system: text content blocks must be non-empty";
  if (body.thinking?.type !== "enabled") return undefined;
  const last = body.messages.filter((m) => m.role === "assistant").at(-1);
  const content = Array.isArray(last?.content) ? last.content : [];
  if (!content.some((b) => b.type === "tool_use") || content[0]?.type === "thinking" || content[0]?.type === "redacted_thinking") return undefined;
  return "messages.1.content.0.type: Expected `thinking` or `redacted_thinking`, but found `text`. When `thinking` is enabled, a final `assistant` message must start with a thinking block.";
}
const bodies: Body[] = [];
let calls = 0;
const server = createServer((req, res) => {
  let text = "";
  req.on("data", (c) => (text += c));
  req.on("end", () => {
    const body = JSON.parse(text) as Body;
    bodies.push(body);
    const refused = refusal(body);
    if (refused) {
      res.writeHead(400, { "content-type": "application/json" });
      res.end(JSON.stringify({ type: "error", error: { type: "invalid_request_error", message: refused } }));
      return;
    }
    if (body.model === "loop") {
      // A thinking loop: each step thinks at length and calls a tool.
      const step = body.messages.filter((m) => m.role === "assistant").length;
      const content = [
        { type: "thinking", thinking: `Step ${step}: ${"weighing the options. ".repeat(120)}`, signature: `sig-${step}` },
        { type: "tool_use", id: `toolu_${step}`, name: "search", input: { step } },
      ];
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify({ id: `msg_${bodies.length}`, type: "message", role: "assistant", model: body.model, content, stop_reason: "tool_use", stop_sequence: null, usage: { input_tokens: 10, output_tokens: 5 } }));
      return;
    }
    const first = body.model === "chat" && calls++ === 0;
    const content = first
      ? [
          { type: "thinking", thinking: "Two tools.", signature: "sig" },
          { type: "text", text: "Checking both.", citations: null },
          { type: "tool_use", id: "toolu_w", name: "weather", input: { city: "Tokyo", days: 2 } },
          { type: "tool_use", id: "toolu_g", name: "grep", input: { pattern: "warn|error" } },
        ]
      : [{ type: "text", text: body.model === "summarizer" ? "They asked about Tokyo's weather." : "Done.", citations: null }];
    res.writeHead(200, { "content-type": "application/json" });
    res.end(JSON.stringify({
      id: `msg_${bodies.length}`, type: "message", role: "assistant", model: body.model, content,
      stop_reason: first ? "tool_use" : "end_turn", stop_sequence: null, usage: { input_tokens: 10, output_tokens: 5 },
    }));
  });
});
await new Promise<void>((r) => server.listen(0, "127.0.0.1", () => r()));
const address = server.address();
const client = new Anthropic({ apiKey: "test", baseURL: `http://127.0.0.1:${typeof address === "object" && address ? address.port : 0}`, maxRetries: 0 });

await init();
const c = createCompactor({
  journal: new MemoryJournal(),
  // The compactor's prompt: its system text as `system`, the rest as the member's messages.
  model: modelFromFunction(async (packet) => {
    const r = await client.messages.create({
      model: "summarizer", max_tokens: 1024,
      system: packet.messages.filter((m) => m.role === "system").map((m) => m.content).join("\n\n"),
      messages: packet.messages.flatMap((m) => (m.role === "user" ? [{ role: "user" as const, content: m.content }] : [])),
    });
    return r.content.map((b) => (b.type === "text" ? b.text : "")).join("");
  }),
  declaration: { targetId: "agent", compactorId: "agent-compactor", budget: { kind: "chars", trigger: 6000, retain: 2000 }, summary: { maxChars: 300 } },
});
const id = "trip";
const opening: MessageParam[] = [{ role: "user", content: [{ type: "text", text: "Weather in Tokyo? And grep the log." }] }];
await c.append(id, { format: "anthropic", system: SYSTEM, messages: opening });

// 1. The model thinks and calls two tools: its response goes in as the client returned it.
const ctx1 = await c.context(id, { format: "anthropic" });
const thinking = { type: "enabled" as const, budget_tokens: 1024 };
const r1 = await client.messages.create({ model: "chat", max_tokens: 2048, thinking, system: ctx1.messages.system, messages: ctx1.messages.messages });
await c.append(id, { format: "anthropic", messages: r1 });
const results: MessageParam = {
  role: "user",
  content: [
    { type: "tool_result", tool_use_id: "toolu_w", content: "Error: weather service down", is_error: true },
    { type: "tool_result", tool_use_id: "toolu_g", content: [{ type: "text", text: "2 lines" }] },
  ],
};
// A system message in the conversation (the API's mid-conversation system
// blocks) is a `MessageParam` too.
const note: MessageParam[] = [results, { role: "system", content: [{ type: "text", text: "Prices in euros." }] }];
await c.append(id, { format: "anthropic", messages: note });
// 2. The context goes back to the client, thinking still on: the API takes
// it only with the thinking block the tool uses came with.
const ctx2 = await c.context(id, { format: "anthropic" });
let cycleRefused = "";
try {
  await client.messages.create({ model: "chat", max_tokens: 2048, thinking, system: ctx2.messages.system, messages: ctx2.messages.messages });
} catch (e) {
  cycleRefused = String(e);
}
const sent = bodies.at(-1)!;

// 3. A long chat: the summarizer is called through the same client.
let compacted = 0;
for (let i = 0; i < 80; i++) {
  const turns: MessageParam[] = [{ role: "user", content: `Day ${i}: what should we see? ${"Details of the plan. ".repeat(8)}` }, { role: "assistant", content: `On day ${i}, the old town. ${"More suggestions here. ".repeat(8)}` }];
  await c.append(id, { format: "anthropic", messages: turns });
  if ((await c.onMessage(id)).status === "compacted") compacted++;
}
const after = await c.context(id, { format: "anthropic" });
await client.messages.create({ model: "chat", max_tokens: 2048, thinking, system: after.messages.system, messages: after.messages.messages });

// 4. A thinking loop longer than the budget: six steps of ~2,700 characters
// of thinking each, against a trigger of 6,000. Every step's request goes
// out (the last step's thinking first in the final assistant message) and
// the context says how many earlier steps' thinking it left out.
await c.append(id, { format: "anthropic", messages: [{ role: "user", content: "Search until you find a hotel." }] });
let loopRefused = "";
let leftOut = 0;
let uncovered = 0;
const signatures: string[] = [];
const loopSent: Body[] = [];
try {
  for (let step = 0; step < 6; step++) {
    const ctx = await c.context(id, { format: "anthropic" });
    uncovered += ctx.manifest.uncoveredOmitted ?? 0;
    const r = await client.messages.create({ model: "loop", max_tokens: 4096, thinking, system: ctx.messages.system, messages: ctx.messages.messages });
    loopSent.push(bodies.at(-1)!);
    const thought = r.content[0];
    signatures.push(thought?.type === "thinking" ? thought.signature : "");
    await c.append(id, { format: "anthropic", messages: r });
    const use = r.content.find((b) => b.type === "tool_use");
    await c.append(id, { format: "anthropic", messages: [{ role: "user", content: [{ type: "tool_result", tool_use_id: use?.type === "tool_use" ? use.id : "", content: `result ${step}` }] }] });
    await c.onMessage(id);
  }
  const ctx = await c.context(id, { format: "anthropic" });
  leftOut = ctx.manifest.reasoningLeftOut ?? 0;
  await client.messages.create({ model: "loop", max_tokens: 4096, thinking, system: ctx.messages.system, messages: ctx.messages.messages });
  loopSent.push(bodies.at(-1)!);
} catch (e) {
  loopRefused = String(e);
}

// 5. A system prompt of text blocks, as prompt caching writes it (the
// SDK's own `TextBlockParam[]`, `cache_control` on the last block): its
// text goes back as the request's system prompt, the member's message apart.
const cached: TextBlockParam[] = [
  { type: "text", text: SYSTEM },
  { type: "text", text: "Refunds within 14 days.", cache_control: { type: "ephemeral" } },
];
await c.append("cached", { format: "anthropic", system: cached, messages: [{ role: "user", content: "Can I get a refund?" }] });
const ctx5 = await c.context("cached", { format: "anthropic" });
await client.messages.create({ model: "cached", max_tokens: 1024, system: ctx5.messages.system, messages: ctx5.messages.messages });
const cachedSent = bodies.at(-1)!;

// 6. A conversation without a system prompt: its context has no system
// field to send (the API refuses an empty one).
await c.append("plain", { format: "anthropic", messages: [{ role: "user", content: "Just a question." }] });
const ctx6 = await c.context("plain", { format: "anthropic" });
let plainRefused = "";
try {
  await client.messages.create({ model: "plain", max_tokens: 1024, system: ctx6.messages.system, messages: ctx6.messages.messages });
} catch (e) {
  plainRefused = String(e);
}
server.close();

const blocks = (m: Body["messages"][number] | undefined): Block2[] => (Array.isArray(m?.content) ? m.content : []);
const uses = sent.messages.flatMap(blocks).filter((b) => b.type === "tool_use");
const answered = sent.messages.find((m) => blocks(m).some((b) => b.type === "tool_result"));
const summarizerBodies = bodies.filter((b) => b.model === "summarizer");
const last = bodies.filter((b) => b.model === "chat").at(-1)!;
console.log(JSON.stringify({
  systemApart: sent.system === SYSTEM + "\n\nPrices in euros." && sent.messages[0]?.role === "user",
  responseAsItIs: uses.map((b) => `${b.id}:${b.name}:${JSON.stringify(b.input)}`).join("|") === 'toolu_w:weather:{"city":"Tokyo","days":2}|toolu_g:grep:{"pattern":"warn|error"}',
  thinkingInItsCycle: cycleRefused === "" && sent.messages.flatMap(blocks).filter((b) => b.type === "thinking").length === 1
    && blocks(sent.messages.find((m) => m.role === "assistant"))[0]?.signature === "sig",
  thinkingNotAfter: !last.messages.flatMap(blocks).some((b) => b.type === "thinking"),
  resultsAnswerCalls: answered?.role === "user" && blocks(answered).map((b) => b.tool_use_id).join(",") === "toolu_w,toolu_g",
  errorArrives: blocks(answered).some((b) => b.tool_use_id === "toolu_w" && b.is_error === true && String(b.content).includes("weather service down")),
  compacted,
  summarizerInstructions: summarizerBodies.length > 0 && summarizerBodies.every((b) => String(b.system).length > 200 && b.messages.every((m) => m.role === "user")),
  systemAfterCompaction: String(last.system).startsWith(SYSTEM) && JSON.stringify(last).includes("untrusted-history-summary"),
  longThinkingLoopGoesOn: loopRefused === "" && loopSent.length === 7 && leftOut > 0
    && loopSent.every((b, i) => i === 0 || blocks(b.messages.filter((m) => m.role === "assistant").at(-1))[0]?.signature === signatures[i - 1])
    && uncovered === 0,
  systemBlocks: typeof cachedSent.system === "string" && cachedSent.system.startsWith(SYSTEM) && cachedSent.system.endsWith("Refunds within 14 days.")
    && cachedSent.messages.length === 1 && cachedSent.messages[0]?.role === "user",
  noSystemNoField: plainRefused === "" && ctx6.messages.system === undefined && bodies.at(-1)?.model === "plain" && !("system" in bodies.at(-1)!),
}));
