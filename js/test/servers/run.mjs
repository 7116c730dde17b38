// Hostile requests to both servers: `foldline serve` (the Rust host, over
// real HTTP) and the package's fetch handler (the JS host, behind Node's
// http server) get the same requests — bad numbers and repeated query
// parameters, strangers and missing tokens, undecodable, empty and oversized ids,
// wrong methods and HEAD, bodies that are not messages, a 2 MB message, a lone
// surrogate, a byte order mark, idempotency keys bad, new and reused,
// member compression while it is off — and must answer each
// with the same status and error code, the one the table below expects.
//
// node test/servers/run.mjs [path/to/foldline]

import { createServer } from "node:http";
import { spawn } from "node:child_process";
import { createHash } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const js = new URL("../..", import.meta.url).pathname;
const bin = process.argv[2] ?? join(js, "..", "target", "debug", "foldline");
const f = await import(join(js, "dist", "node.js"));
await f.init();

const ALICE = "alice-token", BOB = "bob-token";
const sha = (t) => createHash("sha256").update(t).digest("hex");
const members = [{ id: "alice", tokenSha256: sha(ALICE) }, { id: "bob", tokenSha256: sha(BOB) }];

const handler = f.createHandler({
  journal: new f.MemoryJournal(), model: f.modelFromFunction(async () => "Summary."),
  declaration: { targetId: "assistant", compactorId: "assistant-compactor" }, members,
});
const edge = createServer(async (req, res) => {
  const chunks = [];
  for await (const c of req) chunks.push(c);
  const r = await handler(new Request(`http://local${req.url}`, {
    method: req.method, headers: req.headers, body: ["GET", "HEAD"].includes(req.method) ? undefined : Buffer.concat(chunks),
  }), { waitUntil() {} });
  res.writeHead(r.status, Object.fromEntries(r.headers));
  res.end(Buffer.from(await r.arrayBuffer()));
});
await new Promise((r) => edge.listen(0, "127.0.0.1", r));

const dir = mkdtempSync(join(tmpdir(), "foldline-servers-"));
writeFileSync(join(dir, "members.json"), JSON.stringify({ members }));
const rust = spawn(bin, ["--journal", join(dir, "j.db"), "serve", "--members", join(dir, "members.json"), "--listen", "127.0.0.1:0"], { stdio: ["ignore", "ignore", "pipe"] });
const rustBase = await new Promise((resolve, reject) => {
  // Read whole lines: a chunk may end inside the address.
  let seen = "";
  rust.stderr.on("data", (d) => {
    seen += String(d);
    const m = /listening on (http:\S+)\n/.exec(seen);
    if (m) resolve(m[1]);
  });
  rust.on("exit", (c) => reject(new Error(`foldline serve exited (${c})`)));
});
const bases = { edge: `http://127.0.0.1:${edge.address().port}`, rust: rustBase };

async function call(base, [method, path, body, token = ALICE, headers = {}]) {
  const r = await fetch(base + path, {
    method, body,
    headers: { ...(token ? { authorization: `Bearer ${token}` } : {}), ...(body !== undefined ? { "content-type": "application/json" } : {}), ...headers },
  });
  const text = await r.text();
  let code = "";
  try { code = JSON.parse(text).error?.code ?? ""; } catch { /* not an error body */ }
  return `${r.status}${code ? ` ${code}` : ""}`;
}

