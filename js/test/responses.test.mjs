// The OpenAI Responses API's items, in and out: what a client hands in
// (`append` with `format: "openai-responses"`, `fromOpenAiResponses`) comes
// back from `context` in the same format unchanged in meaning.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFile } from "node:fs/promises";
import * as f from "../dist/node.js";
import { fakeModel } from "./shared.mjs";

await f.init();

const declaration = { targetId: "agent", compactorId: "agent-compactor", budget: { kind: "chars", trigger: 2_000_000, retain: 1_000_000 } };
const compactor = () => f.createCompactor({ journal: new f.MemoryJournal(), model: fakeModel(), declaration });

test("property: random Responses items come back from context as they went in, unchanged in meaning", async () => {
  const seeded = (seed) => () => ((seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648);
  const words = ["plan", "Lisbon", "ünïcode", "😀", "\"quoted\"", "line\nbreak", "42", "<tag>"];
  for (let seed = 1; seed <= 40; seed++) {
    const r = seeded(seed);
    const pick = (xs) => xs[Math.floor(r() * xs.length)];
    const text = () => Array.from({ length: 1 + Math.floor(r() * 5) }, () => pick(words)).join(" ");
    const given = [];
    const meant = [];
    let n = 0;
    for (let k = 0; k < 12; k++) {
      const kind = pick(["system", "user", "assistant", "tools"]);
      if (kind !== "tools") {
        const t = text();
        // A string, or parts as a request (input_text) or a response (output_text) spells them.
        const parts = kind === "assistant" ? [{ type: "output_text", text: t, annotations: [] }] : [{ type: "input_text", text: t }];
        given.push(r() < 0.5 ? { role: kind, content: t } : { type: "message", role: kind, content: parts, ...(kind === "assistant" ? { id: `msg_${n++}`, status: "completed" } : {}) });
        meant.push({ role: kind, content: t });
        continue;
      }
      // One response's output: reasoning (not stored), perhaps text, then calls.
      given.push({ type: "reasoning", id: `rs_${n++}`, summary: [] });
      if (r() < 0.5) {
        const t = text();
        given.push({ type: "message", role: "assistant", id: `msg_${n++}`, status: "completed", content: [{ type: "output_text", text: t, annotations: [] }] });
        meant.push({ role: "assistant", content: t });
      }
      const calls = Array.from({ length: 1 + Math.floor(r() * 2) }, () => {
        const callId = `call_${seed}_${n++}`;
        return r() < 0.5
          ? { type: "function_call", id: `fc_${n}`, call_id: callId, name: "tool", arguments: JSON.stringify({ city: text() }), status: "completed" }
          : { type: "custom_tool_call", id: `ctc_${n}`, call_id: callId, name: "grep", input: text() };
      });
      for (const c of calls) {
        given.push(c);
        meant.push(c.type === "function_call"
          ? { type: c.type, call_id: c.call_id, name: c.name, arguments: c.arguments }
          : { type: c.type, call_id: c.call_id, name: c.name, input: c.input });
      }
      for (const c of calls) {
        const out = text();
        const type = c.type === "function_call" ? "function_call_output" : "custom_tool_call_output";
        given.push({ type, call_id: c.call_id, output: r() < 0.5 ? out : [{ type: "input_text", text: out }] });
        meant.push({ type, call_id: c.call_id, output: out });
      }
    }
    const c = compactor();
    await c.append("c", { format: "openai-responses", messages: given });
    assert.deepEqual((await c.context("c", { format: "openai-responses" })).messages, meant, `seed ${seed}`);
    // The same conversation read as chat messages keeps every call and result.
    const chat = (await c.context("c", { format: "openai" })).messages;
    assert.equal(chat.flatMap((m) => m.tool_calls ?? []).length, meant.filter((m) => m.type?.endsWith("call")).length, `seed ${seed}`);
  }
});

// One list of cases for both hosts (the Rust host's
// `openai_responses_items_import_as_the_shared_cases_say`).
test("OpenAI Responses items import as the shared cases say, as in the Rust host; nothing is written on a refusal", async () => {
  const doc = JSON.parse(await readFile(new URL("../../tests/import/openai-responses.json", import.meta.url), "utf8"));
  assert.ok(doc.cases.length >= 26);
  const canonical = (p) => Object.fromEntries(Object.entries(p).filter(([k, v]) => !((k === "isError" || k === "custom") && v === false)));
  for (const c of doc.cases) {
    let events;
    try {
      events = f.fromOpenAiResponses(c.items, { conversation: "c" });
    } catch (e) {
      assert.ok(c.refused, `${c.name}: refused: ${e.message}`);
      assert.equal(e.code, "invalid_request", c.name);
      assert.equal(e.message, `invalid_request: ${c.refused}`, c.name);
      const through = compactor();
      await assert.rejects(through.append("c", { format: "openai-responses", messages: c.items }), { code: "invalid_request" });
      assert.equal(await through.position("c"), 0, `${c.name}: nothing written`);
      continue;
    }
    assert.equal(c.refused, undefined, `${c.name}: accepted`);
    assert.deepEqual(events.map((e) => ({ role: e.role, parts: e.parts.map(canonical) })), c.drafts, c.name);
  }
});
