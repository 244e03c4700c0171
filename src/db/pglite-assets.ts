// PGlite normally finds its wasm and data files next to its JS module. Inside a
// `bun build --compile` binary there is no such directory, so the files are embedded
// with `type: "file"` imports and handed to PGlite explicitly. The same path runs
// in development, so the compiled binary is not a special case.
import pgliteWasmPath from "@electric-sql/pglite/pglite.wasm" with { type: "file" };
import initdbWasmPath from "@electric-sql/pglite/initdb.wasm" with { type: "file" };
import fsBundlePath from "@electric-sql/pglite/pglite.data" with { type: "file" };

let compiled: Promise<{ pgliteWasmModule: WebAssembly.Module; initdbWasmModule: WebAssembly.Module; fsBundle: Blob }> | undefined;

export function pgliteAssets() {
  compiled ??= (async () => {
    const [pgliteWasmModule, initdbWasmModule] = await Promise.all([
      WebAssembly.compile(await Bun.file(pgliteWasmPath).arrayBuffer()),
      WebAssembly.compile(await Bun.file(initdbWasmPath).arrayBuffer()),
    ]);
    return { pgliteWasmModule, initdbWasmModule, fsBundle: Bun.file(fsBundlePath) };
  })();
  return compiled;
}
