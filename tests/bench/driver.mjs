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
const say = (s, conversation = "c") => ({
  type: "message", conversation, chat: "", sender: "", sourceSeq: s, turnId: `t${s}`,
  role: s % 2 ? "user" : "assistant", parts: [{ type: "text", text: `message ${s} about the trip `.padEnd(300, "x") }],
});

// A compactor over its own journal after `history` turns were written; each
// `message()` appends one turn, runs onMessage and context, and is timed. The
// histories compared are stepped in turn, one message of each, so the
// machine's drift and the engine's warm-up reach them alike.
async function perMessage(history) {
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
  let s = history + 1;
  return {
    async message() {
      const t = performance.now();
      await journal.append("c", say(s++));
      const r = await c.onMessage("c");
      await c.context("c", { format: "openai" });
      samples.push(performance.now() - t);
      if (r.status === "compacted") compactions++;
    },
    result() {
      if (compactions === 0) throw new Error("the benchmark never compacted");
      samples.sort((a, b) => a - b);
      return { median: samples[samples.length >> 1], compactions };
    },
  };
}

// One compaction when the chain already holds `short` boundaries and when it
// holds `long`: the median time of the message that compacts (append,
// onMessage), over `samples` compactions of each. Two conversations of one
// compactor: both chains are built first, then their compactions alternate,
// one of each in turn (the short chain grows by `samples` as they run), so
// the machine's drift and the engine's warm-up reach both alike. A small
// character budget, so a compaction comes every few turns.
async function compactionGrowth(short, long, samples) {
  const journal = new f.MemoryJournal();
  const c = f.createCompactor({
    journal, model,
    declaration: { targetId: "agent", compactorId: "agent-compactor", budget: { kind: "chars", trigger: 6000, retain: 2000 }, summary: { maxChars: 400 } },
  });
  let s = 1;
  // Messages appended to `conversation` until one compacts: that message's time.
  const compactOnce = async (conversation) => {
    for (;;) {
      const t = performance.now();
      await journal.append(conversation, say(s++, conversation));
      if ((await c.onMessage(conversation)).status === "compacted") return performance.now() - t;
    }
  };
  for (const [conversation, length] of [["short", short], ["long", long]]) {
    for (let b = 0; b < length; b++) await compactOnce(conversation);
  }
  const times = { short: [], long: [] };
  for (let i = 0; i < samples; i++) {
    for (const conversation of ["short", "long"]) times[conversation].push(await compactOnce(conversation));
  }
  const median = (a) => a.sort((x, y) => x - y)[a.length >> 1];
  return [median(times.short), median(times.long)];
}

// A timeline page (the latest 200 items) drawn right after a write through
// compactors over one MemoryJournal of `history` turns: with the
// conversation's text kept between drawings (the default) and with none
// kept (`timelineTextChars: 0`: each drawing encodes the whole
// conversation), a write and a drawing of each in turn. Median ms of each.
async function timelineAfterWrite(history, samples) {
  const journal = new f.MemoryJournal();
  for (let s = 1; s <= history; s += 1000) await journal.append("c", Array.from({ length: Math.min(1000, history - s + 1) }, (_, i) => say(s + i)));
  const compactors = [f.createCompactor({ journal, model, declaration }), f.createCompactor({ journal, model, declaration, timelineTextChars: 0 })];
  const times = [[], []];
  let s = history + 1;
  for (let k = 0; k <= samples; k++) {
    for (const [i, c] of compactors.entries()) {
      await journal.append("c", say(s++));
      await c.onMessage("c");
      const t = performance.now();
      await c.timeline("c", { limit: 200 });
      if (k > 0) times[i].push(performance.now() - t); // the first drawing of each reads the whole conversation
    }
  }
  const median = (a) => a.sort((x, y) => x - y)[a.length >> 1];
  return times.map(median);
}

const messages = quick ? 100 : 400;
const [growth10, growth1000] = await compactionGrowth(10, 1000, quick ? 25 : 61);
const [timelineKept, timelineWhole] = await timelineAfterWrite(quick ? 2_000 : 5_000, quick ? 9 : 25);
const runs = [await perMessage(1_000), await perMessage(10_000), await perMessage(quick ? 20_000 : 100_000)];
for (let i = 0; i < messages; i++) for (const run of runs) await run.message();
const [small, ten, big] = runs.map((run) => run.result());
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
  node_timeline_after_write_kept_ms: timelineKept,
  node_timeline_after_write_whole_ms: timelineWhole,
  node_timeline_after_write_kept_vs_whole: timelineKept / timelineWhole,
}));
