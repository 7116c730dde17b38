import { test } from "node:test";
import assert from "node:assert/strict";
import { readFile } from "node:fs/promises";
import { createHash } from "node:crypto";
import { spawnSync } from "node:child_process";
import * as f from "../dist/node.js";
import { suite, chat, declaration, fakeModel, check, say } from "./shared.mjs";

await f.init();

for (const [name, fn] of suite(f, async () => new f.MemoryJournal())) test(name, fn);

test("artifactSha256 is the SHA-256 of the shipped .wasm", async () => {
  const bytes = await readFile(new URL("../pkg/foldline_bg.wasm", import.meta.url));
  const hex = createHash("sha256").update(bytes).digest("hex");
  if (f.artifactSha256 !== `sha256:${hex}`) throw new Error(`${f.artifactSha256} != sha256:${hex}`);
});

test("the writer lease keeps a second driver out", async () => {
  const journal = new f.MemoryJournal();
  if (!(await journal.acquireLease("c1", "other", 60_000))) throw new Error("lease");
  const c = f.createCompactor({ journal, model: { stream() { throw new Error("x"); }, complete() { throw new Error("x"); } }, declaration: { targetId: "a", compactorId: "b" } });
  // The first message activates the conversation: a write, so the run needs the lease.
  await c.append("c1", { role: "user", content: "hello" });
  const r = await c.onMessage("c1");
  if (r.status !== "busy") throw new Error(JSON.stringify(r));
});

test("an automatic check with nothing to write takes no lease", async () => {
  const journal = new f.MemoryJournal();
  const c = f.createCompactor({ journal, model: { stream() { throw new Error("x"); }, complete() { throw new Error("x"); } }, declaration: { targetId: "a", compactorId: "b" } });
  await c.append("c1", { role: "user", content: "hello" });
  if ((await c.onMessage("c1")).status === "busy") throw new Error("activation");
  const before = (await journal.progress("c1"))?.skippedRuns ?? 0;
  const held = await journal.acquireLease("c1", "other", 60_000);
  if (!held) throw new Error("lease");
  await c.append("c1", { role: "assistant", content: "hi" });
  // Far below the trigger: a skip, its watermark noted, while another writer holds the conversation.
  const r = await c.onMessage("c1");
  if (r.status !== "skipped") throw new Error(JSON.stringify(r));
  if ((await journal.progress("c1"))?.skippedRuns !== before + 1) throw new Error(JSON.stringify(await journal.progress("c1")));
  // The other writer's lease is untouched: it renews under the same fence.
  if ((await journal.acquireLease("c1", "other", 60_000)) !== held) throw new Error("the lease moved");
});

test("contentHash in JS equals the core's content hash of a turn", async () => {
  const journal = new f.MemoryJournal();
  const parts = [{ type: "text", text: "héllo \"q\"\n\u0001 " + "x".repeat(3000) }, { type: "toolResult", callId: "c", content: "r" }];
  await journal.append("c1", { type: "message", conversation: "c1", sourceSeq: 1, turnId: "t1", role: "user", parts });
  const [stored] = await journal.readEvents("c1");
  const decl = { targetId: "a", compactorId: "b", budget: { kind: "chars", trigger: 20000, retain: 1024 }, summary: { maxChars: 10 } };
  const withoutHash = { ...stored.event };
  delete withoutHash.contentHash;
  // The core computes the hash itself from the same parts; a manual compaction exposes it.
  const act = f.plan({ declaration: decl, route: { conversation: "c1" }, events: [withoutHash] });
  const more = { type: "message", conversation: "c1", sourceSeq: 2, turnId: "t2", role: "assistant", parts: [{ type: "text", text: "ok" }] };
  const o = f.plan({ declaration: decl, route: { conversation: "c1" }, frontier: act.frontier, events: [withoutHash, more], owner: "m", trigger: { kind: "manual", actor: "m" } });
  if (o.outcome !== "compact") throw new Error(JSON.stringify(o));
  if (o.packet.input.turns[0].contentHash !== stored.event.contentHash) throw new Error(`${o.packet.input.turns[0].contentHash} != ${stored.event.contentHash}`);
});

test("turnMeta: select on metadata keeps exactly the turns a full select keeps", async () => {
  const decl = { targetId: "a", compactorId: "b", budget: { kind: "chars", trigger: 20000, retain: 10000 } };
  const events = [];
  for (let s = 1; s <= 40; s++) events.push({ type: "message", conversation: "c1", chat: "", sender: "", sourceSeq: s, turnId: `t${s}`, role: s % 2 ? "user" : "assistant", parts: [{ type: "text", text: `m${s} ` + "é😀".repeat(s * 7) }] });
  const metas = await Promise.all(events.map(async (e) => ({ type: "turnMeta", ...(await f.turnMeta(e)) })));
  const req = { declaration: decl, route: { conversation: "c1", chat: "", sender: "" }, limit: 5000, render: false };
  const full = f.select({ ...req, events });
  const meta = f.select({ ...req, events: metas });
  if (JSON.stringify(full.manifest) !== JSON.stringify(meta.manifest)) throw new Error("manifests differ");
  let code;
  try { f.select({ ...req, events: metas, render: true }); } catch (e) { code = e.code; }
  if (code !== "needs_content") throw new Error(`expected needs_content, got ${code}`);
});

test("a call before init() answers not_initialized", () => {
  // A process of its own: in this one, init() has run.
  const entry = new URL("../dist/node.js", import.meta.url).href;
  const script = `const f = await import(${JSON.stringify(entry)});
    try { f.plan({ declaration: { targetId: "a", compactorId: "b" }, route: { conversation: "c" }, events: [] }); }
    catch (e) { console.log(JSON.stringify({ typed: e instanceof f.FoldlineError, code: e.code })); }`;
  const r = spawnSync(process.execPath, ["--input-type=module", "-e", script], { encoding: "utf8" });
  const out = JSON.parse(r.stdout || "{}");
  check(out.typed === true, `typed: ${r.stdout} ${r.stderr}`);
  check(out.code === "not_initialized", out.code);
});

test("a core of another ABI major is refused at init with unsupported_version", () => {
  // The smallest module the glue instantiates, whose raw ABI says major 2:
  // memory, a no-op __wbindgen_start, foldline_abi_major returning 2.
  const name = (s) => [s.length, ...Buffer.from(s)];
  const exports = [3, ...name("memory"), 2, 0, ...name("foldline_abi_major"), 0, 0, ...name("__wbindgen_start"), 0, 1];
  const bytes = [
    0x00, 0x61, 0x73, 0x6d, 1, 0, 0, 0,
    1, 8, 2, 0x60, 0, 1, 0x7f, 0x60, 0, 0, // types: () -> i32, () -> ()
    3, 3, 2, 0, 1, // functions
    5, 3, 1, 0, 1, // one page of memory
    7, exports.length, ...exports,
    10, 9, 2, 4, 0, 0x41, 2, 0x0b, 2, 0, 0x0b, // i32.const 2; nothing
  ];
  const entry = new URL("../dist/node.js", import.meta.url).href;
  const script = `const f = await import(${JSON.stringify(entry)});
    try { await f.init(new Uint8Array(${JSON.stringify(bytes)})); console.log("{}"); }
    catch (e) { console.log(JSON.stringify({ typed: e instanceof f.FoldlineError, code: e.code, message: e.message })); }`;
  const r = spawnSync(process.execPath, ["--input-type=module", "-e", script], { encoding: "utf8" });
  const out = JSON.parse(r.stdout || "{}");
  check(out.typed === true, `typed: ${r.stdout} ${r.stderr}`);
  check(out.code === "unsupported_version" && out.message.includes("ABI major 2"), JSON.stringify(out));
});

test("a .wasm URL that serves nothing answers not_initialized naming the URL (not the glue's untyped error)", async () => {
  const { createServer } = await import("node:http");
  const server = createServer((_, res) => { res.writeHead(404); res.end("not found"); });
  await new Promise((r) => server.listen(0, "127.0.0.1", r));
  const url = `http://127.0.0.1:${server.address().port}/assets/foldline_bg.wasm`;
  const entry = new URL("../dist/node.js", import.meta.url).href;
  const script = `const f = await import(${JSON.stringify(entry)});
    try { await f.init(new URL(${JSON.stringify(url)})); console.log("{}"); }
    catch (e) { console.log(JSON.stringify({ typed: e instanceof f.FoldlineError, code: e.code, message: e.message })); }`;
  const { spawn } = await import("node:child_process");
  const child = spawn(process.execPath, ["--input-type=module", "-e", script]);
  let stdout = "";
  child.stdout.on("data", (d) => (stdout += d));
  await new Promise((r) => child.on("close", r));
  server.close();
  const out = JSON.parse(stdout || "{}");
  check(out.typed === true && out.code === "not_initialized", stdout);
  check(out.message.includes(url), out.message);
});

