// Both hosts convert alike: OpenAI chat messages, OpenAI Responses items,
// Anthropic and AI SDK messages, the shared cases (tests/import/*.json) mutated at random — fields dropped,
// replaced by other kinds of values, strings with quotes and control
// characters — go through the JS converter and through `foldline import`,
// and must come out the same: the same turns, or the same refusal word for
// word; then tool inputs written by hand go through both and must be
// stored as the same bytes. Seeded, so a failure repeats.
//   node test/servers/import-fuzz.mjs ../target/debug/foldline [cases per format]
import { readFileSync, writeFileSync, mkdtempSync, rmSync } from "node:fs";
import { spawnSync } from "node:child_process";
import { join } from "node:path";
import { tmpdir } from "node:os";

const js = new URL("../..", import.meta.url).pathname;
const f = await import(join(js, "dist", "node.js"));
await f.init();
const bin = process.argv[2] ?? join(js, "..", "target", "debug", "foldline");
const cases = Number(process.argv[3] ?? process.env.FOLDLINE_FUZZ_CASES ?? 150);

let seed = 7;
const r = () => ((seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648);
const pick = (xs) => xs[Math.floor(r() * xs.length)];
const atoms = [{ b: 1, a: 2 }, { 10: [1.5, -0, 1e21], 2: { z: "\u2028", y: 1e-7 } }, "a\u0001b", "q\"uote", "é\n", null, 0, 5, -1.5, true, false, "", "x", "function_call", "message", "assistant", "user", "tool", "input_text", "output_text", "text", "refusal", "input_file", "reasoning", "tool_use", "tool_result", "thinking", "image", "document", "tool-call", "tool-result", "json", "error-json", "error-text", "content", "execution-denied", "tool-approval-request", "tool-approval-response", [], {}, [{ type: "input_text", text: "t" }], [{ type: "text", text: "t" }]];
const keys = ["type", "role", "content", "call_id", "name", "arguments", "input", "output", "text", "filename", "refusal", "tool_calls", "tool_call_id", "function", "custom", "id", "tool_use_id", "is_error", "source", "media_type", "title", "toolCallId", "toolName", "value", "mediaType", "approvalId", "approved", "reason"];
function mutate(v) {
  if (Array.isArray(v)) {
    const a = v.map((x) => (r() < 0.4 ? mutate(x) : x));
    if (r() < 0.15 && a.length) a.splice(Math.floor(r() * a.length), 1);
    if (r() < 0.1) a.push(pick(atoms));
    return a;
  }
  if (v && typeof v === "object") {
    const o = { ...v };
    for (const k of Object.keys(o)) if (r() < 0.25) o[k] = r() < 0.5 ? pick(atoms) : mutate(o[k]);
    if (r() < 0.15) delete o[pick(Object.keys(o))];
    if (r() < 0.2) o[pick(keys)] = pick(atoms);
    return o;
  }
  return r() < 0.5 ? pick(atoms) : v;
}
// The journal's canonical form of a part: `isError` and `custom` only when
// true, every object's keys in order, as the core writes them — so a
// reasoning part's `data`, an object the core keeps as a value, compares
// by content: JavaScript keeps its keys in the sender's order (integer-like
// keys first), the Rust host in the core's.
const canon = (v) => Array.isArray(v) ? `[${v.map(canon).join(",")}]`
  : v && typeof v === "object" ? `{${Object.keys(v).sort().map((k) => `${JSON.stringify(k)}:${canon(v[k])}`).join(",")}}`
  : JSON.stringify(v);
const flags = (p) => Object.fromEntries(Object.entries(p).filter(([k, v]) => !((k === "isError" || k === "custom") && v === false)));
const turns = (ms) => canon(ms.map((m) => ({ role: m.role, parts: m.parts.map(flags) })));

const formats = [
  // `foldline import` without --format also takes foldline events: items with a `type` are left out.
  { name: "openai", file: "openai.json", field: "messages", convert: f.fromOpenAiMessages, args: [], skip: (x) => x && typeof x === "object" && "type" in x },
  { name: "openai-responses", file: "openai-responses.json", field: "items", convert: f.fromOpenAiResponses, args: ["--format", "openai-responses"], skip: () => false },
  { name: "anthropic", file: "anthropic.json", field: "messages", convert: f.fromAnthropicMessages, args: ["--format", "anthropic"], skip: () => false },
  { name: "ai-sdk", file: "ai-sdk.json", field: "messages", convert: f.fromAiSdkMessages, args: ["--format", "ai-sdk"], skip: () => false },
];
const dir = mkdtempSync(join(tmpdir(), "foldline-import-fuzz-"));
let failed = 0;
try {
  for (const fmt of formats) {
    const doc = JSON.parse(readFileSync(join(js, "..", "tests", "import", fmt.file), "utf8"));
    let run = 0, accepted = 0;
    while (run < cases) {
      const items = mutate(pick(doc.cases)[fmt.field]);
      if (!Array.isArray(items) || items.some(fmt.skip)) continue;
      run++;
      let ours;
      try {
        ours = turns(fmt.convert(items, { conversation: "default" }));
        accepted++;
      } catch (e) {
        ours = e.message.replace(/^invalid_request: /, "");
      }
      const file = join(dir, `${fmt.name}-${run}.json`), db = join(dir, `${fmt.name}-${run}.db`);
      writeFileSync(file, JSON.stringify(items));
      const imported = spawnSync(bin, ["--journal", db, "import", "--no-compact", ...fmt.args, file], { encoding: "utf8" });
      let theirs;
      if (imported.status === 0) {
        const c = spawnSync(bin, ["--journal", db, "context", "--messages"], { encoding: "utf8" });
        theirs = c.status === 0 ? turns(JSON.parse(c.stdout)) : /no conversation/.test(c.stderr) ? "[]" : `context: ${c.stderr.trim()}`;
      } else {
        theirs = imported.stderr.trim().replace(/^foldline: invalid_input: /, "").replace(`${file}: `, "");
      }
      if (ours !== theirs) {
        failed++;
        if (failed <= 10) console.log(`not ok - ${fmt.name}: ${JSON.stringify(items).slice(0, 300)}\n  js:   ${ours.slice(0, 300)}\n  rust: ${theirs.slice(0, 300)}`);
      }
    }
    console.log(`ok - ${fmt.name}: ${cases} mutated cases (${accepted} converted, the rest refused), the same in both hosts`);
  }
  // A tool's object input as its sender wrote it — numbers in every
  // spelling, escapes, repeated and integer-like keys, deep nesting — is
  // stored as JavaScript's JSON.stringify(JSON.parse(text)) writes it, by
  // both hosts: the texts are written by hand (not by JSON.stringify), one
  // AI SDK tool call each, all in one file.
  const numbers = ["0", "-0", "1", "-1", "1.0", "1.50", "2.5e-8", "1E21", "1e+21", "1e20", "123456789012345678901234567890", "0.1", "0.30000000000000004", "5e-324", "1.7976931348623157e308", "9007199254740993", "-0.0e0", "100e-2", "0.000001", "0.0000001"];
  const strings = ["\"\"", "\"a\\u0041\\/b\"", "\"\\u00e9\\u2028x\"", "\"tab\\tnl\\n\\u0001\\u001f\\u007f\"", "\"\\ud83d\\ude00 é ✓\"", "\"q\\\"\\\\\""];
  const keyNames = ["a", "b", "z", "0", "1", "2", "10", "01", "-1", "1.5", "4294967294", "4294967295", "__proto__", "é", ""];
  const value = (depth) => {
    const x = r();
    if (depth > 3 || x < 0.35) return pick(numbers);
    if (x < 0.55) return pick(strings);
    if (x < 0.62) return pick(["true", "false", "null"]);
    const n = Math.floor(r() * 5);
    const gap = () => pick(["", " ", "\n  "]);
    if (x < 0.78) return `[${gap()}${Array.from({ length: n }, () => value(depth + 1)).join(`,${gap()}`)}${gap()}]`;
    return `{${gap()}${Array.from({ length: n }, () => `${JSON.stringify(pick(keyNames))}${gap()}:${gap()}${value(depth + 1)}`).join(`,${gap()}`)}${gap()}}`;
  };
  const inputs = Array.from({ length: cases }, () => `{${Array.from({ length: 1 + Math.floor(r() * 4) }, () => `${JSON.stringify(pick(keyNames))}:${value(0)}`).join(",")}}`);
  const differing = [];
  // 50 a file: the context read back holds them all.
  for (let at = 0; at < inputs.length; at += 50) {
    const some = inputs.slice(at, at + 50);
    const text = `[${some.map((input, i) => `{"role":"assistant","content":[{"type":"tool-call","toolCallId":"c${i}","toolName":"f","input":${input}}]}`).join(",\n")}]`;
    const file = join(dir, `inputs-${at}.json`), db = join(dir, `inputs-${at}.db`);
    writeFileSync(file, text);
    const ours = f.fromAiSdkMessages(JSON.parse(text), { conversation: "default" }).map((e) => e.parts[0].arguments);
    const imported = spawnSync(bin, ["--journal", db, "import", "--no-compact", "--format", "ai-sdk", file], { encoding: "utf8" });
    const c = spawnSync(bin, ["--journal", db, "context", "--messages"], { encoding: "utf8" });
    const theirs = imported.status === 0 && c.status === 0 ? JSON.parse(c.stdout).flatMap((m) => m.parts.map((p) => p.arguments)) : [];
    if (theirs.length !== ours.length) differing.push([`${ours.length} inputs`, `${theirs.length} read back ${imported.stderr}${c.stderr}`, text]);
    else differing.push(...ours.map((a, i) => [a, theirs[i], some[i]]).filter(([a, b]) => a !== b));
  }
  failed += differing.length;
  for (const [a, b, input] of differing.slice(0, 5)) console.log(`not ok - a tool input as written: ${input.slice(0, 200)}\n  js:   ${a.slice(0, 200)}\n  rust: ${String(b).slice(0, 200)}`);
  console.log(`${differing.length ? "not ok" : "ok"} - ${inputs.length} tool inputs written by hand (numbers in every spelling, escapes, repeated and integer-like keys): stored alike by both hosts`);
} finally {
  rmSync(dir, { recursive: true, force: true });
}
console.log(`import fuzz: ${failed ? `${failed} differences` : "both hosts alike"}`);
if (failed) process.exit(1);
