// The messages between the service's thread and the thread that runs the embedded
// database (pglite-thread.ts <-> pglite-worker.ts). Values travel by structured clone
// (strings, numbers, bigint, Date, Uint8Array, Blob, plain objects and arrays).

export interface OpenRequest {
  dataDir: string;
  loadDataDir?: Blob;
  pgliteWasmModule: WebAssembly.Module;
  initdbWasmModule?: WebAssembly.Module;
  fsBundle: Blob;
  startParams: string[];
}

export type Request =
  | { id: number; op: "open"; open: OpenRequest }
  | {
      id: number;
      op: "query";
      tx?: number;
      sql: string;
      params?: unknown[];
      rowMode?: "array" | "object";
      /** Type OIDs returned as the server's text (drizzle's parsers are all `(v) => v`). */
      rawTypes?: number[];
      blob?: Blob;
    }
  | { id: number; op: "exec"; tx?: number; sql: string }
  /** Opens a transaction; the answer is its number, used by the queries inside it. */
  | { id: number; op: "begin" }
  | { id: number; op: "end"; tx: number; commit: boolean }
  | { id: number; op: "listen"; channel: string }
  | { id: number; op: "unlisten"; channel: string }
  | { id: number; op: "dump" }
  | { id: number; op: "close" };

export type Reply =
  | { id: number; ok: true; value: unknown }
  | { id: number; ok: false; error: SerializedError }
  | { id: 0; notify: string; payload: string };

/** An error with its message, name and the database's fields (code, detail, constraint...). */
export type SerializedError = { message: string; name?: string; stack?: string; [field: string]: unknown };

export function serializeError(e: unknown): SerializedError {
  if (!(e instanceof Error)) return { message: String(e) };
  const out: SerializedError = { message: e.message, name: e.name, stack: e.stack };
  for (const [k, v] of Object.entries(e)) if (v === null || ["string", "number", "boolean"].includes(typeof v)) out[k] = v;
  return out;
}

export function deserializeError(s: SerializedError): Error {
  const e = new Error(s.message);
  for (const [k, v] of Object.entries(s)) if (k !== "message" && k !== "stack") (e as unknown as Record<string, unknown>)[k] = v;
  // The worker's stack says where the database failed; ours (below it) says who asked.
  if (s.stack) e.stack = `${e.stack}\n    at [database thread] ${s.stack.split("\n").slice(1, 4).join(" ").trim()}`;
  return e;
}
