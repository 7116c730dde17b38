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
