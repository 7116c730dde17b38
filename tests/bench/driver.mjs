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

// One compaction when the chain already holds `length` boundaries: the
// median time of the message that compacts (append, onMessage), over
// `samples` compactions after the chain reached each length; a small
// character budget, so a compaction comes every few turns.
async function compactionGrowth(lengths, samples) {
  const journal = new f.MemoryJournal();
  const c = f.createCompactor({
    journal, model,
    declaration: { targetId: "agent", compactorId: "agent-compactor", budget: { kind: "chars", trigger: 6000, retain: 2000 }, summary: { maxChars: 400 } },
  });
  const out = [];
  let boundaries = 0;
  let s = 1;
  for (const length of lengths) {
    const times = [];
    while (times.length < samples) {
      const t = performance.now();
      await journal.append("c", say(s++));
      const r = await c.onMessage("c");
      if (r.status === "compacted") {
        if (boundaries >= length) times.push(performance.now() - t);
        boundaries++;
      }
    }
    times.sort((a, b) => a - b);
    out.push(times[times.length >> 1]);
  }
  return out;
}

const messages = quick ? 100 : 400;
const [growth10, growth1000] = await compactionGrowth([10, 1000], quick ? 25 : 61);
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
  node_compaction_10_boundaries_us: growth10 * 1e3,
  node_compaction_1000_boundaries_us: growth1000 * 1e3,
  node_compaction_growth_1000_vs_10_boundaries: growth1000 / growth10,
}));
