// A/B of two builds of the JS package's driver, as a chat host runs it:
// node tests/bench/ab-driver.mjs DIST_INDEX_JS [CHARS] — a compactor at seed
// 002's token defaults with a 1,700-character system prompt and 1,000 turns,
// then the median of 600 messages (append, onMessage, context in OpenAI
// format) of CHARS characters each (default 300). Run it against each
// build's js/dist/index.js in turn (BENCHMARKS.md, session 43).
const f = await import(new URL(process.argv[2], `file://${process.cwd()}/`).href);
const size = Number(process.argv[3] ?? 300);
await f.init();
const c = f.createCompactor({
  journal: new f.MemoryJournal(),
  model: f.modelFromFunction(async () => "Summary."),
  declaration: { targetId: "assistant", compactorId: "assistant-compactor", budget: { kind: "tokens", window: 8192 } },
});
await c.append("w", { role: "system", content: "You are helpful. ".repeat(100) });
for (let i = 0; i < 1000; i++) {
  await c.append("w", { role: i % 2 ? "assistant" : "user", content: `turn ${i} `.padEnd(size, ".") });
  await c.onMessage("w");
}
const samples = [];
for (let i = 0; i < 600; i++) {
  const t = performance.now();
  await c.append("w", { role: i % 2 ? "assistant" : "user", content: `more ${i} `.padEnd(size, ".") });
  await c.onMessage("w");
  await c.context("w", { format: "openai" });
  samples.push(performance.now() - t);
}
samples.sort((a, b) => a - b);
console.log(JSON.stringify({ chars: size, median_us: Math.round(samples[samples.length >> 1] * 1000) }));
