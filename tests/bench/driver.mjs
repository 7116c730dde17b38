// The JS driver end to end, as a chat client runs it: per message, append the
// member's turn, `onMessage`, then `context` — through `createCompactor` over
// `MemoryJournal`, on the README's token budget (window 8,192) with a fake
// model. Histories of 1,000, 10,000 and 100,000 turns are written to the
// journal first (the conversation was long before this compactor started);
// the compactor then activates, compacts as messages arrive, and each message
// is timed. Prints one JSON object.
//   node tests/bench/driver.mjs [--quick]
const quick = process.argv.includes("--quick");
const repo = new URL("../..", import.meta.url);
const f = await import(new URL("js/dist/index.js", repo));
await f.init();

const model = {
  async *stream(p) {
    yield { type: "delta", text: `Summary of ${p.input.turnCount} turns.` };
    yield { type: "done", modelId: "bench", usage: { inputTokens: 1, outputTokens: 8 }, finishReason: "stop" };
  },
  async complete() { throw new Error("unused"); },
};
const declaration = { targetId: "agent", compactorId: "agent-compactor", budget: { kind: "tokens", window: 8192 } };
const say = (s) => ({
  type: "message", conversation: "c", chat: "", sender: "", sourceSeq: s, turnId: `t${s}`,
  role: s % 2 ? "user" : "assistant", parts: [{ type: "text", text: `message ${s} about the trip `.padEnd(300, "x") }],
});

async function perMessage(history, messages) {
  const journal = new f.MemoryJournal();
  for (let s = 1; s <= history; s += 1000) {
    const batch = [];
    for (let i = s; i < Math.min(s + 1000, history + 1); i++) batch.push(say(i));
    await journal.append("c", batch);
  }
  const c = f.createCompactor({ journal, model, declaration });
  await c.onMessage("c"); // the first call reads the history once
  await c.context("c");
  const samples = [];
  let compactions = 0;
  for (let s = history + 1; s <= history + messages; s++) {
    const t = performance.now();
    await journal.append("c", say(s));
    const r = await c.onMessage("c");
    await c.context("c", { format: "openai" });
    samples.push(performance.now() - t);
    if (r.status === "compacted") compactions++;
  }
  if (compactions === 0) throw new Error("the benchmark never compacted");
  samples.sort((a, b) => a - b);
  return { median: samples[samples.length >> 1], compactions };
}

const messages = quick ? 100 : 400;
const small = await perMessage(1_000, messages);
const ten = await perMessage(10_000, messages);
const big = await perMessage(quick ? 20_000 : 100_000, messages);
console.log(JSON.stringify({
  node_driver_1k_us: small.median * 1e3,
  node_driver_10k_us: ten.median * 1e3,
  node_driver_100k_us: big.median * 1e3,
  node_driver_history_big: quick ? 20_000 : 100_000,
  node_driver_compactions: small.compactions + ten.compactions + big.compactions,
  node_driver_growth_100k_vs_1k: big.median / small.median,
}));
