// Database-independent: classifies errors and drives the availability tracker with a fake database.
import { expect, test } from "bun:test";
import { DatabaseAvailability, faultAwareLogger } from "../../src/db/availability";
import { type DbFaultKind, dbFaultOf, registerDatabase } from "../../src/db/faults";
import { errorBody, toApiError } from "../../src/http/errors";
import { createLogger } from "../../src/log";

/** What drizzle throws: its own error with the driver's as `cause`. */
const wrapped = (cause: object) => Object.assign(new Error("Failed query: insert into t ..."), { query: "insert into t ...", params: [], cause: Object.assign(new Error((cause as { message?: string }).message ?? "x"), cause) });
const bare = (fields: object) => Object.assign(new Error((fields as { message?: string }).message ?? "x"), fields);

test("driver errors are classified as unreachable or full, whatever wraps them; others are not faults", () => {
  const cases: [object, DbFaultKind | undefined, string | undefined][] = [
    [{ code: "ECONNREFUSED", errno: -111, message: "connect ECONNREFUSED 127.0.0.1:5432" }, "unreachable", "connection refused"],
    [{ code: "CONNECTION_CLOSED", message: "write CONNECTION_CLOSED 127.0.0.1:5432" }, "unreachable", "connection closed"],
    [{ code: "CONNECT_TIMEOUT", message: "write CONNECT_TIMEOUT 10.0.0.1:5432" }, "unreachable", "connection timed out"],
    [{ code: "57P01", message: "terminating connection due to administrator command" }, "unreachable", "terminating connection due to administrator command"],
    [{ code: "57P03", message: "" }, "unreachable", "server not accepting connections yet (starting up or shutting down)"],
    [{ code: "08006", message: "" }, "unreachable", "connection failure"],
    [{ code: "53100", message: 'could not extend file "base/5/1": No space left on device' }, "full", 'could not extend file "base/5/1": No space left on device'],
    [{ code: "ENOSPC", errno: -28, message: "ENOSPC: no space left on device, write" }, "full", "ENOSPC: no space left on device, write"],
    [{ name: "ErrnoError", errno: 51, message: "FS error" }, "full", "no space left on device"],
    [{ code: "23505", message: "duplicate key value violates unique constraint" }, undefined, undefined],
    [{ code: "ENOENT", message: "no such file" }, undefined, undefined],
    [{ message: "boom" }, undefined, undefined],
  ];
  for (const [cause, kind, reason] of cases) {
    const fault = dbFaultOf(wrapped(cause));
    expect({ cause, kind: fault?.kind, reason: fault?.reason }).toEqual({ cause, kind, reason });
  }
  expect(dbFaultOf(undefined)).toBeUndefined();
  // The same codes from elsewhere (a webhook receiver down, a sandbox's disk) are not the database's...
  expect(dbFaultOf(bare({ code: "ECONNREFUSED", message: "connect ECONNREFUSED 127.0.0.1:8080", port: 8080 }))).toBeUndefined();
  expect(dbFaultOf(bare({ code: "ENOSPC", path: "/srv/other/file" }))).toBeUndefined();
  expect(dbFaultOf(bare({ code: "53100" }))).toBeUndefined();
  // ...unless they come from the database's own address or directory, or the server itself.
  registerDatabase({ port: 54329 });
  registerDatabase({ dataDir: "/srv/gw-data/pg" });
  expect(dbFaultOf(bare({ code: "ECONNREFUSED", message: "connect ECONNREFUSED 127.0.0.1:54329", port: 54329 }))?.kind).toBe("unreachable");
  expect(dbFaultOf(bare({ code: "ENOSPC", path: "/srv/gw-data/pg/base/5/1" }))?.kind).toBe("full");
  expect(dbFaultOf(bare({ code: "57P01", severity: "FATAL" }))?.kind).toBe("unreachable");
  expect(dbFaultOf(bare({ code: "CONNECTION_ENDED" }))?.kind).toBe("unreachable");
  expect(dbFaultOf("ECONNREFUSED")).toBeUndefined();
  // A cycle in `cause` does not loop.
  const a: { cause?: unknown } = new Error("a");
  a.cause = a;
  expect(dbFaultOf(a)).toBeUndefined();
});

