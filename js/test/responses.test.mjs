// The OpenAI Responses API's items, in and out: what a client hands in
// (`append` with `format: "openai-responses"`, `fromOpenAiResponses`) comes
// back from `context` in the same format unchanged in meaning.
import { test } from "node:test";
import assert from "node:assert/strict";
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

test("Responses items: an assistant message and the calls after it are one turn, reasoning is not stored, an error result keeps its mark, files leave theirs", async () => {
  const events = f.fromOpenAiResponses([
    { role: "developer", content: "Be brief." },
    { role: "user", content: [{ type: "input_text", text: "Weather?" }, { type: "input_file", filename: "trip.pdf", file_id: "f1" }, { type: "input_image", image_url: "https://x/y.png", detail: "auto" }] },
    { type: "reasoning", id: "rs_1", summary: [{ type: "summary_text", text: "private" }] },
    { type: "message", role: "assistant", id: "m1", status: "completed", content: [{ type: "output_text", text: "Checking.", annotations: [] }, { type: "refusal", refusal: "Not the log." }] },
    { type: "function_call", call_id: "c1", name: "weather", arguments: "{\"city\":\"Oslo\"}" },
    { type: "function_call_output", call_id: "c1", output: "[error] service down" },
    { type: "reasoning", id: "rs_2", summary: [] },
  ], { conversation: "c", afterSeq: 4 });
  assert.deepEqual(events.map((e) => [e.sourceSeq, e.role, e.parts]), [
    [5, "developer", [{ type: "text", text: "Be brief." }]],
    [6, "user", [{ type: "text", text: "Weather?" }, { type: "text", text: "[file file trip.pdf]" }, { type: "text", text: "[file image]" }]],
    [7, "assistant", [{ type: "text", text: "Checking.\nNot the log." }, { type: "toolCall", callId: "c1", name: "weather", arguments: "{\"city\":\"Oslo\"}" }]],
    [8, "tool", [{ type: "toolResult", callId: "c1", name: "", content: "[error] service down", isError: false }]],
  ]);
});

test("Responses items foldline cannot store are refused by name, and nothing is written", async () => {
  const cases = [
    [[{ type: "web_search_call", id: "ws_1", status: "completed" }], 'item 1: "web_search_call" items are not imported: foldline stores messages, function and custom tool calls and their outputs'],
    [[{ role: "user", content: "hi" }, { type: "item_reference", id: "msg_1" }], 'item 2: "item_reference" items are not imported: foldline stores messages, function and custom tool calls and their outputs'],
    [[{ type: "function_call", name: "x", arguments: "{}" }], "item 1: call_id must be a non-empty string"],
    [[{ type: "function_call_output", call_id: "", output: "x" }], "item 1: call_id must be a non-empty string"],
    [[{ type: "custom_tool_call", call_id: "k", input: "x" }], "item 1: name must be a non-empty string"],
    [[{ role: "tool", content: "x" }], 'item 1: unknown role "tool"'],
    [[{ role: "user", content: [{ type: "text", text: "chat spelling" }] }], 'item 1: content[0]: unsupported content part "text"'],
    [[{ role: "user", content: 7 }], "item 1: content must be a string or an array of content parts"],
    [[{}], "item 1: an item needs a type or a role"],
    [["hi"], "item 1: an item is a JSON object"],
  ];
  for (const [items, message] of cases) {
    const c = compactor();
    await assert.rejects(c.append("c", { format: "openai-responses", messages: items }), (e) => {
      assert.equal(e.code, "invalid_request");
      assert.equal(e.message, `invalid_request: ${message}`);
      return true;
    });
    assert.equal(await c.position("c"), 0, "nothing written");
  }
});
