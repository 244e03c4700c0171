// The embedded database's own thread (see pglite-thread.ts for why). Runs one PGlite
// instance and answers the service thread's requests in the order PGlite's own locks
// give them; notifications on channels the service listens to are posted back.
import { PGlite, type Transaction } from "@electric-sql/pglite";
import { type Reply, type Request, serializeError } from "./pglite-protocol";

declare const self: Worker;

let db: PGlite | undefined;
/** Open transactions: PGlite's transaction object, how to end it, and how it ended. */
const transactions = new Map<number, { tx: Transaction; end: (commit: boolean) => void; outcome: Promise<void> }>();
const unlisteners = new Map<string, () => Promise<void>>();
let nextTx = 1;

const reply = (r: Reply) => self.postMessage(r);
const identity = (v: unknown) => v;
/** Identity parsers per set of type OIDs: drizzle sends the same few sets with every query. */
const parsersFor = new Map<string, Record<number, typeof identity>>();
function rawParsers(types: number[]): Record<number, typeof identity> {
  const key = types.join(",");
  let parsers = parsersFor.get(key);
  if (!parsers) parsersFor.set(key, (parsers = Object.fromEntries(types.map((t) => [t, identity]))));
  return parsers;
}

function open(): PGlite {
  if (!db) throw new Error("the embedded database is not open");
  return db;
}

/** The client a query runs on: the transaction's when it names one. */
function on(tx: number | undefined): Pick<Transaction, "query" | "exec"> {
  if (tx === undefined) return open();
  const t = transactions.get(tx);
  if (!t) throw new Error(`transaction ${tx} is not open`);
  return t.tx;
}

/** Opens a transaction and holds it until its `end` request; resolves with its number once inside. */
function begin(): Promise<number> {
  const id = nextTx++;
  return new Promise<number>((inside, failedToOpen) => {
    let entered = false;
    let end!: (commit: boolean) => void;
    const ended = new Promise<boolean>((r) => (end = r));
    // PGlite starts the callback after an await, so `outcome` is set by then.
    const outcome: Promise<void> = open()
      .transaction(async (tx) => {
        entered = true;
        transactions.set(id, { tx, end, outcome });
        inside(id);
        // PGlite commits when this returns and rolls back when it throws.
        if (!(await ended)) throw ROLLBACK;
      })
      .then(
        () => undefined,
        (e) => {
          if (!entered) failedToOpen(e);
          else if (e !== ROLLBACK) throw e;
        },
      )
      .finally(() => transactions.delete(id));
    outcome.catch(() => {}); // reported to the `end` request
  });
}
const ROLLBACK = Symbol("rollback");

async function handle(m: Request): Promise<unknown> {
  switch (m.op) {
    case "open":
      db = await PGlite.create({ ...m.open });
      return undefined;
    case "query": {
      const parsers = m.rawTypes ? rawParsers(m.rawTypes) : undefined;
      return on(m.tx).query(m.sql, m.params, { rowMode: m.rowMode, parsers, blob: m.blob });
    }
    case "exec":
      return on(m.tx).exec(m.sql);
    case "begin":
      return begin();
    case "end": {
      const t = transactions.get(m.tx);
      if (!t) throw new Error(`transaction ${m.tx} is not open`);
      t.end(m.commit);
      // Answered once PGlite has committed or rolled back, with the commit's error if any.
      return t.outcome;
    }
    case "listen": {
      if (!unlisteners.has(m.channel)) unlisteners.set(m.channel, await open().listen(m.channel, (payload) => reply({ id: 0, notify: m.channel, payload })));
      return undefined;
    }
    case "unlisten":
      await unlisteners.get(m.channel)?.();
      unlisteners.delete(m.channel);
      return undefined;
    case "dump":
      return open().dumpDataDir("none");
    case "close":
      await db?.close();
      db = undefined;
      return undefined;
  }
}

self.onmessage = (e: MessageEvent<Request>) => {
  const m = e.data;
  handle(m).then(
    (value) => reply({ id: m.id, ok: true, value }),
    (err) => reply({ id: m.id, ok: false, error: serializeError(err) }),
  );
};
