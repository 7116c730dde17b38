// Every JavaScript example in the README and in the package's README runs as
// written: each block's imports are bound to the package and to stand-ins
// for what a reader brings (their journal, a provider at a real local HTTP
// address, an AI SDK model), its `export default` worker is called with a
// real Request, and what it produced is checked. A README change that breaks
// an example fails here.
import { test } from "node:test";
import { createServer } from "node:http";
import { createHash } from "node:crypto";
import { readFile } from "node:fs/promises";
import * as f from "../dist/node.js";
import { check, say } from "./shared.mjs";
import { sqliteD1 } from "./d1-sqlite.mjs";

await f.init();
const wasmModule = await WebAssembly.compile(await readFile(new URL("../pkg/foldline_bg.wasm", import.meta.url)));

/** The ```js blocks of a markdown file. */
async function blocks(path) {
  const md = await readFile(new URL(path, import.meta.url), "utf8");
  return [...md.matchAll(/```js\n([\s\S]*?)```/g)].map((m) => m[1]);
}

/** A stand-in OpenAI-compatible provider over real HTTP: streams a summary. */
async function provider() {
  const server = createServer((req, res) => {
    let body = "";
    req.on("data", (c) => (body += c));
    req.on("end", () => {
      const chunk = (o) => res.write(`data: ${JSON.stringify(o)}\n\n`);
      res.writeHead(200, { "content-type": "text/event-stream" });
      chunk({ model: "gpt-4o-mini", choices: [{ delta: { content: "They planned ten days in Portugal." }, finish_reason: "stop" }] });
      chunk({ model: "gpt-4o-mini", choices: [], usage: { prompt_tokens: 100, completion_tokens: 8 } });
      res.end("data: [DONE]\n\n");
    });
  });
  await new Promise((r) => server.listen(0, "127.0.0.1", r));
  return { url: `http://127.0.0.1:${server.address().port}/v1`, close: () => server.close() };
}

/** An AI SDK model that answers with a fixed text (as `@ai-sdk/openai`'s `openai(id)` would, offline). */
async function aiSdkModel(id) {
  const { MockLanguageModelV4, convertArrayToReadableStream } = await import("ai/test");
  return new MockLanguageModelV4({
    modelId: id,
    doStream: async () => ({
      stream: convertArrayToReadableStream([
        { type: "text-start", id: "t" },
        { type: "text-delta", id: "t", delta: "Day one: Lisbon." },
        { type: "text-end", id: "t" },
        { type: "finish", finishReason: { unified: "stop", raw: "stop" }, usage: { inputTokens: { total: 50 }, outputTokens: { total: 5 } } },
      ]),
    }),
  });
}

/**
 * Run a block: imports become bindings from `modules`, free names come from
 * `scope`, `export default` is captured; answers the block's default export
 * and the values of `results` (names the block defines).
 */
async function run(block, modules, scope, results = []) {
  const prologue = [];
  const body = block.replace(/^import (.+) from "([^"]+)";.*$/gm, (_, what, from) => {
    check(from in modules, `the example imports ${from}: give it a stand-in`);
    const m = `__modules[${JSON.stringify(from)}]`;
    prologue.push(what.startsWith("{") ? `const ${what.replace(/ as /g, ": ")} = ${m};` : `const ${what} = ${m}.default;`);
    return "";
  }).replace(/^export default /m, "__exported = ");
  check(!/^\s*(import|export) /m.test(body), "every import and export is handled");
  const names = Object.keys(scope);
  const src = `return (async () => { let __exported; ${prologue.join("\n")}\n${body}\n;return { __exported, ${results.join(", ")} }; })();`;
  return new Function("__modules", ...names, src)(modules, ...names.map((n) => scope[n]));
}

const declaration = { targetId: "assistant", compactorId: "assistant-compactor", budget: { kind: "chars", trigger: 20000, retain: 8000 } };
const journalWithHistory = async (id, turns) => {
  const journal = new f.MemoryJournal();
  for (let s = 1; s <= turns; s++) await journal.append(id, { ...say(s, s % 2 ? "user" : "assistant", `message ${s} `.padEnd(1200, "x")), conversation: id });
  return journal;
};

test("README: the chat-client example draws the timeline", async () => {
  const [block] = (await blocks("../../README.md")).filter((b) => b.includes("timeline(events)"));
  const journal = await journalWithHistory("c1", 30);
  const c = f.createCompactor({ journal, model: f.modelFromFunction(async () => "A summary."), declaration });
  check((await c.onMessage("c1")).status === "compacted", "the history compacts");
  const events = (await journal.readEvents("c1")).map((s) => s.event);
  const drawn = [];
  await run(block, { foldline: f }, { events, drawDivider: (t) => drawn.push(["divider", t]), drawMessage: (r, t) => drawn.push([r, t]) });
  check(drawn.some(([k, t]) => k === "divider" && /^automatic compaction · completed · \d+ turns$/.test(t)), JSON.stringify(drawn.filter(([k]) => k === "divider")));
  check(drawn.filter(([k]) => k !== "divider").length === 30, `${drawn.length} items`);
});

