// Where a Node cold start goes, inside one process: read the .wasm, compile
// it, import the package, init() with the compiled module, the first call.
//   node tests/bench/cold.mjs   (each run is a fresh process; run it several times)
const t0 = performance.now();
const { readFile } = await import("node:fs/promises");
const bytes = await readFile(new URL("../../js/pkg/foldline_bg.wasm", import.meta.url));
const t1 = performance.now();
const mod = await WebAssembly.compile(bytes);
const t2 = performance.now();
const f = await import(new URL("../../js/dist/index.js", import.meta.url).href);
const t3 = performance.now();
await f.init(mod);
const t4 = performance.now();
f.plan({ declaration: { targetId: "a", compactorId: "a-c" }, route: { conversation: "c", chat: "", sender: "" }, events: [] });
const t5 = performance.now();
console.log(JSON.stringify({ read: +(t1 - t0).toFixed(2), compile: +(t2 - t1).toFixed(2), importDist: +(t3 - t2).toFixed(2), init: +(t4 - t3).toFixed(2), firstCall: +(t5 - t4).toFixed(2), total: +(t5 - t0).toFixed(2) }));