test("a fault renders as 503 with Retry-After in every family's shape, without driver text", () => {
  const err = toApiError(wrapped({ code: "ECONNREFUSED", message: "connect ECONNREFUSED 10.1.2.3:5432" }));
  expect(err.status).toBe(503);
  expect(err.options.headers).toEqual({ "retry-after": "5" });
  expect(err.message).not.toContain("10.1.2.3");
  expect(toApiError(wrapped({ code: "53100", message: "could not extend file" })).options.headers).toEqual({ "retry-after": "30" });
  expect(errorBody("flat", err)).toEqual({ error: err.message });
  expect(errorBody("chat", err)).toEqual({ error: { message: err.message, type: "server_error", param: null, code: "database_unavailable" } });
  expect(errorBody("messages", err)).toEqual({ type: "error", error: { type: "api_error", message: err.message } });
  expect(errorBody("agent", err)).toEqual({ error: { type: "api_error", message: err.message } });
  expect(errorBody("genvendor", err)).toEqual({ error: { code: 503, message: err.message, status: "UNAVAILABLE" } });
  expect(errorBody("sandbox", err)).toEqual({ code: 503, message: err.message });
  // Anything else is still a 500 that names nothing.
  expect(toApiError(new Error("boom")).status).toBe(500);
});

function capture() {
  const lines: string[] = [];
  return { lines, log: createLogger("info", {}, { write: (l) => void lines.push(l), flush() {} }) };
}

test("many failures log one line; readiness follows the database and recovers without a restart", async () => {
  const { lines, log } = capture();
  let up = false;
  const database = { kind: "postgres" as const, location: "127.0.0.1:5999", ping: async () => void (up || (() => { throw wrapped({ code: "ECONNREFUSED", message: "connect ECONNREFUSED 127.0.0.1:5999" }); })()) };
  const availability = new DatabaseAvailability(database, log, { probeMs: 20 });
  const service = faultAwareLogger(log, () => availability);
  try {
    for (let i = 0; i < 50; i++) service.error("request failed", { err: wrapped({ code: "ECONNREFUSED", message: "connect ECONNREFUSED 127.0.0.1:5999" }) });
    service.warn("api key cache sync failed; will retry", { err: wrapped({ code: "CONNECTION_CLOSED", message: "" }) });
    service.error("something else", { err: new Error("unrelated") });
    expect(lines.filter((l) => l.includes('"level":"error"')).map((l) => JSON.parse(l).msg)).toEqual(["database unreachable at 127.0.0.1:5999: connection refused (ECONNREFUSED)", "something else"]);
    expect(await availability.ready()).toBe(false);
    up = true;
    // The background probe notices by itself, without anyone asking /readyz.
    for (let i = 0; i < 200 && availability.fault; i++) await Bun.sleep(10);
    expect(availability.fault).toBeUndefined();
    expect(await availability.ready()).toBe(true);
    expect(lines.filter((l) => l.includes("database available again")).length).toBe(1);
    // A relapse right after (a connection attempt begun during the outage failing late): state, no new lines.
    const count = lines.length;
    service.error("request failed", { err: wrapped({ code: "ECONNREFUSED", message: "connect ECONNREFUSED 127.0.0.1:5999" }) });
    expect(availability.fault?.kind).toBe("unreachable");
    for (let i = 0; i < 200 && availability.fault; i++) await Bun.sleep(10);
    expect(availability.fault).toBeUndefined();
    expect(lines.length).toBe(count);
  } finally {
    availability.stop();
  }
});

test("a server that reported disk full stays not ready until no disk-full error came for the hold time", async () => {
  const { lines, log } = capture();
  const availability = new DatabaseAvailability({ kind: "postgres", location: "db:5432", ping: async () => {} }, log, { probeMs: 10_000, fullHoldMs: 150 });
  try {
    availability.report(wrapped({ code: "53100", message: "could not extend file" }));
    expect(JSON.parse(lines.at(-1)!).msg).toBe("database full at db:5432: could not extend file (53100)");
    expect(await availability.ready()).toBe(false);
    await Bun.sleep(200);
    expect(await availability.ready()).toBe(true);
  } finally {
    availability.stop();
  }
});
