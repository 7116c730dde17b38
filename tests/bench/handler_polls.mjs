// What long polls waiting on other conversations cost the edge handler's
// appends (the JS twin of tests/bench/idle_polls.py): N members each
// long-poll a conversation of their own (`…/events?wait=`) on a handler over
// MemoryJournal, called in-process, while 4 writers append 100 messages each
// elsewhere; appends per second with the N polls waiting vs with none, a
// warm-up run first. Prints one JSON object.
//
//   node tests/bench/handler_polls.mjs [js/dist] [N]
import { createHash } from "node:crypto";
const dist = process.argv[2] ? new URL(process.argv[2], `file://${process.cwd()}/`).pathname : new URL("../../js/dist", import.meta.url).pathname;
const N = Number(process.argv[3] ?? 300);
const f = await import(`${dist}/node.js`);
await f.init();
const sha = (t) => createHash("sha256").update(t).digest("hex");
async function run(waiting) {
  const members = Array.from({ length: waiting + 1 }, (_, i) => ({ id: `m${i}`, tokenSha256: sha(`t${i}`) }));
  const h = f.createHandler({ journal: new f.MemoryJournal(), model: f.modelFromFunction(async () => "S."), declaration: { targetId: "a", compactorId: "b" }, members });
  const req = (path, token, body) => h(new Request(`http://x/api/conversations/${path}`, { method: body ? "POST" : "GET", headers: { authorization: `Bearer ${token}`, "content-type": "application/json" }, body }), { waitUntil() {} });
  const polls = [];
  for (let i = 0; i < waiting; i++) {
    await req(`p${i}/messages`, `t${i}`, JSON.stringify({ role: "user", content: "hi" }));
  }
  await new Promise((r) => setTimeout(r, 300));
  for (let i = 0; i < waiting; i++) {
    const last = (await (await req(`p${i}/events?after=0`, `t${i}`)).json()).last;
    polls.push(req(`p${i}/events?after=${last}&wait=25000`, `t${i}`));
  }
  await new Promise((r) => setTimeout(r, 300));
  const t0 = performance.now();
  const n = 100;
  await Promise.all([0, 1, 2, 3].map(async (w) => { for (let i = 0; i < n; i++) { const r = await req(`w${w}/messages`, `t${waiting}`, JSON.stringify({ role: "user", content: `m${i}` })); if (r.status !== 201) throw new Error(String(r.status)); } }));
  const s = (performance.now() - t0) / 1000;
  return 4 * n / s;
}
await run(0); const none = await run(0), many = await run(N);
console.log(JSON.stringify({ pollers: N, appends_per_s_none: Math.round(none), appends_per_s_polling: Math.round(many), ratio: +(many / none).toFixed(2) }));
process.exit(0);
