// Soak: N messages (default 100,000) through the JS driver in one Node
// process — per message, as a chat client runs it: append the member's or
// the assistant's turn, `onMessage`, `context` in OpenAI format — over
// `MemoryJournal`, on the README's token budget (window 8,192), with a
// model that summarizes at once. Halfway, a member pastes a 4 MB log
// (`trimPrompt`), the one huge request that would otherwise leave the
// core's linear memory at its high-water mark for good.
//
// Asserts: no crash; every compaction's context fits; the core's linear
// memory is never above MEMORY_RESET_BYTES after a call, including right
// after the paste. Prints, every tenth of the run, the process's heap and
// RSS, the journal's size (MemoryJournal keeps every event: that growth is
// the journal, not the driver) and the median, mean and p99 cost per message
// (the mean and p99 carry the compactions).
//   node tests/soak/node.mjs [messages]
const n = Number(process.argv[2] ?? 100_000);
const repo = new URL("../..", import.meta.url);
const f = await import(new URL("js/dist/node.js", repo));
await f.init();

const model = {
  async *stream(p) {
    yield { type: "delta", text: `Summary of ${p.input.turnCount} turns through ${p.coveredThroughTurnId}.` };
    yield { type: "done", modelId: "soak", usage: { inputTokens: 1, outputTokens: 8 }, finishReason: "stop" };
  },
  async complete() { throw new Error("unused"); },
};
const declaration = { targetId: "agent", compactorId: "agent-compactor", budget: { kind: "tokens", window: 8192 } };
const journal = new f.MemoryJournal();
const c = f.createCompactor({ journal, model, declaration });
const id = "soak";
const mb = (b) => Math.round(b / 1048576);
const rows = [];
let compactions = 0;
let window = [];
let peakWasm = 0;
const t0 = performance.now();
for (let i = 1; i <= n; i++) {
  const t = performance.now();
  const role = i % 2 ? "user" : "assistant";
  await c.append(id, { role, content: `Message ${i} about the trip: day ${i % 14}, ${800 + (i % 300)} euros, with Ana. `.repeat(1 + (i % 5)) });
  const r = await c.onMessage(id);
  if (r.status === "compacted") compactions++;
  if (r.status === "failed" || r.status === "refused") throw new Error(`message ${i}: ${JSON.stringify(r)}`);
  const ctx = await c.context(id, { format: "openai" });
  if (ctx.manifest.sizes.total > ctx.manifest.limit) throw new Error(`message ${i}: the context is over its limit`);
  window.push(performance.now() - t);
  peakWasm = Math.max(peakWasm, f.memoryBytes());
  if (f.memoryBytes() > f.MEMORY_RESET_BYTES) throw new Error(`message ${i}: the core kept ${f.memoryBytes()} bytes`);
  if (i === Math.floor(n / 2)) {
    const paste = f.trimPrompt("ERROR 2026-11-30T12:00:00Z connection reset by peer, basically retrying now. ".repeat(52_000));
    if (paste.text.length < 1_000_000) throw new Error("the paste was not trimmed whole");
    if (f.memoryBytes() > f.MEMORY_RESET_BYTES) throw new Error(`after the paste the core kept ${f.memoryBytes()} bytes`);
  }
  if (i % Math.max(1, Math.floor(n / 10)) === 0 || i === n) {
    global.gc?.();
    const m = process.memoryUsage();
    const events = await journal.readEvents(id, 0);
    const journalBytes = events.reduce((s, e) => s + JSON.stringify(e.event).length, 0);
    window.sort((a, b) => a - b);
    rows.push({
      messages: i, compactions, events: events.length,
      heapMB: mb(m.heapUsed), rssMB: mb(m.rss), journalMB: mb(journalBytes), wasmMB: +(f.memoryBytes() / 1048576).toFixed(1),
      medianUs: Math.round(window[window.length >> 1] * 1000),
      p99Us: Math.round(window[Math.floor(window.length * 0.99)] * 1000),
      meanUs: Math.round((window.reduce((a, b) => a + b, 0) / window.length) * 1000),
    });
    console.error(JSON.stringify(rows[rows.length - 1]));
    window = [];
  }
}
if (compactions === 0) throw new Error("the soak never compacted");
console.log(JSON.stringify({
  host: `Node ${process.versions.node}`, messages: n, seconds: Math.round((performance.now() - t0) / 1000), compactions,
  peakWasmMB: +(peakWasm / 1048576).toFixed(1), resetBoundMB: f.MEMORY_RESET_BYTES / 1048576,
  medianGrowthLastVsFirst: +(rows[rows.length - 1].medianUs / rows[0].medianUs).toFixed(2),
  meanGrowthLastVsFirst: +(rows[rows.length - 1].meanUs / rows[0].meanUs).toFixed(2),
  rows,
}));
