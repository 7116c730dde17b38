// A/B of the JS driver with a host's token counter (gpt-tokenizer o200k): as
// tests/bench/ab-driver.mjs, every message appended, checked and its context
// drawn, counted. node tests/bench/ab-count.mjs DIST_INDEX_JS GPT_TOKENIZER_ESM (js/test/node_modules/gpt-tokenizer/esm/main.js)
const at = (path) => new URL(path, `file://${process.cwd()}/`).href;
const f = await import(at(process.argv[2]));
const { encode } = await import(at(process.argv[3]));
const count = (t) => encode(t).length;
await f.init();
const c = f.createCompactor({
  journal: new f.MemoryJournal(), countTokens: count,
  model: f.modelFromFunction(async () => "user: The plan keeps the budget and the dates as agreed, 1,400 euros.\n".repeat(20)),
  declaration: { targetId: "assistant", compactorId: "assistant-compactor", budget: { kind: "tokens", window: 8192 } },
});
await c.append("w", { role: "system", content: "You are helpful. ".repeat(100) });
for (let i = 0; i < 1000; i++) {
  await c.append("w", { role: i % 2 ? "assistant" : "user", content: `turn ${i} `.padEnd(300, ".") });
  await c.onMessage("w");
}
const samples = [];
for (let i = 0; i < 600; i++) {
  const t = performance.now();
  await c.append("w", { role: i % 2 ? "assistant" : "user", content: `more ${i} `.padEnd(300, ".") });
  await c.onMessage("w");
  await c.context("w", { format: "openai" });
  samples.push(performance.now() - t);
}
samples.sort((a, b) => a - b);
console.log(JSON.stringify({ median_us: Math.round(samples[samples.length >> 1] * 1000) }));