test("README: the edge worker compacts and answers the OpenAI-format context", async () => {
  const [block] = (await blocks("../../README.md")).filter((b) => b.includes("createCompactor") && b.includes("export default"));
  const p = await provider();
  try {
    const journal = await journalWithHistory("room-1", 90);
    const { __exported: worker } = await run(block, { foldline: f, "foldline/foldline_bg.wasm": { default: wasmModule } }, { myJournal: () => journal });
    const env = { LLM_URL: p.url, LLM_KEY: "k" };
    const res = await worker.fetch(new Request("http://edge/", { method: "POST", body: JSON.stringify({ conversationId: "room-1" }) }), env);
    const messages = await res.json();
    check(Array.isArray(messages) && messages.some((m) => m.role === "user" && m.content.includes("They planned ten days in Portugal.")), JSON.stringify(messages).slice(0, 300));
    check((await journal.readEvents("room-1")).some((s) => s.event.type === "boundary"), "a boundary was appended");
  } finally {
    p.close();
  }
});

test("README: the edge handler serves the HTTP API to a member", async () => {
  const [block] = (await blocks("../../README.md")).filter((b) => b.includes("createHandler"));
  const p = await provider();
  try {
    const { __exported: worker } = await run(block, { foldline: f, "foldline/foldline_bg.wasm": { default: wasmModule } }, {});
    const tokenSha256 = createHash("sha256").update("secret-1").digest("hex");
    // The worker's D1 binding, over Node's SQLite (real D1: test/workerd/run.mjs).
    const DB = sqliteD1();
    const env = { DB, LLM_URL: p.url, LLM_KEY: "k", MEMBERS: JSON.stringify([{ id: "ana", tokenSha256 }]) };
    const waits = [];
    const ctx = { waitUntil: (w) => waits.push(w), passThroughOnException() {} };
    const post = await worker.fetch(new Request("http://edge/api/conversations/trip/messages", {
      method: "POST", headers: { authorization: "Bearer secret-1", "content-type": "application/json" },
      body: JSON.stringify([{ role: "user", content: "Plan ten days in Portugal." }]),
    }), env, ctx);
    check(post.status === 201, `append: ${post.status} ${await post.clone().text()}`);
    await Promise.all(waits);
    const got = await worker.fetch(new Request("http://edge/api/conversations/trip/context?format=openai", { headers: { authorization: "Bearer secret-1" } }), env, ctx);
    check(got.status === 200, `context: ${got.status}`);
    const denied = await worker.fetch(new Request("http://edge/api/conversations/trip/context", { headers: { authorization: "Bearer wrong" } }), env, ctx);
    check(denied.status === 401, `a stranger: ${denied.status}`);
    // What the worker wrote is in the database: the message, and its owner.
    const stored = await (await f.D1Journal.open(DB)).readEvents("trip");
    check(stored.some((e) => e.event.type === "message" && e.event.parts[0].text === "Plan ten days in Portugal."), JSON.stringify(stored).slice(0, 300));
    check((await (await f.D1Owners.open(DB)).get("trip")) === "ana", "the member owns the conversation");
  } finally {
    p.close();
  }
});

test("README: the AI SDK example appends with a token counter and streams an answer from the context", async () => {
  const [block] = (await blocks("../../README.md")).filter((b) => b.includes("modelFromAiSdk"));
  const ai = await import("ai");
  const openai = await aiSdkModel("gpt-4o-mini");
  const out = await run(block, {
    foldline: f,
    "gpt-tokenizer": await import("gpt-tokenizer"),
    "@ai-sdk/openai": { openai: () => openai },
    ai,
  }, {}, ["ctx", "answer"]);
  check(out.ctx.messages.at(-1).role === "user", JSON.stringify(out.ctx.messages));
  check((await out.answer.text) === "Day one: Lisbon.", "the answer streams from the model");
});

test("js/README: the quick start compacts and answers OpenAI messages", async () => {
  const [block] = await blocks("../README.md");
  const out = await run(block, { foldline: f }, { callMyModel: async (messages) => `Summary of ${messages.length} messages.` }, ["messages"]);
  check(Array.isArray(out.messages) && out.messages.at(-1).content === "Plan ten days in Portugal.", JSON.stringify(out.messages));
});
