// One `openai` package line (6 or 7), as an app uses it: the real client
// against a local OpenAI-compatible server over HTTP that records every
// request body; the client's own assistant message (a function call and a
// custom tool call) appended to foldline as it is, tool results as
// `ChatCompletionToolMessageParam`s, the context handed back to
// `chat.completions.create`, and a summarizer built on the same client;
// then the same through the Responses API (`responses.create`).
// Compiled with `tsc --strict` against the line's own types (no casts on
// foldline's side), then run; prints one JSON line that run.mjs judges.
import { createServer } from "node:http";
import OpenAI from "openai";
import type { ChatCompletionMessageParam, ChatCompletionToolMessageParam } from "openai/resources/chat/completions";
import type { ResponseInputItem } from "openai/resources/responses/responses";
import { init, createCompactor, MemoryJournal, modelFromFunction } from "foldline";

const SYSTEM = "You are the travel desk. Answer in one sentence.";
type Body = { model: string; messages: Array<{ role: string; content?: unknown; tool_calls?: Array<{ type: string; id: string }>; tool_call_id?: string }> };
const bodies: Body[] = [];
let calls = 0;
type ResponsesBody = { model: string; input: Array<{ type?: string; role?: string; content?: unknown; call_id?: string; output?: string; id?: string; encrypted_content?: string }> };
const responsesBodies: ResponsesBody[] = [];
let responsesCalls = 0;
const server = createServer((req, res) => {
  let text = "";
  req.on("data", (c) => (text += c));
  req.on("end", () => {
    if (req.url?.endsWith("/responses")) {
      const body = JSON.parse(text) as ResponsesBody;
      responsesBodies.push(body);
      // As the API answers a store: false request that names a reasoning
      // item by its id: nothing was stored to find.
      const named = body.input.find((x) => x.type === "reasoning" && x.id !== undefined);
      if (named) {
        res.writeHead(404, { "content-type": "application/json" });
        res.end(JSON.stringify({ error: { type: "invalid_request_error", message: `Item with id '${named.id}' not found. Items are not persisted when \`store\` is set to false.` } }));
        return;
      }
      const first = body.model === "chat" && responsesCalls++ === 0;
      const output = first
        ? [
            { type: "reasoning", id: "rs_1", summary: [{ type: "summary_text", text: "Two calls." }], encrypted_content: "gAAAA-enc" },
            { type: "message", id: "msg_1", role: "assistant", status: "completed", content: [{ type: "output_text", text: "Checking both.", annotations: [] }] },
            { type: "function_call", id: "fc_1", call_id: "call-w", name: "weather", arguments: '{"city":"Tokyo"}', status: "completed" },
            { type: "custom_tool_call", id: "ctc_1", call_id: "call-g", name: "grep", input: "warn|error" },
          ]
        : [{ type: "message", id: "msg_2", role: "assistant", status: "completed", content: [{ type: "output_text", text: body.model === "summarizer" ? "They asked about Tokyo's weather." : "Done.", annotations: [] }] }];
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify({
        id: `resp_${responsesBodies.length}`, object: "response", created_at: 0, status: "completed", model: body.model, output,
        parallel_tool_calls: true, tool_choice: "auto", tools: [], error: null, incomplete_details: null, instructions: null, metadata: {}, temperature: 1, top_p: 1,
        usage: { input_tokens: 10, output_tokens: 5, total_tokens: 15, input_tokens_details: { cached_tokens: 0 }, output_tokens_details: { reasoning_tokens: 0 } },
      }));
      return;
    }
    const body = JSON.parse(text) as Body;
    bodies.push(body);
    const first = body.model === "chat" && calls++ === 0;
    const message = first
      ? {
          role: "assistant", content: null, refusal: null,
          tool_calls: [
            { id: "call-w", type: "function", function: { name: "weather", arguments: '{"city":"Tokyo"}' } },
            { id: "call-g", type: "custom", custom: { name: "grep", input: "warn|error" } },
          ],
        }
      : { role: "assistant", content: body.model === "summarizer" ? "They asked about Tokyo's weather." : "Done.", refusal: null };
    res.writeHead(200, { "content-type": "application/json" });
    res.end(JSON.stringify({
      id: "x", object: "chat.completion", created: 0, model: body.model,
      choices: [{ index: 0, message, finish_reason: first ? "tool_calls" : "stop", logprobs: null }],
      usage: { prompt_tokens: 10, completion_tokens: 5, total_tokens: 15 },
    }));
  });
});
await new Promise<void>((r) => server.listen(0, "127.0.0.1", () => r()));
const address = server.address();
const client = new OpenAI({ apiKey: "test", baseURL: `http://127.0.0.1:${typeof address === "object" && address ? address.port : 0}/v1` });

await init();
const journal = new MemoryJournal();
const c = createCompactor({
  journal,
  model: modelFromFunction(async (packet) => {
    const r = await client.chat.completions.create({ model: "summarizer", messages: packet.messages });
    return r.choices[0]?.message.content ?? "";
  }),
  declaration: { targetId: "agent", compactorId: "agent-compactor", budget: { kind: "chars", trigger: 6000, retain: 2000 }, summary: { maxChars: 300 } },
});
const id = "trip";
const opening: ChatCompletionMessageParam[] = [{ role: "system", content: SYSTEM }, { role: "user", content: [{ type: "text", text: "Weather in Tokyo? And grep the log." }] }];
await c.append(id, opening);