const c = "/api/conversations/c";
const msg = (m) => JSON.stringify(m);
// [request, expected]; a request is [method, path, body, token, headers].
const cases = [
  [["GET", `${c}/timeline`], "200"],
  [["GET", `${c}/timeline?limit=0`], "200"],
  [["GET", `${c}/timeline?limit=abc`], "400 invalid_input"],
  [["GET", `${c}/timeline?before=-5`], "400 invalid_input"],
  [["GET", `${c}/timeline?limit=1&limit=1`], "400 invalid_input"],
  [["GET", `${c}/timeline?wait=abc`], "400 invalid_input"],
  [["GET", `${c}/events?after=x`], "400 invalid_input"],
  [["GET", `${c}/events?after=0&after=0`], "400 invalid_input"],
  [["GET", `${c}/events?after=99999`], "200"],
  [["GET", `${c}/context?format=bogus`], "400 invalid_input"],
  [["GET", `${c}/context?format=openai&format=anthropic`], "400 invalid_input"],
  [["GET", `${c}/context?format=ai-sdk&messages=true`], "200"],
  [["GET", "/api/conversations/nope/timeline"], "404 not_found"],
  [["GET", `${c}/timeline`, undefined, BOB], "403 not_owner"],
  [["GET", `${c}/timeline`, undefined, "wrong"], "401 unauthorized"],
  [["GET", `${c}/timeline`, undefined, null], "401 unauthorized"],
  [["GET", "/api/conversations/%FF/timeline"], "400 invalid_input"],
  [["GET", "/api/conversations/a%2Fb/timeline"], "400 invalid_input"],
  [["GET", `/api/conversations/${"x".repeat(129)}/timeline`], "400 invalid_input"],
  [["DELETE", `${c}/timeline`], "405 method_not_allowed"],
  [["GET", `${c}/messages`], "405 method_not_allowed"],
  [["POST", `${c}/messages`, "not json"], "400 invalid_input"],
  [["POST", `${c}/messages`, "[]"], "400 invalid_input"],
  [["POST", `${c}/messages`, msg({ type: "message" })], "400 invalid_input"],
  [["POST", `${c}/messages`, msg({ role: "wizard", content: "x" })], "400 invalid_input"],
  [["POST", `${c}/messages`, msg({ role: "user", content: 5 })], "400 invalid_input"],
  [["POST", `${c}/messages`, msg({ role: "tool", content: "x" })], "400 invalid_input"],
  [["POST", `${c}/messages`, msg({ role: "assistant", tool_calls: "x" })], "400 invalid_input"],
  [["POST", `${c}/messages`, msg({ role: "user", content: "\ud800" })], "400 invalid_input"],
  [["POST", `${c}/messages`, msg({ role: "user", content: "x".repeat(2_000_000) })], "413 body_too_large"],
  [["POST", `${c}/condense`, undefined, BOB], "403 not_owner"],
  [["POST", `${c}/condense`], "409 nothing_to_fold"],
  [["GET", `${c}/verify`], "200"],
  [["GET", "/api/nothing"], "404 not_found"],
  [["POST", "/api/conversations/d/messages", msg({ role: "user", content: "x" }), ALICE, { "idempotency-key": "bad key!" }], "400 invalid_input"],
  [["POST", "/api/conversations/d/messages", msg({ role: "user", content: "x" }), ALICE, { "idempotency-key": "k1" }], "201"],
  [["POST", "/api/conversations/d/messages", msg({ role: "user", content: "x" }), ALICE, { "idempotency-key": "k1" }], "201"],
  [["POST", "/api/conversations/d/messages", msg({ role: "user", content: "y" }), ALICE, { "idempotency-key": "k1" }], "422 idempotency_key_reused"],
  [["POST", `${c}/messages`, "\ufeff" + msg({ role: "user", content: "after a byte order mark" })], "201"],
  [["GET", `${c}/timeline?limit=9007199254740993`], "400 invalid_input"],
  [["GET", `${c}/timeline`, undefined, ALICE, { "if-none-match": "*" }], "304"],
  [["POST", `${c}/members`], "405 method_not_allowed"],
  [["PUT", `${c}/members/zed`], "404 not_found"],
  [["GET", `${c}/answer/nope`], "405 method_not_allowed"],
  [["POST", `${c}/answer/x`], "405 method_not_allowed"],
  [["POST", `${c}/tasks/x/events`], "405 method_not_allowed"],
  [["GET", `${c}/tasks/nope/events`], "404 not_found"],
  [["PUT", "/api/members/me/compression", "not json"], "400 invalid_input"],
  [["PUT", "/api/members/me/compression", msg({ bogus: true })], "400 invalid_input"],
  [["PUT", "/api/members/me/compression", "{}"], "404 not_available"],
  [["DELETE", "/api/members/me/compression"], "405 method_not_allowed"],
  [["POST", "/api/members/me/compression/stats"], "405 method_not_allowed"],
  [["HEAD", `${c}/timeline`], "200"],
  [["HEAD", `${c}/messages`], "405"],
  [["GET", "/api/conversations//timeline"], "400 invalid_input"],
  [["PUT", "/api/conversations//members/bob"], "400 invalid_input"],
  [["GET", "/api/conversations//tasks/x/events"], "400 invalid_input"],
  [["GET", `${c}/tasks//events`], "404 not_found"],
  // The path and the method are looked at before the caller.
  [["GET", "/api/nothing", undefined, null], "404 not_found"],
  [["DELETE", `${c}/timeline`, undefined, null], "405 method_not_allowed"],
  [["GET", `${c}/timeline?limit=x`, undefined, null], "401 unauthorized"],
];

let failed = 0;
try {
  for (const base of Object.values(bases)) {
    const opened = await call(base, ["POST", `${c}/messages`, msg([{ role: "user", content: "hello" }, { role: "assistant", content: "hi" }])]);
    if (opened !== "201") throw new Error(`${base}: the conversation did not open (${opened})`);
  }
  for (const [request, expected] of cases) {
    const got = { edge: await call(bases.edge, request), rust: await call(bases.rust, request) };
    const ok = got.edge === expected && got.rust === expected;
    if (!ok) {
      failed++;
      console.log(`not ok - ${request[0]} ${request[1].slice(0, 80)}: expected ${expected}, edge ${got.edge}, rust ${got.rust}`);
    }
  }
} finally {
  rust.kill();
  edge.close();
  rmSync(dir, { recursive: true, force: true });
}
console.log(`servers: ${cases.length - failed} of ${cases.length} hostile requests answered alike and as expected by foldline serve and the edge handler`);
if (failed) process.exit(1);