test("npm pack ships the build, the .wasm, the README and the licenses, and nothing else", async () => {
  const { execFileSync } = await import("node:child_process");
  const out = execFileSync("npm", ["pack", "--dry-run", "--json", "--ignore-scripts=false"], { cwd: new URL("..", import.meta.url), encoding: "utf8", stdio: ["ignore", "pipe", "ignore"] });
  const files = JSON.parse(out)[0].files.map((x) => x.path).sort();
  for (const f of ["README.md", "LICENSE-MIT", "LICENSE-APACHE", "package.json", "dist/index.js", "dist/node.js", "dist/browser.js", "dist/client.js", "dist/index.d.ts", "dist/handler.d.ts", "pkg/foldline_bg.wasm", "pkg/foldline.js", "types/foldline_bg.wasm.d.ts"]) {
    check(files.includes(f), `${f} in ${files.join(", ")}`);
  }
  check(!files.some((f) => f.startsWith("src/") || f.startsWith("test/") || f.startsWith("node_modules/")), `only what users need: ${files.join(", ")}`);
  // Each entry is one module (scripts/bundle.mjs): no other .js under dist/.
  const js = files.filter((f) => f.startsWith("dist/") && f.endsWith(".js"));
  check(js.join() === "dist/browser.js,dist/client.js,dist/index.js,dist/node.js", js.join(", "));
});

test("an AI SDK LanguageModel summarizes through modelFromAiSdk", async () => {
  const { MockLanguageModelV4, convertArrayToReadableStream } = await import("ai/test");
  const model = new MockLanguageModelV4({
    modelId: "mock-1",
    doStream: async () => ({
      stream: convertArrayToReadableStream([
        { type: "text-start", id: "t" },
        { type: "text-delta", id: "t", delta: "Alice planned " },
        { type: "text-delta", id: "t", delta: "the launch." },
        { type: "text-end", id: "t" },
        // A reasoning model counts its reasoning among its output tokens.
        { type: "finish", finishReason: { unified: "stop", raw: "stop" }, usage: { inputTokens: { total: 90 }, outputTokens: { total: 904, text: 4, reasoning: 900 } } },
      ]),
    }),
  });
  const journal = new f.MemoryJournal();
  const c = f.createCompactor({ journal, model: f.modelFromAiSdk(model), declaration });
  let compacted;
  for (let i = 1; i <= 40 && !compacted; i++) {
    await c.append("c1", { role: i % 2 ? "user" : "assistant", content: `message ${i} `.padEnd(200, "x") });
    const r = await c.onMessage("c1");
    if (r.status === "compacted") compacted = r.boundary;
  }
  check(compacted, "compacted");
  check(compacted.summary === "Alice planned the launch.", compacted.summary);
  check(compacted.run.modelId === "mock-1", compacted.run.modelId);
  // The summary's own tokens, its reasoning left out: `settle` holds the
  // summary to its cap, and refused every reasoning model's before.
  check(compacted.run.usage.outputTokens === 4, JSON.stringify(compacted.run.usage));
  // The compactor's system prompt went as instructions, the transcript as user turns.
  const prompt = model.doStreamCalls[0].prompt;
  check(prompt[0].role === "system" && prompt.slice(1).every((m) => m.role === "user"), JSON.stringify(prompt.map((m) => m.role)));
});

test("an AI SDK context goes straight into streamText through aiSdkPrompt", async () => {
  const { streamText } = await import("ai");
  const { MockLanguageModelV4, convertArrayToReadableStream } = await import("ai/test");
  const model = new MockLanguageModelV4({
    doStream: async () => ({
      stream: convertArrayToReadableStream([
        { type: "text-start", id: "t" }, { type: "text-delta", id: "t", delta: "ok" }, { type: "text-end", id: "t" },
        { type: "finish", finishReason: { unified: "stop", raw: "stop" }, usage: { inputTokens: { total: 1 }, outputTokens: { total: 1 } } },
      ]),
    }),
  });
  const c = f.createCompactor({ journal: new f.MemoryJournal(), model: fakeModel(), declaration });
  await c.append("c1", [{ role: "system", content: "Be brief." }, { role: "user", content: "Hello?" }]);
  const ctx = await c.context("c1", { format: "ai-sdk" });
  const p = f.aiSdkPrompt(ctx.messages);
  check(p.instructions === "Be brief.", p.instructions);
  const r = streamText({ model, ...p });
  let text = "";
  for await (const t of r.textStream) text += t;
  check(text === "ok", text);
  check(model.doStreamCalls[0].prompt.at(-1).role === "user", JSON.stringify(model.doStreamCalls[0].prompt));
  // Without system text there is none to pass: the SDK would send `""` as a
  // system message, which Anthropic refuses ("system: text content blocks
  // must be non-empty").
  await c.append("c2", { role: "user", content: "Hello?" });
  const bare = f.aiSdkPrompt((await c.context("c2", { format: "ai-sdk" })).messages);
  check(!("system" in bare) && !("instructions" in bare), JSON.stringify(bare));
  for await (const _ of streamText({ model, ...bare }).textStream) void _;
  const sent = model.doStreamCalls[1].prompt;
  check(!sent.some((m) => m.role === "system"), JSON.stringify(sent));
});

// Node 20's V8 aborted the process ("unreachable code" in
// Deoptimizer::DoComputeBuiltinContinuation) a few thousand appends into a
// chat: the core parsed its answer into JS objects while an optimized caller
// that inlined the WebAssembly call was on the stack. Each run is its own
// process, so an abort fails the test instead of killing the runner.
for (const every of [0, 50]) {
  test(`3,000 appends${every ? ` with a check every ${every}` : ""} run to the end in this Node (${process.version})`, () => {
    const script = new URL("./long/append-loop.mjs", import.meta.url).pathname;
    const r = spawnSync(process.execPath, [script, "3000", String(every)], { encoding: "utf8" });
    if (r.status !== 0) throw new Error(`exit ${r.status ?? r.signal}: ${r.stderr.slice(0, 600)}`);
    const out = JSON.parse(r.stdout);
    if (out.total > out.limit) throw new Error(`context ${out.total} over its limit ${out.limit}`);
    if (every && out.compacted === 0) throw new Error("a 3,000-message chat never compacted");
  });
}

test("one huge request does not keep its memory: the core is re-instantiated past MEMORY_RESET_BYTES, and answers the same", async () => {
  await f.init();
  const small = "Basically, I think that the hotel is really quite near the station.";
  const before = f.trimPrompt(small);
  const base = f.memoryBytes();
  // A 4 MB paste grows the linear memory well past the bound for the call…
  const huge = f.trimPrompt(`${small} `.repeat(60_000));
  assert.ok(huge.text.length > 1_000_000);
  // …and the instance that kept it is gone once the call has returned.
  assert.ok(f.memoryBytes() <= f.MEMORY_RESET_BYTES, `${f.memoryBytes()} bytes kept`);
  assert.ok(f.memoryBytes() <= Math.max(base, 2 * 1024 * 1024), `${f.memoryBytes()} bytes after the reset, ${base} before`);
  assert.deepEqual(f.trimPrompt(small), before);
  assert.equal(JSON.parse(f.callJson("trimPrompt", JSON.stringify({ text: small }))).ok.text, before.text);
});

/** A compactor's context, and the same selection made statelessly from everything the journal holds. */
async function contextAndPlain(c, journal, id) {
  const got = await c.context(id, { format: "openai" });
  const r = await c.resolve(id);
  const events = (await journal.readEvents(id)).map((e) => e.event).filter((e) => e.type !== "boundary" && e.type !== "frontier");
  const plain = f.select({ declaration, route: { conversation: id, chat: "", sender: "" }, frontier: r.frontier, head: r.head, amendment: r.amendment, events, format: "openai" });
  return { got, plain };
}

test("held events: a re-instantiated core and conversations past the held limit answer as the stateless select", async () => {
  const journal = new f.MemoryJournal();
  const c = f.createCompactor({ journal, model: fakeModel(), declaration });
  const ids = Array.from({ length: 70 }, (_, i) => `h${i}`); // past the 64 conversations held at once
  for (let round = 1; round <= 24; round++) {
    for (const id of ids.slice(0, round % 3 === 0 ? ids.length : 3)) {
      const seq = (await journal.readEvents(id)).filter((e) => e.event.type === "message").length + 1;
      await journal.append(id, { ...say(seq, seq % 2 ? "user" : "assistant", `turn ${seq} of ${id} `.padEnd(300, "y")), conversation: id, turnId: `${id}-${seq}` });
      await c.onMessage(id);
      const { got, plain } = await contextAndPlain(c, journal, id);
      assert.deepEqual(got, plain, `${id}, round ${round}`);
    }
    if (round === 12) {
      // A huge call re-instantiates the core: everything held in it is gone.
      f.trimPrompt("Basically a long paste. ".repeat(200_000));
      assert.ok(f.memoryBytes() <= f.MEMORY_RESET_BYTES);
    }
  }
  assert.ok((await c.resolve("h0")).head, "h0 compacted along the way");
});

