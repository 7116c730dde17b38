// Soak: two members of one room post through the chat client
// (`foldline/client`) while `foldline serve` is killed with SIGKILL at random
// moments and started again. Each message goes under its own idempotency
// key; a send that fails after the client's own retries is sent again under
// the same key, as the reference page does. Then: every message of both
// members stored exactly once, the chain verifies. Prints one JSON line;
// exits 1 if any check fails.
//   node tests/soak/kill_clients.mjs target/debug/foldline [messages per member = 10000]
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createHash } from "node:crypto";
import { createServer } from "node:net";
import { join } from "node:path";
import { tmpdir } from "node:os";

const { createClient, newSendKey } = await import(new URL("../../js/dist/client.js", import.meta.url).href);
const bin = process.argv[2];
const N = Number(process.argv[3] ?? 10_000);
const dir = mkdtempSync(join(tmpdir(), "foldline-kill-clients-"));
const sha = (t) => createHash("sha256").update(t).digest("hex");
writeFileSync(join(dir, "members.json"), JSON.stringify({ members: [{ id: "alice", tokenSha256: sha("alice-token") }, { id: "bob", tokenSha256: sha("bob-token") }] }));
writeFileSync(join(dir, "decl.json"), JSON.stringify({ targetId: "assistant", compactorId: "assistant-compactor", budget: { kind: "chars", trigger: 6000, retain: 2000 }, summary: { maxChars: 600 } }));
const port = await new Promise((ok) => {
  const s = createServer().listen(0, "127.0.0.1", () => { const p = s.address().port; s.close(() => ok(p)); });
});
const base = `http://127.0.0.1:${port}`;
let child;
const start = () => new Promise((ok, fail) => {
  child = spawn(bin, ["--journal", join(dir, "j.db"), "--declaration", join(dir, "decl.json"), "serve", "--listen", `127.0.0.1:${port}`, "--members", join(dir, "members.json")], { stdio: ["ignore", "ignore", "pipe"] });
  let err = "";
  child.stderr.on("data", (d) => { err += d; if (err.includes("listening on")) ok(); });
  child.on("exit", (code) => { if (!err.includes("listening on")) fail(new Error(`foldline serve exited ${code}: ${err}`)); });
});
const as = (token, method, path, body) => fetch(`${base}/api/conversations/room${path}`, { method, headers: { authorization: `Bearer ${token}` }, body: body && JSON.stringify(body) });

await start();
if ((await as("alice-token", "POST", "/messages", { role: "user", content: "The room opens." })).status !== 201) throw new Error("the room did not open");
if ((await as("alice-token", "PUT", "/members/bob")).status !== 204) throw new Error("bob was not let in");
let stop = false, kills = 0;
const killing = (async () => {
  while (!stop) {
    await new Promise((r) => setTimeout(r, 300 + Math.random() * 2000));
    if (stop) break;
    child.kill("SIGKILL");
    kills++;
    await new Promise((r) => setTimeout(r, Math.random() * 2500));
    await start();
  }
})();
let resent = 0;
async function member(token, who) {
  const client = createClient({ baseUrl: base, token, conversation: "room", storage: null });
  for (let i = 0; i < N; i++) {
    const text = `${who} ${i}: ${"the plan for the launch ".repeat(8)}`;
    const idempotencyKey = newSendKey();
    for (;;) {
      try {
        await client.send(text, { idempotencyKey });
        break;
      } catch {
        resent++; // down longer than the client's retries: sent again under the same key
        await new Promise((r) => setTimeout(r, 300));
      }
    }
  }
}
const t0 = Date.now();
await Promise.all([member("alice-token", "alice"), member("bob-token", "bob")]);
stop = true;
await killing;
const events = [];
for (let after = 0; ;) {
  const page = await (await as("alice-token", "GET", `/events?after=${after}`)).json();
  events.push(...page.events);
  after = page.last;
  if (!page.more) break;
}
const seen = new Map();
for (const { event: e } of events) {
  if (e.type !== "message") continue;
  const id = /^(\w+ \d+):/.exec(e.parts[0].text)?.[1];
  if (id) seen.set(`${e.sender}:${id}`, (seen.get(`${e.sender}:${id}`) ?? 0) + 1);
}
let missing = 0, twice = 0;
for (const who of ["alice", "bob"]) {
  for (let i = 0; i < N; i++) {
    const n = seen.get(`${who}:${who} ${i}`) ?? 0;
    if (n === 0) missing++;
    if (n > 1) twice++;
  }
}
const verify = await (await as("bob-token", "GET", "/verify")).json();
child.kill("SIGKILL");
rmSync(dir, { recursive: true, force: true });
const out = { seconds: (Date.now() - t0) / 1000, messages: 2 * N, kills, resent, missing, twice, verifies: verify.ok === true, boundaries: verify.resolution?.accepted?.length ?? 0 };
console.log(JSON.stringify(out));
process.exit(missing || twice || !out.verifies || kills === 0 ? 1 : 0);
