// A/B of two .wasm builds through the npm package (run after tests/bench/run
// wrote target/bench): node tests/bench/ab-wasm.mjs WASM_FILE prints the W1
// per-message plan + select, the 2,001-message select and a 1.2 MB prompt trim.
import { readFile } from "node:fs/promises";
const dir = new URL("../../target/bench", import.meta.url).pathname;
const f = await import(new URL("../../js/dist/index.js", import.meta.url).href);
await f.init(await readFile(process.argv[2]));
function median(fn, minRuns, budgetMs = 2500) {
  const samples = []; const start = performance.now();
  while (samples.length < minRuns || performance.now() - start < budgetMs) { const t = performance.now(); fn(); samples.push(performance.now() - t); }
  samples.sort((a, b) => a - b); return samples[samples.length >> 1];
}
const plan = JSON.parse(await readFile(`${dir}/w1-plan.json`, "utf8"));
const select = JSON.parse(await readFile(`${dir}/w1-select.json`, "utf8"));
const full = JSON.parse(await readFile(`${dir}/w1-full-select.json`, "utf8"));
const pm = median(() => { f.plan(plan); f.select(select); }, 20);
const fs = median(() => f.select(full), 10);
const long = "please could you maybe just kindly help me ".repeat(20000);
const tr = median(() => f.trimPrompt ? f.trimPrompt(long) : 0, 5);
console.log(JSON.stringify({ file: process.argv[2].split("/").slice(-2).join("/"), perMessageUs: Math.round(pm * 1000), fullSelectUs: Math.round(fs * 1000), trimMs: +tr.toFixed(2) }));