test("held events: a refused first context leaves nothing behind; the next one answers", async () => {
  const journal = new f.MemoryJournal();
  const c = f.createCompactor({ journal, model: fakeModel(), declaration });
  await chat(c, journal, 1, 3);
  await assert.rejects(c.context("c1", { limit: 1 }), (e) => e instanceof f.FoldlineError && e.code === "tail_turn_too_large");
  await assert.rejects(c.context("c1", { limit: 1 }), (e) => e.code === "tail_turn_too_large", "the same refusal, not a held-state error");
  const { got, plain } = await contextAndPlain(c, journal, "c1");
  assert.deepEqual(got, plain);
});

test("held events: a live window over its share of the held bytes (sent inline from then on) answers as the stateless select", async () => {
  const big = { targetId: "a", compactorId: "b", budget: { kind: "chars", trigger: 4_000_000, retain: 2_000_000 } };
  const journal = new f.MemoryJournal();
  const c = f.createCompactor({ journal, model: fakeModel(), declaration: big });
  const route = { conversation: "c1", chat: "", sender: "" };
  for (let s = 1; s <= 24; s++) {
    await journal.append("c1", say(s, s % 2 ? "user" : "assistant", `turn ${s} `.padEnd(60_000, "z")));
    await c.onMessage("c1");
    if (s % 6 !== 0) continue; // past 1 MB from the 18th turn on
    const got = await c.context("c1", { format: "openai" });
    const r = await c.resolve("c1");
    const events = (await journal.readEvents("c1")).map((e) => e.event).filter((e) => e.type !== "boundary" && e.type !== "frontier");
    assert.deepEqual(got, f.select({ declaration: big, route, frontier: r.frontier, head: r.head, amendment: r.amendment, events, format: "openai" }), `turn ${s}`);
  }
});

test("contentHash in JS is held to the core's: tool calls, isError, missing names, text beyond the BMP, approvals, reasoning", async () => {
  const cases = [
    [{ type: "toolCall", callId: "c1", name: "search", arguments: "{\"q\":\"Lisbon 🏖\"}" }],
    [{ type: "toolResult", callId: "c1", name: "search", content: "3 options", isError: true }],
    [{ type: "toolResult", callId: "c1", content: "no name", isError: false }],
    [{ type: "toolResult", callId: "c1", content: "" }],
    [{ type: "text", text: "emoji 😀👩‍👩‍👧, CJK 漢字, math 𝔸, combining é, RTL שלום" }],
    [{ type: "text", text: "" }, { type: "text", text: "\u007f\u2028\u2029\t\"\\" }],
    [{ type: "text", text: "a" }, { type: "toolCall", callId: "x", name: "n", arguments: "" }, { type: "toolResult", callId: "x", name: "n", content: "𝄞", isError: true }],
    [{ type: "toolCall", callId: "c2", name: "patch", arguments: "*** Begin Patch", custom: true }, { type: "toolCall", callId: "c3", name: "f", arguments: "{}", custom: false }],
    [{ type: "approvalRequest", approvalId: "ap1", callId: "c1" }],
    [{ type: "approvalResponse", approvalId: "ap1", approved: false, reason: "not now" }, { type: "approvalResponse", approvalId: "ap2", approved: true, reason: "" }],
    [{ type: "reasoning", format: "anthropic", data: { type: "thinking", thinking: "Porto 🏖", signature: "c2ln" } }, { type: "text", text: "x" }],
    [{ type: "toolCall", callId: "c4", name: "f", arguments: "{}", providerOptions: { google: { thoughtSignature: "c2ln" } } }],
    [{ type: "reasoning", format: "ai-sdk", data: { type: "reasoning", text: "", providerOptions: { anthropic: { redactedData: "b3BhcXVl" } } } }],
  ];
  const route = { conversation: "h" };
  for (const [i, parts] of cases.entries()) {
    const contentHash = await f.contentHash(parts);
    const event = { type: "message", conversation: "h", sourceSeq: i + 1, turnId: `t${i}`, role: "assistant", parts, contentHash };
    // The core refuses a declared hash that differs from its own.
    f.validate({ kind: "events", route, events: [event] });
    let code;
    try { f.validate({ kind: "events", route, events: [{ ...event, contentHash: `sha256:${"0".repeat(64)}` }] }); } catch (e) { code = e.code; }
    assert.equal(code, "invalid_request", `case ${i}: a wrong hash must be refused`);
  }
});

test("long answers at seed 002's token budget never cost the model its recent history (a real o200k tokenizer)", async () => {
  const { encode } = await import("gpt-tokenizer");
  const count = (text) => encode(text).length;
  // Answers as models write them: prose, a code block and a list, 1,000–3,000 tokens.
  const answer = (n) => {
    const want = 1000 + ((n * 397) % 2001);
    let out = `Here is how to handle case ${n}.\n\n`;
    for (let k = 0; count(out) < want; k++) {
      out += k % 3 === 0
        ? `\`\`\`ts\nexport function step${n}_${k}(input: number[]): number {\n  return input.reduce((a, b) => a + b * ${k}, ${n});\n}\n\`\`\`\n`
        : k % 3 === 1
          ? `- Point ${k}: the budget for week ${k % 9} stays at ${n * 17 % 1000} euros, and the review moves to day ${k % 28}.\n`
          : `The reason is that paragraph ${k} of the plan depends on what we decided about item ${n - 1}; keep both in mind when you change it.\n`;
    }
    return out;
  };
  const journal = new f.MemoryJournal();
  const c = f.createCompactor({
    journal, model: fakeModel(), countTokens: count,
    declaration: { targetId: "agent", compactorId: "agent-compactor", budget: { kind: "tokens", window: 8192 } },
  });
  let compacted = 0;
  for (let n = 1; n <= 300; n++) {
    const text = n % 2 ? `Question ${n}: what about step ${n}? Please show code.` : answer(n);
    await c.append("c1", { role: n % 2 ? "user" : "assistant", content: text });
    const r = await c.onMessage("c1");
    assert.ok(r.status !== "refused" && r.status !== "failed", `message ${n}: ${JSON.stringify(r)}`);
    if (r.status === "compacted") compacted++;
    const ctx = await c.context("c1", { format: "openai" });
    const m = ctx.manifest;
    assert.equal(m.uncoveredOmitted ?? 0, 0, `message ${n}: ${JSON.stringify(m.omitted)}`);
    assert.equal(m.included.at(-1), `c1-${n}`, `message ${n}: the newest turn`);
    assert.equal(ctx.messages.at(-1).content, text, `message ${n}: verbatim`);
    // As the provider counts it: every message's content and ~4 tokens of framing each.
    const real = ctx.messages.reduce((a, x) => a + count(x.content ?? "") + 4, 0);
    assert.ok(real <= 8192 - 1024, `message ${n}: ${real} tokens for the model`);
  }
  assert.ok(compacted >= 50, `${compacted}`);
});

// Member compression's fragments (the settings projection, plain-speak) are
// reserved by every member's context; a compactor given the deployment's
// availability plans with room for the largest of them, so no member's
// context leaves out a turn no summary covers. Seed 000's budget (trigger
// 80,000 characters), 300 messages of 200 to 3,000 characters.
test("a compactor given member compression's availability leaves every member's context whole", async () => {
  const availability = { surface: true, toolResult: true, plainSpeak: true, promptTrim: true };
  const members = [{}, { master: true }, { master: true, plainSpeak: true }, { master: true, toolResult: true, plainSpeak: true, promptTrim: true }];
  const run = async (compression) => {
    const c = f.createCompactor({
      journal: new f.MemoryJournal(), model: fakeModel(), ...(compression ? { compression } : {}),
      declaration: { targetId: "agent", compactorId: "agent-compactor", budget: { kind: "chars" } },
    });
    let leftOut = 0, compacted = 0;
    for (let n = 1; n <= 300; n++) {
      const size = 200 + ((n * 7919) % 2800);
      await c.append("c1", { role: n % 2 ? "user" : "assistant", content: `m${n} `.padEnd(size, "w") });
      if ((await c.onMessage("c1")).status === "compacted") compacted++;
      for (const preferences of members) {
        const ctx = await c.context("c1", { format: "openai", member: { availability, preferences } });
        leftOut += ctx.manifest.uncoveredOmitted ?? 0;
      }
    }
    assert.ok(compacted >= 5, `${compacted} compactions`);
    return leftOut;
  };
  assert.equal(await run(availability), 0, "turns no summary covers left out of a member's context");
  // The check is live: planned without the availability, some member's
  // context just below the trigger leaves turns out.
  assert.ok(await run(undefined) > 0, "nothing left out without the room");
  // A mistyped availability is refused when the compactor is built.
  const handlerMembers = [{ id: "a", tokenSha256: "0".repeat(64) }];
  for (const compression of [{ surface: "yes" }, { surfaces: true }, [], null]) {
    for (const build of [() => f.createCompactor({ journal: new f.MemoryJournal(), model: fakeModel(), declaration, compression }),
      () => f.createHandler({ journal: new f.MemoryJournal(), model: fakeModel(), declaration, members: handlerMembers, compression })]) {
      assert.throws(build, (e) => e.code === "invalid_request" && /compression/.test(e.message), JSON.stringify(compression));
    }
  }
});

