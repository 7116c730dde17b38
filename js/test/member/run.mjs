// Member compression as a member meets it, on both servers: `foldline serve`
// (the Rust host, over real HTTP) and the package's fetch handler (the JS
// host, called directly), with the same journey and availability on. Asserted
// on each: opting in mid-conversation takes effect from the next run only;
// hedged prompts are trimmed in the model-bound copy (code, quotes and
// negated clauses intact); `run_code` output is compressed and search output
// byte-identical; the plain-speak fragment is there only while opted in; a
// settings question gets the server-rendered answer; each pass is recorded
// once; after opting out everything goes verbatim; the journal's messages
// are unchanged; a conversation the fragments take over the trigger compacts.
// Then: both hosts sent byte-identical contexts.
//
// node test/member/run.mjs [path/to/foldline]

import { spawn } from "node:child_process";
import { createHash } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import assert from "node:assert/strict";

const js = new URL("../..", import.meta.url).pathname;
const bin = process.argv[2] ?? join(js, "..", "target", "debug", "foldline");
const f = await import(join(js, "dist", "node.js"));
await f.init?.();

const dir = mkdtempSync(join(tmpdir(), "foldline-member-"));
const sha = (t) => createHash("sha256").update(t).digest("hex");
const TOKEN = "alice-token";
const members = [{ id: "alice", tokenSha256: sha(TOKEN) }];
writeFileSync(join(dir, "members.json"), JSON.stringify({ members }));
const declaration = { targetId: "assistant", compactorId: "assistant-compactor", budget: { kind: "chars", trigger: 200000, retain: 100000 } };
writeFileSync(join(dir, "decl.json"), JSON.stringify(declaration));
const availability = { surface: true, toolResult: true, plainSpeak: true, promptTrim: true };

const HEDGED = "I was just wondering if maybe you could possibly run `cargo test --release` and tell me what fails. Thanks so much!";
const NEGATED = "Could you please explain why it doesn't \"just\" work on https://example.org/ci?";
const SEARCH = "result: https://docs.example.org/a \"exact quote\"\n".repeat(30);
let LOG = "";
for (let i = 0; i < 200; i++) LOG += `\x1b[32mDownloading\x1b[0m crates ...\n`;
LOG += "warning: unused import\n".repeat(80) + "test result: FAILED. 1 failed\n";

/** The Rust server over real HTTP. */
async function rustHost() {
  const child = spawn(bin, ["--journal", join(dir, "member.db"), "--declaration", join(dir, "decl.json"),
    "serve", "--listen", "127.0.0.1:0", "--members", join(dir, "members.json")],
  { stdio: ["ignore", "ignore", "pipe"], env: { ...process.env, MEMBER_COMPRESSION_ENABLED: "true", MEMBER_TOOL_RESULT_COMPRESSION_ENABLED: "true", MEMBER_PLAIN_SPEAK_COMPRESSION_ENABLED: "1", MEMBER_PROMPT_FLUFF_COMPRESSION_ENABLED: "on" } });
  const base = await new Promise((resolve, reject) => {
    let err = "";
    child.stderr.on("data", (d) => {
      err += d;
      const m = /listening on (http:\/\/[\d.:]+)\n/.exec(err);
      if (m) resolve(m[1]);
    });
    child.on("exit", (code) => reject(new Error(`foldline serve exited ${code}: ${err}`)));
  });
  return {
    name: "foldline serve",
    call: (method, path, body) => fetch(base + path, { method, headers: { authorization: `Bearer ${TOKEN}`, "content-type": "application/json" }, body: body === undefined ? undefined : typeof body === "string" ? body : JSON.stringify(body) }),
    stop: () => child.kill("SIGTERM"),
  };
}

/** The package's fetch handler. */
function jsHost() {
  const model = f.modelFromFunction(async (p) => `Summary of ${p.input.turnCount} turns.`);
  const handler = f.createHandler({ journal: new f.MemoryJournal(), model, declaration, members, compression: availability });
  return {
    name: "fetch handler",
    call: (method, path, body) => handler(new Request(`http://local${path}`, { method, headers: { authorization: `Bearer ${TOKEN}`, "content-type": "application/json" }, body: body === undefined ? undefined : typeof body === "string" ? body : JSON.stringify(body) })),
    stop: () => {},
  };
}

