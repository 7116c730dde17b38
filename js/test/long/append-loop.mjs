// A chat client's loop, run long: 3,000 appended messages with a token
// counter and an automatic check every 50th. Run as its own process by
// node.test.mjs so a V8 abort shows as a failed exit. Prints one JSON line.
import * as f from "../../dist/index.js";

await f.init();
const c = f.createCompactor({
  journal: new f.MemoryJournal(),
  model: f.modelFromFunction(async (p) => `Summary of ${p.input.turnCount} turns.`),
  declaration: { targetId: "assistant", compactorId: "assistant-compactor", budget: { kind: "tokens", window: 8192 } },
  countTokens: (t) => Math.ceil(t.length / 4),
});
const n = Number(process.argv[2] ?? 3000);
const every = Number(process.argv[3] ?? 50);
let compacted = 0;
for (let i = 0; i < n; i++) {
  await c.append("chat", { role: i % 2 ? "assistant" : "user", content: `message ${i} about the plan for week ${i % 7}. `.repeat(8) });
  if (every > 0 && i % every === every - 1 && (await c.onMessage("chat")).status === "compacted") compacted++;
}
const ctx = await c.context("chat", { format: "openai" });
console.log(JSON.stringify({ compacted, total: ctx.manifest.sizes.total, limit: ctx.manifest.limit }));
