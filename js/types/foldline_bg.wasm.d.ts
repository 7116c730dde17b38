// `import wasm from "foldline/foldline_bg.wasm"`: the compiled core, as edge
// runtimes (workerd, Vercel Edge) import it, to pass to `init(wasm)`.
declare global {
  // eslint-disable-next-line @typescript-eslint/no-namespace
  namespace WebAssembly {
    // eslint-disable-next-line @typescript-eslint/no-empty-interface
    interface Module {}
  }
}
declare const module: WebAssembly.Module;
export default module;
