import { expect } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { and, asc, eq, inArray } from "drizzle-orm";
import { events } from "../../src/events/schema";
import { sandboxServiceOf } from "../../src/sandboxes";
import { sandboxes } from "../../src/sandboxes/schema";
import type { TestService } from "../helpers/service";

/**
 * The local backend needs bubblewrap. Without it the suite must fail (not skip) with a
 * message naming the Debian package.
 */
export function requireBubblewrap(): void {
  if (!Bun.which("bwrap")) throw new Error("bwrap not found: install the Debian package 'bubblewrap' to run the sandbox tests");
}

export interface Api {
  (method: string, path: string, body?: unknown, headers?: Record<string, string>): Promise<{ status: number; body: any; text: string }>;
}

/** JSON calls against the service with one API key (Bearer by default). */
export function apiFor(svc: { url: string } | TestService, key: string, style: "bearer" | "x-api-key" = "bearer"): Api {
  return async (method, path, body, headers = {}) => {
    const auth: Record<string, string> = style === "bearer" ? { authorization: `Bearer ${key}` } : { "x-api-key": key };
    const res = await fetch(svc.url + path, {
      method,
      headers: { ...auth, ...(body !== undefined ? { "content-type": "application/json" } : {}), ...headers },
      body: body !== undefined ? JSON.stringify(body) : undefined,
    });
    const text = await res.text();
    let parsed: unknown = undefined;
    try {
      parsed = text ? JSON.parse(text) : undefined;
    } catch {
      parsed = undefined;
    }
    return { status: res.status, body: parsed, text };
  };
}

/** Events of one sandbox, oldest first, straight from the event log table. */
export async function eventsOf(svc: TestService, sandboxId: string, type?: string) {
  // process.completed events are written after the response; wait for those in flight.
  await sandboxServiceOf(svc.server.services).flush();
  const db = svc.server.services.db;
  return db
    .select()
    .from(events)
    .where(type ? and(eq(events.resourceId, sandboxId), eq(events.type, type)) : eq(events.resourceId, sandboxId))
    .orderBy(asc(events.id));
}

/** Destroys every live sandbox of a test service (sandboxes outlive the service by design). */
export async function destroyAll(svc: TestService): Promise<void> {
  const s = svc.server.services;
  const rows = await s.db.select().from(sandboxes).where(inArray(sandboxes.status, ["running", "paused"]));
  for (const row of rows) {
    const inst = s.registry.instance(row.backend, "sandbox");
    await inst?.instance.destroy(row.id, row.backendState).catch(() => {});
  }
}

/**
 * Host path of `path` inside a running local sandbox of the service with `dataDir`:
 * its writable places are tmpfs mounts in the sandbox's own mount namespace, reached
 * through its pid 1's root.
 */
export function pathInSandbox(dataDir: string, sandboxId: string, path: string): string {
  try {
    const { initPid } = JSON.parse(readFileSync(join(dataDir, "sandboxes", sandboxId, "state.json"), "utf8")) as { initPid: number };
    return `/proc/${initPid}/root${path}`;
  } catch {
    return join(dataDir, "missing", path);
  }
}

export function expectError(r: { status: number; body: any }, status: number, message?: string | RegExp): void {
  expect({ status: r.status, code: r.body?.code }).toEqual({ status, code: status });
  expect(typeof r.body.message).toBe("string");
  if (typeof message === "string") expect(r.body.message).toBe(message);
  else if (message) expect(r.body.message).toMatch(message);
}

export async function waitUntil(fn: () => Promise<boolean>, timeoutMs: number, what: string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await fn()) return;
    await Bun.sleep(50);
  }
  throw new Error(`timed out waiting for ${what}`);
}
