// The Node side of tests/bench/run: per-message plan + select through the npm
// package, W1 select with the peer's budget, cold start. Prints one JSON object.
import { readFile } from "node:fs/promises";
import { spawnSync } from "node:child_process";

const dir = process.argv[2];
const quick = process.argv.includes("--quick");
const budgetMs = quick ? 600 : 3000;
const repo = new URL("../..", import.meta.url);
const f = await import(new URL("js/dist/index.js", repo));
await f.init();

function median(fn, minRuns) {
  const samples = [];
  const start = performance.now();
  while (samples.length < minRuns || performance.now() - start < budgetMs) {
    const t = performance.now();
    fn();
    samples.push(performance.now() - t);
  }
  samples.sort((a, b) => a - b);
  return samples[samples.length >> 1];
}

const plan = JSON.parse(await readFile(`${dir}/w1-plan.json`, "utf8"));
const select = JSON.parse(await readFile(`${dir}/w1-select.json`, "utf8"));
const full = JSON.parse(await readFile(`${dir}/w1-full-select.json`, "utf8"));
// Per message through the package, and the native core on the same two
// requests (the Rust bench's own measure, `bench <dir> --native-turn`, a
// process of its own, path in FOLDLINE_BENCH), three turns of each, so the
// machine's drift reaches both alike: the medians of each side's turns make
// node_vs_native.
const nodeTurns = [];
const nativeTurns = [];
for (let i = 0; i < 3; i++) {
  nodeTurns.push(median(() => { f.plan(plan); f.select(select); }, 20));
  if (process.env.FOLDLINE_BENCH) {
    const args = [dir, "--native-turn", ...(quick ? ["--quick"] : [])];
    const us = Number.parseFloat(spawnSync(process.env.FOLDLINE_BENCH, args, { encoding: "utf8" }).stdout);
    if (!(us > 0)) throw new Error(`${process.env.FOLDLINE_BENCH} --native-turn printed no time`);
    nativeTurns.push(us / 1e3);
  }
}
const middle = (xs) => [...xs].sort((a, b) => a - b)[xs.length >> 1];
const perMessage = middle(nodeTurns);
// The same pair split at the JSON boundary: the core calls on JSON text
// alone, and the JavaScript side alone (the requests written, the answers
// read), which no engine speed removes.
const planText = JSON.stringify(plan), selectText = JSON.stringify(select);
const perMessageCore = median(() => { f.callJson("plan", planText); f.callJson("select", selectText); }, 20);
const answers = [f.callJson("plan", planText), f.callJson("select", selectText)];
const perMessageJson = median(() => { JSON.stringify(plan); JSON.stringify(select); answers.forEach((a) => JSON.parse(a)); }, 20);
const fullSelect = median(() => f.select(full), 10);
const manifestOnly = median(() => f.select({ ...full, render: false }), 10);
// The hot path DESIGN.md prescribes: the host keeps each turn's metadata next
// to its message (computed once, when the message arrived), foldline answers
// which turns to keep, the host slices its own array.
const metas = await Promise.all(full.events.map(async (e) => (e.type === "message" ? { type: "turnMeta", ...(await f.turnMeta(e)) } : e)));
const metaReq = { ...full, events: metas, render: false };
const metaSelect = median(() => f.select(metaReq), 20);
// What writing each stateless request as JSON text costs by itself: the
// floor of any call through the JSON contract, before the core does anything.
const fullStringify = median(() => JSON.stringify(full), 10);
const metaStringify = median(() => JSON.stringify(metaReq), 20);

