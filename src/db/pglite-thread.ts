import type { QueryOptions, Results, Transaction } from "@electric-sql/pglite";
import { pgliteAssets } from "./pglite-assets";
import { deserializeError, type OpenRequest, type Reply, type Request } from "./pglite-protocol";

/**
 * The thread's program. In the compiled binary every module is bundled into one file at
 * the root of its embedded file system, and the worker is a second entry point kept at its
 * path below src/ (scripts/build.ts), so it is found from that root.
 */
const WORKER_ENTRY = import.meta.url.startsWith("file:///$bunfs/") ? `${import.meta.dir}/db/pglite-worker.ts` : new URL("./pglite-worker.ts", import.meta.url).href;

type Call = Request extends infer R ? (R extends { id: number } ? Omit<R, "id"> : never) : never;

/**
 * The embedded database on a thread of its own (PGLITE_THREAD=true). PGlite is PostgreSQL
 * compiled to WebAssembly: every query runs synchronously on the thread that owns it, so
 * on the service's thread each usage row, event and key lookup is paid by the HTTP path
 * (a quarter of the gateway's main-thread time at load), and a burst of queries holds
 * back timers and sockets until it finishes (a query resolves as microtasks only).
 * Here the service thread only posts the SQL and awaits the answer. The price is a
 * thread hop per statement (a transaction of four statements makes five round trips),
 * which is why it is not the default: on a 2-core machine, where the other core is busy
 * anyway, it lowered webhook commits/s by about a quarter and did not raise the
 * gateway's throughput (docs/benchmarks.md).
 *
 * This is the part of PGlite's client interface that drizzle's PGlite driver and the
 * service use: `query` (drizzle's parsers are identity functions: the type OIDs they name
 * come back as text), `exec`, `transaction`, `listen`, `dumpDataDir`, `close`.
 */
export class PgliteThread {
  private readonly worker: Worker;
  private readonly pending = new Map<number, { resolve: (v: unknown) => void; reject: (e: Error) => void }>();
  private readonly listeners = new Map<string, Set<(payload: string) => void>>();
  private nextId = 1;
  private failure: Error | undefined;
  closed = false;

  private constructor() {
    this.worker = new Worker(WORKER_ENTRY);
    this.worker.onmessage = (e: MessageEvent<Reply>) => this.answer(e.data);
    // The thread died (out of memory, a WebAssembly trap): nothing it holds can be trusted,
    // so every waiting and later call fails with the reason.
    this.worker.onerror = (e: ErrorEvent) => this.fail(new Error(`the embedded database thread failed: ${e.message}`));
  }

  /** `isNew`: the directory has no database yet (initdb runs when no `loadDataDir` is given either). */
  static async create(dataDir: string, loadDataDir?: Blob, isNew = true): Promise<PgliteThread> {
    const t = new PgliteThread();
    const assets = await pgliteAssets(isNew && !loadDataDir);
    const open: OpenRequest = { dataDir, loadDataDir, ...assets, fsBundle: new Blob([await assets.fsBundle.arrayBuffer()]) };
    try {
      await t.call({ op: "open", open });
    } catch (e) {
      t.worker.terminate();
      throw e;
    }
    return t;
  }

  query<T>(sql: string, params?: unknown[], options?: QueryOptions): Promise<Results<T>> {
    return this.queryOn(undefined, sql, params, options);
  }

  exec(sql: string): Promise<Array<Results>> {
    return this.execOn(undefined, sql);
  }

  /** Runs `fn` in one transaction: committed when it returns, rolled back when it throws. */
  async transaction<T>(fn: (tx: Transaction) => Promise<T>): Promise<T> {
    const id = (await this.call({ op: "begin" })) as number;
    const tx = {
      closed: false,
      query: <R>(sql: string, params?: unknown[], options?: QueryOptions) => this.queryOn<R>(id, sql, params, options),
      sql: () => Promise.reject(new Error("tagged-template queries are not supported on the database thread")),
      exec: (sql: string) => this.execOn(id, sql),
      rollback: async () => {
        throw new Error("rollback() is not supported on the database thread: throw from the callback instead");
      },
      listen: () => Promise.reject(new Error("listen inside a transaction is not supported")),
    } as unknown as Transaction;
    let result: T;
    try {
      result = await fn(tx);
    } catch (e) {
      (tx as { closed: boolean }).closed = true;
      await this.call({ op: "end", tx: id, commit: false }).catch(() => {});
      throw e;
    }
    (tx as { closed: boolean }).closed = true;
    await this.call({ op: "end", tx: id, commit: true });
    return result;
  }

  /** Calls `fn` with each payload NOTIFY sends on `channel`; resolves with the function that stops it. */
  async listen(channel: string, fn: (payload: string) => void): Promise<() => Promise<void>> {
    let set = this.listeners.get(channel);
    if (!set) {
      set = new Set();
      this.listeners.set(channel, set);
      await this.call({ op: "listen", channel });
    }
    set.add(fn);
    return async () => {
      set.delete(fn);
      if (set.size === 0 && this.listeners.get(channel) === set) {
        this.listeners.delete(channel);
        if (!this.closed) await this.call({ op: "unlisten", channel });
      }
    };
  }

  dumpDataDir(compression?: "none"): Promise<Blob> {
    void compression; // always uncompressed, like the in-thread path's call
    return this.call({ op: "dump" }) as Promise<Blob>;
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    try {
      if (!this.failure) await this.call({ op: "close" });
    } finally {
      this.worker.terminate();
      this.fail(new Error("the embedded database is closed"));
    }
  }

  private queryOn<T>(tx: number | undefined, sql: string, params?: unknown[], options?: QueryOptions): Promise<Results<T>> {
    if (options?.serializers || options?.onNotice || options?.paramTypes) throw new Error("query options serializers, onNotice and paramTypes are not supported on the database thread");
    const rawTypes = options?.parsers ? Object.keys(options.parsers).map(Number) : undefined;
    return this.call({ op: "query", tx, sql, params, rowMode: options?.rowMode, rawTypes, blob: options?.blob }) as Promise<Results<T>>;
  }

  private execOn(tx: number | undefined, sql: string): Promise<Array<Results>> {
    return this.call({ op: "exec", tx, sql }) as Promise<Array<Results>>;
  }

  private call(c: Call): Promise<unknown> {
    if (this.failure) return Promise.reject(this.failure);
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      this.worker.postMessage({ ...c, id } as Request);
    });
  }

  private answer(r: Reply) {
    if ("notify" in r) {
      for (const fn of this.listeners.get(r.notify) ?? []) fn(r.payload);
      return;
    }
    const p = this.pending.get(r.id);
    if (!p) return;
    this.pending.delete(r.id);
    if (r.ok) p.resolve(r.value);
    else p.reject(deserializeError(r.error));
  }

  private fail(e: Error) {
    this.failure ??= e;
    for (const p of this.pending.values()) p.reject(this.failure);
    this.pending.clear();
  }
}
