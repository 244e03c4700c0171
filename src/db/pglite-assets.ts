// PGlite normally finds its wasm and data files next to its JS module. Inside a
// `bun build --compile` binary there is no such directory, so the files are embedded
// with `type: "file"` imports and handed to PGlite explicitly. The same path runs
// in development, so the compiled binary is not a special case.
import pgliteWasmPath from "@electric-sql/pglite/pglite.wasm" with { type: "file" };
import initdbWasmPath from "@electric-sql/pglite/initdb.wasm" with { type: "file" };
import fsBundlePath from "@electric-sql/pglite/pglite.data" with { type: "file" };

import { PGlite } from "@electric-sql/pglite";

/**
 * Server settings of the embedded database, on top of PGlite's own start parameters.
 * The usage meter appends a row per model request, so write-ahead log volume follows
 * the request rate (megabytes per second on a busy gateway):
 * - wal_init_zero=off: a new 16 MB log segment is not filled with zeros first. That fill
 *   cost about a fifth of the meter's CPU per row; PGlite already runs without fsync (-F),
 *   so the fill bought no durability here. Same choice PostgreSQL recommends for
 *   copy-on-write file systems.
 * - max_wal_size / min_wal_size: the standalone server checkpoints only when the log
 *   reaches max_wal_size (no time-based checkpoints without a checkpointer process); the
 *   default 1 GB of log in a self-hoster's data directory is more than this needs, and
 *   a checkpoint lets old segments be recycled instead of new ones created.
 * - shared_buffers=16MB (initdb's choice is 128MB): the buffer pool is WebAssembly memory
 *   that the server writes in full when it starts, so all of it is resident from the first
 *   second, 128 MB of a 280 MB process. The embedded database's files are on the local
 *   file system, whose page cache keeps what drops out of the pool; the service's working
 *   set (keys, models, recent usage rows) is a few megabytes.
 */
const SETTINGS = ["wal_init_zero=off", "max_wal_size=128MB", "min_wal_size=32MB", "shared_buffers=16MB"];

const START_PARAMS: readonly string[] = [...PGlite.defaultStartParams, ...SETTINGS.flatMap((s) => ["-c", s])];

type Assets = { pgliteWasmModule: WebAssembly.Module; initdbWasmModule?: WebAssembly.Module; fsBundle: Blob; startParams: string[] };

let server: Promise<WebAssembly.Module> | undefined;
let initdb: Promise<WebAssembly.Module> | undefined;

/**
 * What PGlite.create needs besides the data directory: wasm modules, file bundle, start
 * parameters. The initdb module only when a new data directory is made without the
 * prepared database: compiled, it is memory the service would hold for good, and an
 * existing or prepared directory never runs it (PGlite asks for it only to run initdb).
 */
export async function pgliteAssets(withInitdb = true): Promise<Assets> {
  server ??= compile(pgliteWasmPath);
  if (withInitdb) initdb ??= compile(initdbWasmPath);
  const [pgliteWasmModule, initdbWasmModule] = await Promise.all([server, withInitdb ? initdb : undefined]);
  return { pgliteWasmModule, initdbWasmModule, fsBundle: Bun.file(fsBundlePath), startParams: [...START_PARAMS] };
}

async function compile(path: string): Promise<WebAssembly.Module> {
  return WebAssembly.compile(await Bun.file(path).arrayBuffer());
}