// The texts the core measures by its own estimate — the summary in force,
// the amendment, the prompt — are counted too before a context is sent: a
// model writing its summary in Chinese, up to the output tokens the packet
// allows (as a provider counts them), left the counted context of a Chinese
// chat 3,520 tokens against its limit of 3,328 (seed 002's defaults); it is
// selected again within the limit less their excess. host-wasmtime's
// embedding test `the_hosts_token_counts_keep_the_context_in_the_window` is
// the Rust driver's twin.
test("counted, the summary, the amendment and the prompt keep the context within its limit", async () => {
  const cjk = (t) => {
    let n = 0, other = 0;
    for (const ch of t) ch >= "\u2e80" ? n++ : other++;
    return n + Math.ceil(other / 4);
  };
  const chinese = {
    async *stream(packet) {
      const r = await this.complete(packet);
      yield { type: "delta", text: r.text };
      yield { type: "done", modelId: r.modelId, usage: r.usage, finishReason: "stop" };
    },
    async complete(packet) {
      const text = `摘要${packet.input.turnCount}：`.padEnd(packet.bounds.maxTokens - 4, "要");
      return { text, modelId: "zh-1", usage: { inputTokens: 100, outputTokens: cjk(text) }, finishReason: "stop" };
    },
  };
  const limit = 3328;
  const sentence = "我们的计划保持预算和日期不变，下周再检查一次。";
  const run = async (countTokens, mode) => {
    const c = f.createCompactor({
      journal: new f.MemoryJournal(), model: chinese, ...(countTokens ? { countTokens, messageOverheadTokens: 3 } : {}),
      declaration: { targetId: "agent", compactorId: "agent-compactor", budget: { kind: "tokens", window: 8192, mode } },
    });
    const provider = (messages) => messages.reduce((a, m) => a + 3 + cjk(m.content ?? ""), 3);
    let most = 0, compacted = 0, promptMost = 0, leftOut = 0;
    for (let n = 1; n <= 240; n++) {
      const text = n % 2 ? `问题${n}：下一步怎么办？` : `回答${n}：${sentence.repeat(1 + (n % 9) * 3)}`;
      await c.append("c1", { role: n % 2 ? "user" : "assistant", content: text });
      if ((await c.onMessage("c1")).status === "compacted") compacted++;
      const ctx = await c.context("c1", { format: "openai" });
      most = Math.max(most, provider(ctx.messages));
      leftOut += ctx.manifest.uncoveredOmitted ?? 0;
      assert.equal(ctx.messages.at(-1).content, text, `message ${n}: the newest turn, verbatim`);
      // A prompt not yet in the journal, counted as well.
      const prompt = [{ type: "text", text: sentence.repeat(8) }];
      promptMost = Math.max(promptMost, provider((await c.context("c1", { format: "openai", prompt })).messages));
    }
    return { most, compacted, promptMost, leftOut };
  };
  // Lazy compaction fills the context to its limit before it folds.
  for (const mode of ["eager", "lazy"]) {
    const counted = await run(cjk, mode);
    assert.ok(counted.compacted >= 5, `${mode}: ${counted.compacted} compactions`);
    assert.ok(counted.most <= limit + 3, `${mode}: ${counted.most} tokens sent as the provider counts them`);
    assert.ok(counted.promptMost <= limit + 3, `${mode}: ${counted.promptMost} tokens sent with a prompt`);
    const estimated = await run(undefined, mode);
    assert.ok(estimated.most > limit + 3, `${mode}: the estimate alone sent ${estimated.most}: the check is live`);
    console.log(`# ${mode}: counted, at most ${counted.most} tokens sent (${counted.promptMost} with a prompt; ${counted.compacted} compactions; ${counted.leftOut} turns left out); estimated: ${estimated.most}`);
  }
  // Pinned turns admitted near their room leave a summary counted at its
  // full output no room beside them: the context goes as the estimate
  // fits it, never an error.
  const c = f.createCompactor({
    journal: new f.MemoryJournal(), model: chinese, countTokens: cjk, messageOverheadTokens: 3,
    declaration: { targetId: "agent", compactorId: "agent-compactor", budget: { kind: "tokens", window: 8192 } },
  });
  await c.append("c1", { role: "system", content: "规".repeat(2950) });
  let summarized = false;
  for (let n = 1; n <= 80; n++) {
    const text = n % 2 ? `问题${n}：下一步怎么办？` : `回答${n}：${sentence}`;
    await c.append("c1", { role: n % 2 ? "user" : "assistant", content: text });
    await c.onMessage("c1");
    const ctx = await c.context("c1", { format: "openai" });
    summarized ||= ctx.manifest.boundaryId != null;
    assert.equal(ctx.messages.at(-1).content, text, `message ${n}: the newest turn, verbatim`);
  }
  assert.ok(summarized, "a summary beside the long system prompt");
});

// A conversation admitted before the members' compression surface existed
// may leave its fragments no room: a 78,540-character system prompt and a
// member's 1,008-character question fit seed 000's 80,000 characters, not
// beside plain-speak's fragment. The member's context goes without their
// state (no `manifest.member`), as every context went before; it failed
// `tail_turn_too_large` each time the member wrote. The Rust driver's twin:
// host.rs `a_members_context_without_room_for_their_fragments_goes_without_them`.
test("a member's context without room for their fragments goes without them", async () => {
  const journal = new f.MemoryJournal();
  const declaration = { targetId: "agent", compactorId: "agent-compactor", budget: { kind: "chars" } };
  const before = f.createCompactor({ journal, model: fakeModel(), declaration });
  await before.append("c1", [
    { role: "system", content: "Rule. ".repeat(13090) },
    { role: "user", content: "turn 1 ok" },
    { role: "assistant", content: "turn 2 ok" },
    { role: "user", content: "Please look at this. ".repeat(48) },
  ]);
  const availability = { surface: true, plainSpeak: true };
  const after = f.createCompactor({ journal, model: fakeModel(), declaration, compression: availability });
  const member = { availability, preferences: { master: true, plainSpeak: true } };
  const ctx = await after.context("c1", { member });
  assert.equal(ctx.manifest.member, undefined, "sent without the member's state");
  assert.equal(ctx.manifest.included.length, 3, "every turn");
  // A shorter question leaves the fragment room: the member's state applies.
  await after.append("c1", { role: "user", content: "and this?" });
  assert.equal((await after.context("c1", { member })).manifest.member.state.plainSpeak.enabled, true);
});

