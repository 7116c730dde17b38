// Anthropic and AI SDK messages coming in as the shared cases say
// (tests/import/anthropic.json, tests/import/ai-sdk.json), which the Rust
// host's importer runs too (`anthropic_messages_import_as_the_shared_cases_say`,
// `ai_sdk_messages_import_as_the_shared_cases_say`): the same parts, a
// tool's object input stored with the same bytes, the same refusals word
// for word, and nothing written on a refusal.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFile } from "node:fs/promises";
import * as f from "../dist/node.js";
import { fakeModel } from "./shared.mjs";

await f.init();

const declaration = { targetId: "agent", compactorId: "agent-compactor", budget: { kind: "chars", trigger: 2_000_000, retain: 1_000_000 } };
const compactor = () => f.createCompactor({ journal: new f.MemoryJournal(), model: fakeModel(), declaration });
// The journal's canonical form: `isError` and `custom` only when true.
const canonical = (p) => Object.fromEntries(Object.entries(p).filter(([k, v]) => !((k === "isError" || k === "custom") && v === false)));

for (const [format, file, convert, atLeast] of [
  ["anthropic", "anthropic.json", f.fromAnthropicMessages, 32],
  ["ai-sdk", "ai-sdk.json", f.fromAiSdkMessages, 29],
]) {
  test(`${format} messages import as the shared cases say, as in the Rust host; nothing is written on a refusal`, async () => {
    const doc = JSON.parse(await readFile(new URL(`../../tests/import/${file}`, import.meta.url), "utf8"));
    assert.ok(doc.cases.length >= atLeast);
    for (const c of doc.cases) {
      let events;
      try {
        events = convert(c.messages, { conversation: "c" });
      } catch (e) {
        assert.ok(c.refused, `${c.name}: refused: ${e.message}`);
        assert.equal(e.code, "invalid_request", c.name);
        assert.equal(e.message, `invalid_request: ${c.refused}`, c.name);
        const through = compactor();
        await assert.rejects(through.append("c", { format, messages: c.messages }), { code: "invalid_request" });
        assert.equal(await through.position("c"), 0, `${c.name}: nothing written`);
        continue;
      }
      assert.equal(c.refused, undefined, `${c.name}: accepted`);
      assert.deepEqual(events.map((e) => ({ role: e.role, parts: e.parts.map(canonical) })), c.drafts, c.name);
    }
  });
}

// Nothing accepted may leave a conversation unable to plan, compact,
// render, draw or verify: every accepted case of the four shared lists,
// mixed at random with member text into long conversations (seeded), goes
// through compactions and then every format's context, the timeline and
// the chain's resolution.
test("every accepted shared case keeps a long conversation able to compact, render, draw and verify", async () => {
  let seed = 3;
  const r = () => ((seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648);
  let compacted = 0, refused = 0;
  for (const [format, file, field] of [["openai", "openai.json", "messages"], ["openai-responses", "openai-responses.json", "items"], ["anthropic", "anthropic.json", "messages"], ["ai-sdk", "ai-sdk.json", "messages"]]) {
    const good = JSON.parse(await readFile(new URL(`../../tests/import/${file}`, import.meta.url), "utf8")).cases.filter((c) => !c.refused);
    for (let k = 0; k < 4; k++) {
      const c = f.createCompactor({ journal: new f.MemoryJournal(), model: fakeModel(), declaration: { targetId: "a", compactorId: "a-c", budget: { kind: "chars", trigger: 3000, retain: 1200 } } });
      for (let i = 0; i < 60; i++) {
        // A case whose tool result answers an earlier case's call (the ids
        // repeat across cases) makes one cycle of both: past the small
        // budget's room it is refused (`turn_too_large`, cycles.ts), and
        // only what is accepted must keep the conversation going.
        await c.append("x", { format, messages: good[Math.floor(r() * good.length)][field] }).catch((e) => {
          if (e.code !== "turn_too_large") throw e;
          refused++;
        });
        if (r() < 0.3) await c.append("x", [{ role: "user", content: `filler ${i} `.repeat(20) }]);
        const out = await c.onMessage("x");
        assert.ok(!["failed", "refused"].includes(out.status), `${format} #${k}: ${JSON.stringify(out)}`);
        if (out.status === "compacted") compacted++;
      }
      for (const to of ["foldline", "openai", "openai-responses", "anthropic", "ai-sdk"]) assert.ok((await c.context("x", { format: to })).manifest, `${format} #${k} as ${to}`);
      assert.ok((await c.timeline("x")).items.length > 0);
      const chain = await c.resolve("x");
      assert.ok(chain.head, `${format} #${k}: a chain`);
    }
  }
  assert.ok(compacted >= 16, `${compacted} compactions`);
  assert.ok(refused < 10, `${refused} cases refused`);
});
