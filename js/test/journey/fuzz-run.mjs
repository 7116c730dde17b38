// Loop-level fuzzing (fuzz.mjs) through the real JS driver: over the memory
// journal in Node, and over the IndexedDB journal in Chromium (its own
// compare-and-append and lease). Short profile in `npm test`: 16 cases of 120
// steps in Node, 4 in Chromium. Long profile:
//   FOLDLINE_FUZZ_CASES=500 FOLDLINE_FUZZ_STEPS=400 node test/journey/fuzz-run.mjs
// One case again: FOLDLINE_FUZZ_SEED=<seed> (as a breach names it).
import * as f from "../../dist/node.js";
import { serve, launchChromium } from "../static.mjs";
import { fuzzCase } from "./fuzz.mjs";

const cases = Number(process.env.FOLDLINE_FUZZ_CASES ?? 16);
const steps = Number(process.env.FOLDLINE_FUZZ_STEPS ?? 120);
const first = Number(process.env.FOLDLINE_FUZZ_FIRST ?? 1);
const only = process.env.FOLDLINE_FUZZ_SEED;
const seeds = only ? [Number(only)] : Array.from({ length: cases }, (_, i) => first + i);
let failed = 0;

function report(where, done, ms, total) {
  console.log(`ok - loop fuzzing in ${where}: ${done} cases of ${steps} steps held every invariant (${ms} ms): ${JSON.stringify(total)}`);
}
function add(total, r) {
  for (const [k, v] of Object.entries(r)) total[k] = (total[k] ?? 0) + v;
}

await f.init();
{
  const total = {};
  const t = performance.now();
  for (const seed of seeds) {
    try {
      add(total, await fuzzCase(f, new f.MemoryJournal(), { seed, steps }));
    } catch (e) {
      failed++;
      console.log(`not ok - ${String(e?.stack ?? e).split("\n").slice(0, 10).join("\n  ")}`);
    }
  }
  if (!failed) report("Node (memory journal)", seeds.length, Math.round(performance.now() - t), total);
}

const browserSeeds = seeds.slice(0, Math.max(1, Math.ceil(seeds.length / 4)));
const root = new URL("../..", import.meta.url); // js/
const server = await serve(root.pathname);
const browser = await launchChromium();
try {
  const page = await browser.newPage();
  await page.goto(`${server.base}/test/browser/index.html`);
  const t = performance.now();
  const out = await page.evaluate(async ({ seeds, steps }) => {
    const f = await import("/dist/browser.js");
    const { fuzzCase } = await import("/test/journey/fuzz.mjs");
    await f.init(new URL("/pkg/foldline_bg.wasm", location.href));
    const total = {};
    for (const seed of seeds) {
      try {
        const r = await fuzzCase(f, await f.IndexedDbJournal.open(`fuzz-${seed}-${Math.random()}`), { seed, steps });
        for (const [k, v] of Object.entries(r)) total[k] = (total[k] ?? 0) + v;
      } catch (e) {
        return { error: String(e?.stack ?? e) };
      }
    }
    return { total };
  }, { seeds: browserSeeds, steps });
  if (out.error) {
    failed++;
    console.log(`not ok - in Chromium (IndexedDB journal): ${out.error.split("\n").slice(0, 10).join("\n  ")}`);
  } else report("Chromium (IndexedDB journal)", browserSeeds.length, Math.round(performance.now() - t), out.total);
} finally {
  await browser.close();
  server.close();
}
process.exit(failed ? 1 : 0);