// Item 6 of the formats issue: real token counts include each message's
// framing. 700 short pairs in lazy mode (no retrieval share), then long
// answers, counted by js-tiktoken (cl100k) and gpt-tokenizer (o200k); after
// every message the context sent is counted as OpenAI counts a chat request
// (3 tokens of framing per message and 3 to prime the reply) and must leave
// the reserved output free in the 8,192-token window. Without the framing
// the short chat reached 8,422 tokens while the manifest said 4,210.
test("real tokenizers: the context as the provider counts it fits the window, also a room's with its labels", async () => {
  const { getEncoding } = await import("js-tiktoken");
  const { encode } = await import("gpt-tokenizer");
  const cl100k = getEncoding("cl100k_base");
  const tokenizers = { "js-tiktoken cl100k": (t) => cl100k.encode(t).length, "gpt-tokenizer o200k": (t) => encode(t).length };
  // A room of two members whose ids tokenize badly: each member's turn is
  // sent as `[u_83f2a9c1] …`, a label the host's count never saw.
  const rooms = [undefined, ["alice", "u_83f2a9c1"]];
  for (const [name, count] of Object.entries(tokenizers)) for (const room of rooms) {
    const c = f.createCompactor({
      journal: new f.MemoryJournal(), model: fakeModel(), countTokens: count,
      declaration: { targetId: "agent", compactorId: "agent-compactor", budget: { kind: "tokens", window: 8192, mode: "lazy", retrievalShare: 0 } },
    });
    const provider = (messages) => messages.reduce((a, m) => a + 3 + count(m.content ?? ""), 3);
    let compacted = 0;
    let most = 0;
    for (let n = 1; n <= 1500; n++) {
      const long = n > 1400 && n % 2 === 0;
      const text = n % 2 ? `Q${n}: next?` : long ? `Answer ${n}: ${"The plan keeps the budget and the dates as agreed. ".repeat(120)}` : `A${n}: ok.`;
      const sender = room && n % 2 ? { sender: room[(n >> 1) % 2] } : {};
      await c.append("c1", { role: n % 2 ? "user" : "assistant", content: text }, sender);
      if ((await c.onMessage("c1")).status === "compacted") compacted++;
      if (n % 10 === 0 || long) {
        const ctx = await c.context("c1", { format: "openai" });
        const real = provider(ctx.messages);
        most = Math.max(most, real);
        assert.ok(real <= 8192 - 1024, `${name}${room ? " in a room" : ""}, message ${n}: ${real} tokens as the provider counts them (manifest ${ctx.manifest.total} of ${ctx.manifest.limit})`);
        if (room) assert.ok(ctx.messages.some((m) => m.content?.startsWith("[u_83f2a9c1] ")), `message ${n}: the room's labels are sent`);
      }
    }
    assert.ok(compacted >= 1, `${name}: the chat never compacted`);
    console.log(`# ${name}${room ? " in a room" : ""}: at most ${most} tokens sent as the provider counts them, ${compacted} compactions`);
  }
});


// Random conversations of every part kind survive append → context in the
// same format, unchanged in meaning (seeded, so a failure reproduces): AI
// SDK messages (text, tool calls with object or JSON-text input, every
// tool-result output kind, approvals and their answers) and OpenAI
// messages (text, function and custom tool calls, tool results).
test("a room member's prompt, not yet appended, names its sender as their stored turns would", async () => {
  const c = f.createCompactor({ journal: new f.MemoryJournal(), model: f.modelFromFunction(async () => "Summary."), declaration: { targetId: "a", compactorId: "b" } });
  await c.append("room", { role: "user", content: "I vote for Lisbon." }, { sender: "alice" });
  await c.append("room", { role: "assistant", content: "Noted." });
  const prompt = [{ type: "text", text: "I vote for Porto." }];
  const sent = async (o) => (await c.context("room", { format: "openai", ...o })).messages.map((m) => m.content);
  // Bob is a new voice: his prompt and alice's turn are named.
  assert.deepEqual(await sent({ prompt, promptSender: "bob" }), ["[alice] I vote for Lisbon.", "Noted.", "[bob] I vote for Porto."]);
  const bob = await c.context("room", { prompt, promptSender: "bob", render: false });
  assert.equal(bob.manifest.sizes.prompt, 17 + "[bob] ".length);
  // Alice's own prompt, or one without a sender, is one voice: nothing named, nothing held over.
  assert.deepEqual(await sent({ prompt, promptSender: "alice" }), ["I vote for Lisbon.", "Noted.", "I vote for Porto."]);
  assert.deepEqual(await sent({ prompt }), ["I vote for Lisbon.", "Noted.", "I vote for Porto."]);
});