// Cold start: import + instantiate in a fresh process, measured inside it,
// through the entry `import "foldline"` resolves to in Node (the "node"
// export condition: it finds and reads the .wasm from disk itself).
const probe = `const t=performance.now();const f=await import(${JSON.stringify(new URL("js/dist/node.js", repo).href)});await f.init();console.log(performance.now()-t);`;
// The floor of that measure: a fresh process importing an empty ES module.
// The two probes alternate, one process of each in turn, so the machine's
// drift reaches both alike.
const emptyModule = `data:text/javascript,export const x = 1;`;
const emptyProbe = `const t=performance.now();await import(${JSON.stringify(emptyModule)});console.log(performance.now()-t);`;
const colds = [];
const empties = [];
const timeProcess = (code) => Number(spawnSync(process.execPath, ["--input-type=module", "-e", code], { encoding: "utf8" }).stdout.trim());
for (let i = 0; i < (quick ? 7 : 15); i++) {
  colds.push(timeProcess(probe));
  empties.push(timeProcess(emptyProbe));
}
colds.sort((a, b) => a - b);
empties.sort((a, b) => a - b);

// Prompt trim of a 1.2 MB paste through the package, beside a plain JS regex
// pass doing a similar sentence split and word removal over the same text.
const para = "I was just wondering if maybe you could possibly help me understand the error in the build log below, thanks in advance for your help. The build fails at step 3 when the linker cannot find libfoo.so, and honestly I think it might be because of the path. ";
const paste = para.repeat(Math.ceil(1_200_000 / para.length));
const trim = median(() => f.trimPrompt(paste), quick ? 3 : 8);
const regex = median(() => paste.split(/(?<=[.!?])\s+/).map((s) => s.replace(/\b(just|maybe|possibly|honestly|really|basically)\b\s*/gi, "").replace(/^i was (just )?wondering if /i, "")).join(" "), quick ? 3 : 8);

// The peer's workload through the real JS path: the W1 messages appended to a
// compactor (MemoryJournal, a token budget of 10,000 as the peer's, a fake
// model), then per new message what a host does — append, onMessage, context
// in OpenAI format — and context alone.
const w1 = JSON.parse(await readFile(`${dir}/w1-openai-messages.json`, "utf8"));
const compactor = f.createCompactor({
  journal: new f.MemoryJournal(),
  model: f.modelFromFunction(async (p) => `Summary of ${p.input.turnCount} turns.`),
  declaration: { targetId: "assistant", compactorId: "assistant-compactor", budget: { kind: "tokens", window: 10_000 } },
});
for (const m of w1) {
  await compactor.append("w1", m);
  if (m.role !== "tool") await compactor.onMessage("w1");
}
async function medianAsync(fn, minRuns) {
  const samples = [];
  const start = performance.now();
  while (samples.length < minRuns || performance.now() - start < budgetMs) {
    const t = performance.now();
    await fn();
    samples.push(performance.now() - t);
  }
  samples.sort((a, b) => a - b);
  return samples[samples.length >> 1];
}
let next = 0;
const driverMessage = await medianAsync(async () => {
  await compactor.append("w1", { role: next % 2 ? "assistant" : "user", content: `follow-up ${next++} about the trip`.padEnd(300, ".") });
  await compactor.onMessage("w1");
  await compactor.context("w1", { format: "openai" });
}, 20);
const driverContext = await medianAsync(() => compactor.context("w1", { format: "openai" }), 20);

console.log(JSON.stringify({
  node_version: process.version,
  node_driver_w1_message_us: driverMessage * 1e3,
  node_driver_w1_context_us: driverContext * 1e3,
  node_trim_1200k_ms: trim,
  regex_pass_1200k_ms: regex,
  node_per_message_us: perMessage * 1e3,
  ...(nativeTurns.length ? { native_per_message_in_turns_us: middle(nativeTurns) * 1e3 } : {}),
  node_full_w1_select_us: fullSelect * 1e3,
  node_full_w1_manifest_only_us: manifestOnly * 1e3,
  node_full_w1_meta_select_us: metaSelect * 1e3,
  node_cold_start_ms: colds[colds.length >> 1],
  node_cold_empty_import_ms: empties[empties.length >> 1],
  node_per_message_core_us: perMessageCore * 1e3,
  node_per_message_json_us: perMessageJson * 1e3,
  node_full_w1_stringify_us: fullStringify * 1e3,
  node_meta_w1_stringify_us: metaStringify * 1e3,
}));
