import { test } from "node:test";
import { readFile } from "node:fs/promises";
import { createHash } from "node:crypto";
import * as f from "../dist/index.js";
import { suite } from "./shared.mjs";

await f.init();

for (const [name, fn] of suite(f, async () => new f.MemoryJournal())) test(name, fn);

test("artifactSha256 is the SHA-256 of the shipped .wasm", async () => {
  const bytes = await readFile(new URL("../pkg/foldline_bg.wasm", import.meta.url));
  const hex = createHash("sha256").update(bytes).digest("hex");
  if (f.artifactSha256 !== `sha256:${hex}`) throw new Error(`${f.artifactSha256} != sha256:${hex}`);
});

test("the writer lease keeps a second driver out", async () => {
  const journal = new f.MemoryJournal();
  if (!(await journal.acquireLease("c1", "other", 60_000))) throw new Error("lease");
  const c = f.createCompactor({ journal, model: { stream() { throw new Error("x"); }, complete() { throw new Error("x"); } }, declaration: { targetId: "a", compactorId: "b" } });
  const r = await c.onMessage("c1");
  if (r.status !== "busy") throw new Error(JSON.stringify(r));
});