test("property: random messages come back from context in the format they went in, unchanged in meaning", async () => {
  const seeded = (seed) => () => ((seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648);
  const words = ["plan", "Lisbon", "ünïcode", "😀", "budget", "\"quoted\"", "line\nbreak", "tab\there", "42", "<tag>"];
  const sort = (v) => (Array.isArray(v) ? v.map(sort) : v && typeof v === "object" ? Object.fromEntries(Object.keys(v).sort().map((k) => [k, sort(v[k])])) : v);
  const same = (a, b, msg) => assert.equal(JSON.stringify(sort(a)), JSON.stringify(sort(b)), msg);
  const declaration = { targetId: "agent", compactorId: "agent-compactor", budget: { kind: "chars", trigger: 2_000_000, retain: 1_000_000 } };
  for (let seed = 1; seed <= 40; seed++) {
    const r = seeded(seed);
    const pick = (xs) => xs[Math.floor(r() * xs.length)];
    const text = () => Array.from({ length: 1 + Math.floor(r() * 6) }, () => pick(words)).join(" ");
    const obj = () => ({ city: text(), days: Math.floor(r() * 9), flags: [r() < 0.5, null] });
    // AI SDK: what goes in, and what it means (the rendered form).
    const ai = [];
    const meant = [];
    let n = 0;
    for (let k = 0; k < 12; k++) {
      const kind = pick(["user", "assistant", "tools"]);
      if (kind !== "tools") {
        const t = text();
        ai.push({ role: kind, content: r() < 0.5 ? t : [{ type: "text", text: t }] });
        meant.push({ role: kind, content: [{ type: "text", text: t }] });
        continue;
      }
      const calls = [];
      const results = [];
      const askedParts = [];
      const shown = [];
      const lead = r() < 0.5 ? text() : undefined;
      if (lead) { askedParts.push({ type: "text", text: lead }); shown.push({ type: "text", text: lead }); }
      for (let c = 0; c < 1 + Math.floor(r() * 2); c++) {
        const id = `call-${seed}-${n++}`;
        const input = obj();
        const asText = r() < 0.5;
        askedParts.push({ type: "tool-call", toolCallId: id, toolName: "tool", input: asText ? JSON.stringify(input) : input });
        shown.push({ type: "tool-call", toolCallId: id, toolName: "tool", input });
        if (r() < 0.4) {
          const approvalId = `ap-${id}`;
          const approved = r() < 0.5;
          askedParts.push({ type: "tool-approval-request", approvalId, toolCallId: id });
          shown.push({ type: "tool-approval-request", approvalId, toolCallId: id });
          results.push({ in: { type: "tool-approval-response", approvalId, approved }, out: { type: "tool-approval-response", approvalId, approved } });
        }
        const value = obj();
        const out = pick([
          [{ type: "text", value: text() }, (o) => ({ type: "text", value: o.value })],
          [{ type: "json", value }, () => ({ type: "text", value: JSON.stringify(value) })],
          [{ type: "error-text", value: text() }, (o) => ({ type: "error-text", value: o.value })],
          [{ type: "error-json", value }, () => ({ type: "error-text", value: JSON.stringify(value) })],
        ]);
        results.push({ in: { type: "tool-result", toolCallId: id, toolName: "tool", output: out[0] }, out: { type: "tool-result", toolCallId: id, toolName: "tool", output: out[1](out[0]) } });
      }
      calls.push(...askedParts);
      ai.push({ role: "assistant", content: calls }, { role: "tool", content: results.map((x) => x.in) });
      meant.push({ role: "assistant", content: shown }, { role: "tool", content: results.map((x) => x.out) });
    }
    // A context the assistant opens starts with the member's line (the
    // SDK's Anthropic and Google providers would send the assistant first).
    if (meant[0]?.role === "assistant") meant.unshift({ role: "user", content: [{ type: "text", text: "[the conversation so far]" }] });
    const c = f.createCompactor({ journal: new f.MemoryJournal(), model: fakeModel(), declaration });
    await c.append("c", { format: "ai-sdk", messages: ai });
    same((await c.context("c", { format: "ai-sdk" })).messages, meant, `AI SDK, seed ${seed}`);
    // OpenAI: text, function and custom calls, their results.
    const oa = [];
    for (let k = 0; k < 12; k++) {
      const kind = pick(["user", "assistant", "tools"]);
      if (kind !== "tools") { oa.push({ role: kind, content: text() }); continue; }
      const calls = Array.from({ length: 1 + Math.floor(r() * 2) }, () => {
        const id = `oc-${seed}-${n++}`;
        return r() < 0.5
          ? { id, type: "function", function: { name: "tool", arguments: JSON.stringify(obj()) } }
          : { id, type: "custom", custom: { name: "grep", input: text() } };
      });
      oa.push({ role: "assistant", content: r() < 0.5 ? text() : null, tool_calls: calls });
      for (const call of calls) oa.push({ role: "tool", tool_call_id: call.id, content: text() });
    }
    const o = f.createCompactor({ journal: new f.MemoryJournal(), model: fakeModel(), declaration });
    await o.append("c", oa);
    same((await o.context("c", { format: "openai" })).messages, oa, `OpenAI, seed ${seed}`);
  }
});

test("an upgrade keeps what the model knew: the retired summary is carried into the new epoch, its dividers still draw", async () => {
  const journal = new f.MemoryJournal();
  const before = f.createCompactor({ journal, model: fakeModel(), declaration });
  await chat(before, journal, 1, 60);
  const old = await before.resolve("c1");
  assert.ok(old.head && old.accepted.length >= 2, "compacted under the first declaration");
  // A new declaration (another summary bound): another epoch.
  const after = f.createCompactor({ journal, model: fakeModel(), declaration: { ...declaration, summary: { maxChars: 280 } } });
  await journal.append("c1", say(61, "user", "message 61 ".padEnd(300, "x")));
  await after.onMessage("c1");
  const res = await after.resolve("c1");
  assert.equal(res.frontier.carried.boundaryId, old.head.boundaryId, "the frontier binds the retired head");
  assert.equal(res.frontier.startSeq, old.head.coveredThroughSeq + 1);
  const ctx = await after.context("c1");
  assert.equal(ctx.manifest.boundaryId, old.head.boundaryId, "the carried summary is in the context");
  assert.ok(ctx.messages[0].kind === "summary" && ctx.messages[0].parts[0].text.includes(old.head.summary));
  assert.equal(ctx.manifest.beforeFrontier.reason, "carried");
  const t = await after.timeline("c1");
  const retired = t.items.filter((i) => i.type === "divider" && i.retired);
  assert.equal(retired.length, old.accepted.length, "the retired dividers still draw");
  // The new epoch's first compaction takes it in.
  await chat(after, journal, 62, 90);
  const next = await after.resolve("c1");
  assert.ok(next.head && !next.carried, "the new chain took the carried summary in");
});

test("a long chain read cold resolves in steps as it does at once", async () => {
  const journal = new f.MemoryJournal();
  const warm = f.createCompactor({ journal, model: fakeModel(), declaration });
  const fix = (turnId, correctionSeq) => ({ type: "correction", turnId, correctionSeq, parts: [{ type: "text", text: `corrected (${correctionSeq}): 1,200 euros` }] });
  let s = 1;
  for (let corrected = false; (await warm.resolve("c1")).accepted.length < 150; s += 30) {
    await chat(warm, journal, s, s + 29);
    // A correction a later boundary absorbs, of a turn the first step covers.
    if (!corrected && (await warm.resolve("c1")).accepted.length >= 100) {
      await journal.append("c1", fix("t20", 1));
      corrected = true;
    }
  }
  await journal.append("c1", fix("t40", 2)); // and one no boundary absorbed: the amendment
  const events = (await journal.readEvents("c1", 0)).map((e) => e.event);
  const atOnce = f.validate({
    kind: "resolve", declaration, compactor: { ...declaration, role: "compactor" }, route: { conversation: "c1", chat: "", sender: "" },
    events, packets: await journal.listPackets("c1"),
  });
  assert.ok(atOnce.accepted.length >= 150 && atOnce.amendment, "a chain of three steps, amended");
  const cold = f.createCompactor({ journal, model: fakeModel(), declaration });
  assert.deepEqual(await cold.resolve("c1"), atOnce);
  assert.deepEqual(await cold.context("c1"), await warm.context("c1"));
  assert.deepEqual(await cold.timeline("c1"), await warm.timeline("c1"));
  // A chain that fails in its last step fails every time: the steps before
  // it never stand in for the whole chain.
  const lost = events.find((e) => e.type === "boundary" && e.id === atOnce.head.boundaryId).packetId;
  const missing = Object.create(journal);
  missing.getPacket = (id, packetId) => (packetId === lost ? Promise.resolve(undefined) : journal.getPacket(id, packetId));
  const broken = f.createCompactor({ journal: missing, model: fakeModel(), declaration });
  await assert.rejects(broken.resolve("c1"), { code: "fabricated_run" });
  await assert.rejects(broken.context("c1"), { code: "fabricated_run" });
  // Under another declaration the whole chain is retired: a compactor steps
  // through it, activates the new epoch and compacts in it; a cold one
  // answers as the one-shot resolve does, every retired id listed.
  const upgraded = { ...declaration, summary: { maxChars: 280 } };
  const up = f.createCompactor({ journal, model: fakeModel(), declaration: upgraded });
  for (let compacted = 0; compacted < 2; s += 1) {
    await journal.append("c1", say(s, s % 2 ? "user" : "assistant", `message ${s} `.padEnd(300, "x")));
    if ((await up.onMessage("c1")).status === "compacted") compacted++;
  }
  const upOnce = f.validate({
    kind: "resolve", declaration: upgraded, compactor: { ...upgraded, role: "compactor" }, route: { conversation: "c1", chat: "", sender: "" },
    events: (await journal.readEvents("c1", 0)).map((e) => e.event), packets: await journal.listPackets("c1"),
  });
  assert.ok(upOnce.retiredBoundaries.length >= 150 && upOnce.head, "a retired chain of three steps, a new head");
  const coldUp = f.createCompactor({ journal, model: fakeModel(), declaration: upgraded });
  assert.deepEqual(await coldUp.resolve("c1"), upOnce);
  assert.deepEqual(await up.resolve("c1"), upOnce);
  assert.deepEqual(await coldUp.timeline("c1"), await up.timeline("c1"));
});

test("after an upgrade a compaction reads no retired packet, and answers as a compactor reading afresh", async () => {
  const journal = new f.MemoryJournal();
  const before = f.createCompactor({ journal, model: fakeModel(), declaration });
  await chat(before, journal, 1, 120);
  const retired = [...(await before.resolve("c1")).accepted].sort();
  assert.ok(retired.length >= 4, "compacted under the first declaration");
  let reads = 0;
  const counted = Object.create(journal);
  counted.getPacket = (id, packetId) => { reads++; return journal.getPacket(id, packetId); };
  const upgraded = { ...declaration, summary: { maxChars: 280 } };
  const after = f.createCompactor({ journal: counted, model: fakeModel(), declaration: upgraded });
  assert.deepEqual((await after.resolve("c1")).retiredBoundaries, retired);
  assert.equal(reads, retired.length, "the first resolve under the new declaration reads each once");
  let compactions = 0;
  for (let s = 121; s <= 240; s++) {
    await journal.append("c1", say(s, s % 2 ? "user" : "assistant", `message ${s} `.padEnd(300, "x")));
    const at = reads;
    if ((await after.onMessage("c1")).status === "compacted") compactions++;
    assert.ok(reads - at <= 1, `${reads - at} packets read for one message`);
  }
  assert.ok(compactions >= 3, `${compactions} compactions`);
  assert.equal(reads, retired.length + compactions, "only each new boundary's own packet");
  const cold = f.createCompactor({ journal, model: fakeModel(), declaration: upgraded });
  assert.deepEqual(await after.resolve("c1"), await cold.resolve("c1"));
  assert.deepEqual(await after.timeline("c1"), await cold.timeline("c1"));
  assert.deepEqual(await after.context("c1"), await cold.context("c1"));
});

test("skipped runs advance a progress watermark, never the journal", async () => {
  const journal = new f.MemoryJournal();
  const c = f.createCompactor({ journal, model: fakeModel(), declaration });
  for (let s = 1; s <= 8; s++) {
    await journal.append("c1", say(s, s % 2 ? "user" : "assistant", `short ${s}`));
    const r = await c.onMessage("c1");
    assert.equal(r.status, "skipped");
    const p = await journal.progress("c1");
    assert.equal(p.skippedRuns, s);
    assert.equal(p.last.checkedThroughSeq, s);
    assert.ok(p.last.total < p.last.trigger);
  }
  // The journal holds the messages and the one activation frontier: checks
  // below the trigger add nothing to it.
  const types = (await journal.readEvents("c1")).map((e) => e.event.type);
  assert.deepEqual(types.filter((t) => t !== "message"), ["frontier"]);
  assert.equal(types.length, 9);
});

// The shared cases of OpenAI messages coming in (tests/import/openai.json),
// which the Rust host's importer runs too: the same parts, the same
// placeholders for files, the same refusals word for word.
test("OpenAI messages import as the shared cases say, as in the Rust host", async () => {
  const doc = JSON.parse(await readFile(new URL("../../tests/import/openai.json", import.meta.url), "utf8"));
  assert.ok(doc.cases.length >= 33);
  for (const c of doc.cases) {
    let events;
    try {
      events = f.fromOpenAiMessages(c.messages, { conversation: "c" });
    } catch (e) {
      assert.ok(c.refused, `${c.name}: refused: ${e.message}`);
      assert.equal(e.code, "invalid_request", c.name);
      assert.equal(e.message.replace(/^invalid_request: /, ""), c.refused, c.name);
      continue;
    }
    assert.equal(c.refused, undefined, `${c.name}: accepted`);
    // The journal's canonical form: `isError` and `custom` only when true.
    const canonical = (p) => Object.fromEntries(Object.entries(p).filter(([k, v]) => !((k === "isError" || k === "custom") && v === false)));
    const drafts = events.map((e) => ({ role: e.role, ...(e.authorAgent ? { authorAgent: e.authorAgent } : {}), ...(e.sender ? { sender: e.sender } : {}), parts: e.parts.map(canonical) }));
    assert.deepEqual(drafts, c.drafts, c.name);
  }
});

// What a message claims for its turn id is the Rust journals' text, case
// for case (tests/journal/turn-claims.json, which host-wasmtime's tests run
// too); and a journal holds it: a redelivery is taken, other content refused.
test("turn claims are the shared cases, as in the Rust journals", async () => {
  const doc = JSON.parse(await readFile(new URL("../../tests/journal/turn-claims.json", import.meta.url), "utf8"));
  assert.ok(doc.cases.length >= 7);
  for (const c of doc.cases) {
    assert.deepEqual(await f.checkAppend("c", [c.event]), [c.event], `${c.name}: stored as checked`);
    assert.deepEqual(f.turnClaims([c.event]), [[c.turnId, c.claim]], c.name);
  }
  const [first, , , , , , other] = doc.cases.map((c) => c.event);
  const journal = new f.MemoryJournal();
  await journal.append("c", [first]);
  await journal.append("c", [first]);
  await assert.rejects(journal.append("c", [other]), (e) => e.code === "conflicting_turn" && e.ids[0] === first.turnId);
  assert.equal((await journal.readEvents("c")).length, 2);
});

// Files, images and documents have no place in a journal of text: each
// format leaves the same `[file <media type> <name>]` placeholder
// (docs/formats.md), and the context sent back carries it in the place the
// file was, so the model knows one was there.
test("files and images leave a [file …] placeholder in every format", async () => {
  const anthropic = f.fromAnthropicMessages([
    { role: "user", content: [
      { type: "text", text: "Compare these." },
      { type: "image", source: { type: "base64", media_type: "image/png", data: "AAAA" } },
      { type: "document", source: { type: "base64", media_type: "application/pdf", data: "AAAA" }, title: "q3.pdf" },
    ] },
    { role: "assistant", content: [{ type: "tool_use", id: "t1", name: "chart", input: {} }] },
    { role: "user", content: [{ type: "tool_result", tool_use_id: "t1", content: [{ type: "text", text: "drawn:" }, { type: "image", source: { type: "url", url: "https://x/y.png" } }] }] },
  ], { conversation: "c" });
  assert.deepEqual(anthropic[0].parts, [
    { type: "text", text: "Compare these." },
    { type: "text", text: "[file image/png]" },
    { type: "text", text: "[file application/pdf q3.pdf]" },
  ]);
  assert.equal(anthropic[2].parts[0].content, "drawn:\n[file image]");
  const aiSdk = f.fromAiSdkMessages([
    { role: "user", content: [
      { type: "text", text: "What is in it?" },
      { type: "image", image: new URL("https://x/cat.jpg"), mediaType: "image/jpeg" },
      { type: "file", data: "AAAA", mediaType: "text/csv", filename: "sales.csv" },
    ] },
  ], { conversation: "c" });
  assert.deepEqual(aiSdk[0].parts.map((p) => p.text), ["What is in it?", "[file image/jpeg]", "[file text/csv sales.csv]"]);
  // The placeholder reaches the model in each output format.
  for (const format of ["openai", "anthropic", "aiSdk"]) {
    const sel = f.select({ declaration, route: { conversation: "c", chat: "", sender: "" }, events: aiSdk, format });
    assert.ok(JSON.stringify(sel.messages).includes("[file text/csv sales.csv]"), format);
  }
});

// The package writes a request into the core's memory itself, in one native
// pass (load.ts `put`), not through the glue's character loop: the same bytes
// must arrive. Answers compared with the glue's own `call`, byte for byte, over
// text that exercises each case: empty, ASCII, non-ASCII first or after ASCII, every UTF-8
// width (2, 3 and 4 bytes, the 3-byte case filling the room it reserves), and
// a request of several megabytes.
test("a request crosses into the core exactly as the glue would write it", async () => {
  // Node's entry carries its own copy of the glue (bundled in): the glue
  // module imported here is another instance, initialized with the same .wasm.
  const glue = await import("../pkg/foldline.js");
  await glue.default({ module_or_path: await readFile(new URL("../pkg/foldline_bg.wasm", import.meta.url)) });
  const texts = ["é", "a", "żółw 🐢 中文", "plain then ünïcode", `${"x".repeat(1000)}🐢`, "中".repeat(5000), "🐢".repeat(3000), "x".repeat(4_000_000)];
  const requests = ["", "{", "[]", ...texts.map((t) => JSON.stringify({ text: t, budget: 2 })),
    ...texts.map((t) => JSON.stringify({ route: { conversation: t }, events: [], declaration: { targetId: "a", compactorId: "a-c" } }))];
  for (const [entry, request] of [["plan", 5], ["plan", null], [5, "{}"], ["plan", {}]]) {
    assert.throws(() => f.callJson(entry, request), (e) => e.code === "invalid_request", JSON.stringify([entry, request]));
  }
  for (const entry of ["trimPrompt", "plan", "nope", ""]) {
    for (const r of requests) {
      assert.equal(f.callJson(entry, r), glue.call(entry, r), `${entry} ${r.slice(0, 40)}`);
    }
  }
});

// A page is drawn from the events it can reach (driver/text.ts), not the
// whole conversation: through compactions, a pinned system prompt, late
// deliveries and corrections, every page (0 to 12 items, from the end and
// from several `before`s) is the page the core draws from every event,
// `earlier` included.
test("a timeline page drawn from what it can reach is the whole conversation's page", async () => {
  const journal = new f.MemoryJournal();
  const c = f.createCompactor({ journal, model: fakeModel(), declaration });
  await journal.append("c1", { ...say(0, "system", "Answer in euros."), turnId: "system" });
  await chat(c, journal, 1, 120);
  for (const at of [7, 117]) await journal.append("c1", { ...say(at, "user", "delivered late"), type: "lateDelivery", index: 9, turnId: `late-${at}` });
  await chat(c, journal, 121, 160);
  const fix = (turnId) => ({ type: "correction", turnId, correctionSeq: 1, parts: [{ type: "text", text: "corrected" }] });
  await journal.append("c1", [fix("t3"), fix("t157")]);
  const all = (await journal.readEvents("c1", 0)).map((e) => e.event);
  const r = await c.resolve("c1");
  assert.ok(r.accepted.length >= 3, "compacted");
  // And a compactor whose text bound is far below the conversation's: it
  // keeps its latest messages, and reads the others again when a page
  // reaches them.
  const reads = [];
  const counted = Object.create(journal);
  counted.readEvents = async (id, after = 0) => { reads.push(after); return journal.readEvents(id, after); };
  const limits = [];
  counted.readEventsPage = async (id, after, limit) => { reads.push(after); limits.push(limit); return journal.readEventsPage(id, after, limit); };
  const chars = all.reduce((n, e) => n + JSON.stringify(e).length + 1, 0);
  const small = f.createCompactor({ journal: counted, model: fakeModel(), declaration, timelineTextChars: chars - 1 });
  for (const d of [c, small]) {
    for (const before of [undefined, 8, 60, 118, 158]) {
      for (let limit = 0; limit <= 12; limit++) {
        const whole = f.timeline(all, r.accepted, r.retiredBoundaries, { limit, before });
        assert.deepEqual(await d.timeline("c1", { limit, before }), whole, `limit ${limit} before ${before}`);
      }
    }
  }
  // The latest pages read nothing again; one that reaches far back does.
  reads.length = 0;
  await small.timeline("c1", { limit: 5 });
  assert.deepEqual(reads.filter((after) => after > 0 && after < all.length), []);
  await small.timeline("c1", { limit: 5, before: 8 });
  assert.ok(reads.some((after) => after > 0 && after < 20), JSON.stringify(reads));
  // Only as far as the last message it reaches (a late delivery belongs
  // at 7: the read spans to it): a page, not the rest of the conversation.
  limits.length = 0;
  await small.timeline("c1", { limit: 5, before: 60 });
  assert.ok(limits.length === 1 && limits[0] <= 12, JSON.stringify(limits));
});

// A whole timeline is drawn in pages from the latest back (at most
// `timelinePageItems` items a core call), and is the timeline the core
// draws from every event, with and without `before`; so is a page larger
// than one call's (`limit` over `timelinePageItems`), its `earlier` included.
test("a whole timeline is drawn in pages and is the whole timeline", async () => {
  const journal = new f.MemoryJournal();
  await chat(f.createCompactor({ journal, model: fakeModel(), declaration }), journal, 1, 160);
  const all = (await journal.readEvents("c1", 0)).map((e) => e.event);
  // A text bound below the conversation's too: the messages let go are
  // read again once for a whole timeline.
  const chars = all.reduce((n, e) => n + JSON.stringify(e).length + 1, 0);
  for (const [timelinePageItems, timelineTextChars] of [[1, undefined], [7, chars - 1], [5000, undefined], [5000, chars - 1]]) {
    const c = f.createCompactor({ journal, model: fakeModel(), declaration, timelinePageItems, timelineTextChars });
    const r = await c.resolve("c1");
    assert.ok(r.accepted.length >= 3, "compacted");
    for (const limit of [undefined, 30]) {
      for (const before of [undefined, 60, 1]) {
        const page = { ...(limit === undefined ? {} : { limit }), ...(before === undefined ? {} : { before }) };
        const drawn = await c.timeline("c1", page);
        assert.deepEqual(drawn, f.timeline(all, r.accepted, r.retiredBoundaries, page), `pages of ${timelinePageItems} limit ${limit} before ${before}`);
        assert.ok(before === 1 || drawn.items.length >= 30);
      }
    }
  }
});

// A timeline drawn after a write reads only what was written since the last
// drawing (the compactor keeps the conversation's text between drawings),
// draws what a compactor reading the journal afresh draws, and draws only as
// far as its resolution read: a message another writer appends between the
// two reads waits for the next drawing.
test("a timeline after a write reads only what is new, as far as its resolution read", async () => {
  const journal = new f.MemoryJournal();
  let whole = 0;
  let meanwhile; // [after, reads to let pass, event]
  const counted = Object.create(journal);
  counted.readEvents = async (id, after = 0) => {
    if (!after) whole++;
    if (meanwhile && after === meanwhile[0] && meanwhile[1]-- === 0) {
      await journal.append(id, meanwhile[2]);
      meanwhile = undefined;
    }
    return journal.readEvents(id, after);
  };
  const c = f.createCompactor({ journal: counted, model: fakeModel(), declaration });
  const page = { limit: 7 };
  for (let s = 1; s <= 240; s += 40) {
    await chat(c, journal, s, s + 39);
    const reads = whole;
    const drawn = await c.timeline("c1", page);
    if (s > 1) assert.equal(whole, reads, `after message ${s + 39}: no whole read`);
    const fresh = f.createCompactor({ journal, model: fakeModel(), declaration });
    assert.deepEqual(drawn, await fresh.timeline("c1", page));
  }
  assert.ok((await c.resolve("c1")).accepted.length > 0, "the conversation compacted on the way");
  // Another writer's message lands between the resolution's read and the
  // timeline's (the second read after the position the resolution read from).
  const at = (await journal.readEvents("c1", 0)).at(-1).seq;
  await journal.append("c1", say(241, "user", "message 241 of this writer"));
  meanwhile = [at, 1, say(242, "user", "message 242 of another writer")];
  const during = JSON.stringify(await c.timeline("c1"));
  assert.ok(during.includes("message 241") && !during.includes("message 242"), "drawn as far as the resolution read");
  assert.equal(meanwhile, undefined, "the other writer's message landed");
  const after = await c.timeline("c1");
  assert.ok(JSON.stringify(after).includes("message 242"), "the next drawing has it");
  assert.deepEqual(after, await f.createCompactor({ journal, model: fakeModel(), declaration }).timeline("c1"));
  // Kept text off: every drawing reads the conversation whole.
  const off = f.createCompactor({ journal: counted, model: fakeModel(), declaration, timelineTextChars: 0 });
  await off.timeline("c1");
  const reads = whole;
  await off.timeline("c1");
  assert.equal(whole, reads + 1);
});

// A compactor or a handler built with a missing or mistyped option is
// refused when it is built, by code and naming the option — not a TypeError
// from inside its first message.
test("a compactor or a handler built with a bad option is refused naming it", async () => {
  const journal = new f.MemoryJournal();
  const model = f.modelFromFunction(async () => "Summary.");
  const declaration = { targetId: "assistant", compactorId: "assistant-compactor" };
  const member = { id: "alice", tokenSha256: "a".repeat(64) };
  const refused = (build, named) => assert.throws(build, (e) => e instanceof f.FoldlineError && e.code === "invalid_request" && e.message.includes(named), named);
  refused(() => f.createCompactor(), "options are needed");
  refused(() => f.createCompactor({ model, declaration }), "journal must be a Journal");
  refused(() => f.createCompactor({ journal: { readEvents() {} }, model, declaration }), "it has no append()");
  refused(() => f.createCompactor({ journal, declaration }), "model must be a Model");
  refused(() => f.createCompactor({ journal, model: async () => "x", declaration }), "it has no stream()");
  refused(() => f.createCompactor({ journal, model }), "declaration must be an object");
  refused(() => f.createCompactor({ journal, model, declaration, leaseMs: "60s" }), "leaseMs must be a whole number");
  refused(() => f.createCompactor({ journal, model, declaration, timelineTextChars: -1 }), "timelineTextChars");
  refused(() => f.createCompactor({ journal, model, declaration, countTokens: 4 }), "countTokens must be a function");
  refused(() => f.createHandler({ journal, model, declaration }), "members must be an array");
  refused(() => f.createHandler({ journal, model, declaration, members: [] }), "no members");
  refused(() => f.createHandler({ journal, model, declaration, members: [member, member] }), "repeated");
  refused(() => f.createHandler({ journal, model, declaration, members: [{ id: "bob", tokenSha256: "xyz" }] }), "tokenSha256 must be 64");
  refused(() => f.createHandler({ journal, model, declaration, members: [member], pollMs: 0.5 }), "pollMs");
  // The same options, well formed, build.
  f.createCompactor({ journal, model, declaration, leaseMs: 60_000, countTokens: (t) => t.length });
  f.createHandler({ journal, model, declaration, members: [member] });
  // A counter's answer that is not a whole number of tokens is refused
  // naming the counter, nothing written: NaN was stored as no count (the
  // estimate, silently), a negative or fractional count was refused as
  // `events[0].tokens`, and a string was joined to the framing ("47").
  for (const bad of [NaN, -5, 1.5, 2 ** 60, "7", null, Promise.resolve(3)]) {
    const tokens = { kind: "tokens", window: 8192 };
    const c = f.createCompactor({ journal, model, declaration: { ...declaration, budget: tokens }, countTokens: () => bad });
    await assert.rejects(c.append("bad", { role: "user", content: "hello" }), (e) => e.code === "invalid_request" && e.message.includes("countTokens must return a whole number"), String(bad));
  }
  assert.deepEqual(await journal.readEvents("bad", 0), []);
});

// A compactor keeps at most `conversationsKept` conversations: past it the
// least recently used that no call is using is let go and read again at its
// next call. Six conversations written in turns (some calls overlapping)
// through a compactor that keeps two compact, select and resolve exactly as
// through one that keeps them all.
test("a compactor keeps a bounded number of conversations and answers the same", async () => {
  const build = (kept) => f.createCompactor({ journal: new f.MemoryJournal(), model: fakeModel(), declaration, conversationsKept: kept });
  const [bounded, all] = [build(2), build(1_000)];
  const ids = ["c0", "c1", "c2", "c3", "c4", "c5"];
  let compactions = 0;
  for (let turn = 0; turn < 40; turn++) {
    // Two conversations' calls at once: one in use is never let go.
    for (let i = 0; i < ids.length; i += 2) {
      const pair = ids.slice(i, i + 2);
      const msg = (id) => ({ role: turn % 2 ? "assistant" : "user", content: `${id} turn ${turn}: ${"the plan in detail ".repeat(12)}` });
      const answers = await Promise.all(pair.flatMap((id) => [bounded, all].map(async (c) => {
        await c.append(id, msg(id));
        return c.onMessage(id);
      })));
      for (let k = 0; k < pair.length; k++) {
        const [a, b] = [answers[2 * k], answers[2 * k + 1]];
        assert.deepEqual(a, b, `${pair[k]} at turn ${turn}`);
        if (a.status === "compacted") compactions++;
      }
      assert.ok(bounded.remembered() <= 2, `${bounded.remembered()} kept`);
    }
  }
  assert.ok(compactions >= 6, `every conversation compacted: ${compactions}`);
  for (const id of ids) {
    assert.deepEqual(await bounded.context(id), await all.context(id));
    assert.deepEqual(await bounded.resolve(id), await all.resolve(id));
    assert.deepEqual(await bounded.timeline(id), await all.timeline(id));
  }
  assert.equal(all.remembered(), 6);
});