const C = "/api/conversations/journey";
async function ok(host, method, path, body, status = [200, 201, 204]) {
  const r = await host.call(method, path, body);
  const text = await r.text();
  assert.ok(status.includes(r.status), `${host.name}: ${method} ${path} answered ${r.status}: ${text}`);
  return text ? JSON.parse(text) : undefined;
}
const context = (host) => ok(host, "GET", `${C}/context?format=openai`);
const texts = (ctx) => ctx.messages.map((m) => (typeof m.content === "string" ? m.content : null));
const PLAIN_SPEAK = f.settingsProjection({ availability, preferences: { master: true, plainSpeak: true } }).plainSpeakPrompt;

/** The journey; each host's contexts, in order. */
async function journey(host) {
  const seen = [];
  const look = async () => { const c = await context(host); seen.push(c); return c; };
  await ok(host, "POST", `${C}/messages`, [{ role: "system", content: "You are a careful build assistant." }, { role: "user", content: HEDGED }]);
  // Available, not opted in: verbatim, with the projection after the system prompt.
  let c = await look();
  assert.equal(texts(c)[2], HEDGED, "availability alone opts no one in");
  assert.match(texts(c)[1], /Prompt trim: off \(compression preference is off\)/);
  assert.deepEqual(c.manifest.member.passes, []);
  // An answer starts; the member opts in during it: this run keeps the state it started with.
  const a = await ok(host, "POST", `${C}/answer`);
  const view = await ok(host, "PUT", "/api/members/me/compression", { master: true, toolResult: true, plainSpeak: true, promptTrim: true });
  assert.equal(view.state.promptTrim.enabled, true);
  c = await look();
  assert.equal(texts(c)[2], HEDGED, "a change applies only to runs started after it");
  await ok(host, "DELETE", `${C}/answer/${a.answer}`);
  // The next run: trimmed, with the plain-speak fragment.
  c = await look();
  assert.equal(texts(c)[1], PLAIN_SPEAK);
  assert.ok(texts(c)[3].includes("`cargo test --release`") && texts(c)[3].length < HEDGED.length, texts(c)[3]);
  assert.equal(c.manifest.member.passes[0].measurement.status, "applied");
  // The agent runs code with long repetitive output, and a search.
  await ok(host, "POST", `${C}/messages`, [
    { role: "assistant", content: null, tool_calls: [{ id: "call_run", type: "function", function: { name: "run_code", arguments: "{\"code\":\"cargo test\"}" } }] },
    { role: "tool", tool_call_id: "call_run", content: LOG },
    { role: "assistant", content: null, tool_calls: [{ id: "call_search", type: "function", function: { name: "search", arguments: "{\"q\":\"flaky\"}" } }] },
    { role: "tool", tool_call_id: "call_search", content: SEARCH },
    { role: "assistant", content: "One test fails; the docs say it is flaky." },
    { role: "user", content: NEGATED },
  ]);
  c = await look();
  const tool = c.messages.filter((m) => m.role === "tool");
  assert.ok(tool[0].content.length < LOG.length / 3 && tool[0].content.includes("test result: FAILED"), "run_code output compressed, the verdict kept");
  assert.equal(tool[1].content, SEARCH, "search output byte for byte");
  const last = texts(c).at(-1);
  assert.ok(last.includes("doesn't \"just\" work on https://example.org/ci"), last);
  // A settings question: the server's answer, from the state in force.
  await ok(host, "POST", `${C}/messages`, [{ role: "assistant", content: "It needs a fixed seed." }, { role: "user", content: "Which compression settings are on?" }]);
  c = await look();
  assert.match(c.answer, /^Here are your current compression settings:/);
  assert.match(c.answer, /Prompt trim: on/);
  // One measurement per pass, however often the context is asked for.
  const before = await ok(host, "GET", "/api/members/me/compression/stats");
  await look();
  assert.deepEqual(await ok(host, "GET", "/api/members/me/compression/stats"), before);
  const sum = (tool, status) => before.passes.filter((p) => p.tool === tool && p.status === status).reduce((n, p) => n + p.passes, 0);
  assert.equal(sum("toolResult", "applied"), 1);
  assert.equal(sum("toolResult", "bypassed"), 1);
  assert.ok(sum("promptTrim", "applied") >= 1);
  assert.match((await ok(host, "GET", `${C}/settings`)).projection, /^\[pipeline settings/);
  // Opting out: verbatim again, no fragment. Every preference is answered,
  // each false unless set, on both hosts alike.
  const out = await ok(host, "PUT", "/api/members/me/compression", {});
  assert.deepEqual(out.preferences, { master: false, toolResult: false, plainSpeak: false, promptTrim: false });
  assert.deepEqual(Object.keys(out.availability).sort(), ["plainSpeak", "promptTrim", "surface", "toolResult"]);
  c = await look();
  assert.ok(!texts(c).includes(PLAIN_SPEAK));
  assert.equal(texts(c)[2], HEDGED);
  assert.equal(c.messages.filter((m) => m.role === "tool")[0].content, LOG);
  // The journal keeps the raw text, byte for byte.
  const tl = await ok(host, "GET", `${C}/timeline`);
  const raw = tl.items.filter((i) => i.type === "message").flatMap((i) => i.parts.filter((p) => p.type === "text" || p.type === "toolResult").map((p) => p.text ?? p.content));
  for (const t of [HEDGED, NEGATED, LOG, SEARCH]) assert.ok(raw.includes(t), "the journal is never touched");
  // A field given twice is the last one given (as in a message body).
  const twice = await host.call("PUT", "/api/members/me/compression", '{"master":true,"master":false}');
  assert.equal(twice.status, 200);
  assert.equal((await twice.json()).preferences.master, false);
  // Bad input: a typed refusal.
  const bad = await host.call("PUT", "/api/members/me/compression", { master: "yes" });
  assert.equal(bad.status, 400);
  assert.equal((await bad.json()).error?.code ?? "invalid_input", "invalid_input");
  await room(host);
  return seen;
}

/**
 * Plans keep room for the fragments members' contexts carry: a conversation
 * 200 characters short of the 200,000 trigger compacts (the projection and
 * plain-speak take up to 567), and the member's context leaves out no turn
 * no summary covers. Told nothing of the availability, the server's check
 * skipped and the context left turns out.
 */
async function room(host) {
  const R = "/api/conversations/room";
  const batch = Array.from({ length: 100 }, (_, i) => ({ role: i % 2 ? "assistant" : "user", content: `turn ${i} `.padEnd(i === 99 ? 1_800 : 2_000, "w") }));
  await ok(host, "POST", `${R}/messages`, batch);
  await ok(host, "PUT", "/api/members/me/compression", { master: true, plainSpeak: true });
  // The check runs after the answer: wait for its divider.
  let divider;
  for (let i = 0; i < 200 && !divider; i++) {
    const tl = await ok(host, "GET", `${R}/timeline`);
    divider = tl.items.find((x) => x.type === "divider" && x.state === "completed");
    if (!divider) await new Promise((r) => setTimeout(r, 50));
  }
  assert.ok(divider, `${host.name}: no compaction of a conversation the fragments take over the trigger`);
  const c = await ok(host, "GET", `${R}/context?format=openai`);
  assert.equal(c.manifest.uncoveredOmitted ?? 0, 0, `${host.name}: ${JSON.stringify(c.manifest.omitted)}`);
  assert.equal(texts(c)[0], PLAIN_SPEAK);
  await ok(host, "PUT", "/api/members/me/compression", {});
}

let failed = 0;
const results = [];
for (const make of [rustHost, jsHost]) {
  const host = await make();
  try {
    results.push(await journey(host));
    console.log(`ok - member compression: the journey on ${host.name}`);
  } catch (e) {
    failed++;
    console.log(`not ok - member compression: the journey on ${host.name}\n  ${String(e?.stack ?? e).split("\n").slice(0, 8).join("\n  ")}`);
  } finally {
    host.stop();
  }
}
if (results.length === 2) {
  // Key order is each server's JSON writer's; values are compared.
  const sorted = (v) => (Array.isArray(v) ? v.map(sorted) : v && typeof v === "object" ? Object.fromEntries(Object.keys(v).sort().map((k) => [k, sorted(v[k])])) : v);
  const same = (c) => JSON.stringify(sorted({ messages: c.messages, hash: c.manifest.renderedHash, sizes: c.manifest.sizes, answer: c.answer ?? null, passes: c.manifest.member?.passes.map(({ turnId, ...p }) => p) }));
  try {
    const [a, b] = [results[0].map(same), results[1].map(same)];
    for (let i = 0; i < Math.max(a.length, b.length); i++) {
      if (a[i] === b[i]) continue;
      let k = 0;
      while (k < a[i].length && a[i][k] === b[i]?.[k]) k++;
      assert.fail(`context ${i} differs at character ${k}: ${JSON.stringify(a[i].slice(Math.max(0, k - 120), k + 120))} vs ${JSON.stringify(b[i]?.slice(Math.max(0, k - 120), k + 120))}`);
    }
    console.log(`ok - member compression: both hosts sent byte-identical contexts (${results[0].length} contexts)`);
  } catch (e) {
    failed++;
    console.log(`not ok - member compression: the hosts' contexts differ\n  ${String(e).slice(0, 600)}`);
  }
}
rmSync(dir, { recursive: true, force: true });
if (failed) {
  console.log(`member compression: ${failed} failed`);
  process.exit(1);
}
console.log("member compression: all passed");