// 1. The model calls a function and a custom tool: its message goes in as the client returned it.
const ctx1 = await c.context(id, { format: "openai" });
const r1 = await client.chat.completions.create({ model: "chat", messages: ctx1.messages ?? [] });
const assistant = r1.choices[0]!.message;
await c.append(id, assistant);
const results: ChatCompletionToolMessageParam[] = [
  { role: "tool", tool_call_id: "call-w", content: "Error: weather service down" },
  { role: "tool", tool_call_id: "call-g", content: [{ type: "text", text: "2 lines" }] },
];
await c.append(id, results);
// 2. The context goes back to the client.
const ctx2 = await c.context(id, { format: "openai" });
await client.chat.completions.create({ model: "chat", messages: ctx2.messages ?? [] });
const sent = bodies.at(-1)!;

// 3. A long chat: the summarizer is called through the same client.
let compacted = 0;
for (let i = 0; i < 80; i++) {
  await c.append(id, [{ role: "user", content: `Day ${i}: what should we see? ${"Details of the plan. ".repeat(8)}` }, { role: "assistant", content: `On day ${i}, the old town. ${"More suggestions here. ".repeat(8)}` }]);
  if ((await c.onMessage(id)).status === "compacted") compacted++;
}
const after = await c.context(id, { format: "openai" });
await client.chat.completions.create({ model: "chat", messages: after.messages ?? [] });

// 4. The Responses API (store: false, encrypted reasoning included): the
// request's items and the response's output go in as they are, the context
// goes back as its `input` (the open cycle's reasoning item with its
// encrypted content and no id), and the summarizer answers through it too.
const r = createCompactor({
  journal: new MemoryJournal(),
  model: modelFromFunction(async (packet) => (await client.responses.create({ model: "summarizer", input: packet.messages })).output_text),
  declaration: { targetId: "agent", compactorId: "agent-compactor", budget: { kind: "chars", trigger: 6000, retain: 2000 }, summary: { maxChars: 300 } },
});
const start: ResponseInputItem[] = [{ role: "system", content: SYSTEM }, { type: "message", role: "user", content: [{ type: "input_text", text: "Weather in Tokyo? And grep the log." }] }];
await r.append(id, { format: "openai-responses", messages: start });
const stateless = { store: false, include: ["reasoning.encrypted_content" as const] };
const first = await client.responses.create({ model: "chat", input: (await r.context(id, { format: "openai-responses" })).messages, ...stateless });
await r.append(id, { format: "openai-responses", messages: first.output });
const outputs: ResponseInputItem[] = [
  { type: "function_call_output", call_id: "call-w", output: "Error: weather service down" },
  { type: "custom_tool_call_output", call_id: "call-g", output: [{ type: "input_text", text: "2 lines" }] },
];
await r.append(id, { format: "openai-responses", messages: outputs });
await client.responses.create({ model: "chat", input: (await r.context(id, { format: "openai-responses" })).messages, ...stateless });
const sentItems = responsesBodies.at(-1)!.input;
let responsesCompacted = 0;
for (let i = 0; i < 80; i++) {
  await r.append(id, { format: "openai-responses", messages: [{ role: "user", content: `Day ${i}: what should we see? ${"Details of the plan. ".repeat(8)}` }, { role: "assistant", content: `On day ${i}, the old town. ${"More suggestions here. ".repeat(8)}` }] });
  if ((await r.onMessage(id)).status === "compacted") responsesCompacted++;
}
await client.responses.create({ model: "chat", input: (await r.context(id, { format: "openai-responses" })).messages, ...stateless });
server.close();

const summarizerBodies = bodies.filter((b) => b.model === "summarizer");
const callMessage = sent.messages.find((m) => m.tool_calls);
console.log(JSON.stringify({
  systemFirst: sent.messages[0]?.role === "system" && sent.messages[0]?.content === SYSTEM,
  customKept: callMessage?.tool_calls?.map((t) => `${t.type}:${t.id}`).join(",") === "function:call-w,custom:call-g",
  pairsInOrder: sent.messages.slice(sent.messages.indexOf(callMessage!) + 1, sent.messages.indexOf(callMessage!) + 3).map((m) => m.tool_call_id).join(",") === "call-w,call-g",
  errorArrives: sent.messages.some((m) => m.tool_call_id === "call-w" && String(m.content).includes("weather service down")),
  compacted,
  summarizerInstructions: summarizerBodies.length > 0 && summarizerBodies.every((b) => b.messages[0]?.role === "system" && String(b.messages[0].content).length > 200),
  systemAfterCompaction: bodies.at(-1)?.messages[0]?.role === "system" && String(bodies.at(-1)?.messages[0]?.content).startsWith(SYSTEM),
  responsesItems: sentItems.map((x) => x.type ?? x.role).join(",") === "system,user,reasoning,assistant,function_call,custom_tool_call,function_call_output,custom_tool_call_output",
  responsesReasoningBack: sentItems.some((x) => x.type === "reasoning" && x.encrypted_content === "gAAAA-enc" && x.id === undefined),
  responsesReasoningClosed: !responsesBodies.at(-1)!.input.some((x) => x.type === "reasoning"),
  responsesOutputs: sentItems.filter((x) => x.type?.endsWith("_output")).map((x) => `${x.call_id}:${x.output}`).join("|") === "call-w:Error: weather service down|call-g:2 lines",
  responsesCompacted,
  responsesAfterCompaction: responsesBodies.at(-1)?.input[0]?.role === "system" && String(responsesBodies.at(-1)?.input[1]?.content).startsWith("[untrusted-history-summary]"),
  responsesSummarizer: responsesBodies.some((b) => b.model === "summarizer"),
}));
