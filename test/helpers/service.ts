import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { RouteModule } from "../../src/http/route-module";
import { loadConfig } from "../../src/config";
import type { Logger } from "../../src/log";
import { keyJson } from "../../src/keys/admin-routes";
import type { NewKey } from "../../src/keys/keys";
import { type RunningServer, startServer } from "../../src/server";
import { contractObserver } from "./contract";
import { freshDatabase } from "./database";
import { killProcessesUnder } from "./process";

export const ADMIN_TOKEN = "test-admin-token";

export interface TestService {
  server: RunningServer;
  url: string;
  dataDir: string;
  /** Creates an organization and returns its id. */
  org(name?: string): Promise<string>;
  /** Creates a key in an organization and returns the plaintext. */
  key(organizationId: string, opts?: Partial<NewKey>): Promise<{ key: string; id: string }>;
  /** fetch() against the service. */
  fetch(path: string, init?: RequestInit): Promise<Response>;
  close(): Promise<void>;
}

/**
 * The real service, in-process, listening on a free 127.0.0.1 port, on a fresh
 * database (PGlite, or PostgreSQL with TEST_DATABASE_URL). Extra env vars configure it.
 */
export async function startTestService(env: Record<string, string> = {}, opts: { modules?: RouteModule[]; checkContract?: boolean; log?: Logger } = {}): Promise<TestService> {
  const dataDir = mkdtempSync(join(tmpdir(), "gw-test-"));
  const { database, drop } = await freshDatabase();
  let server: RunningServer;
  try {
    const config = loadConfig({
      PORT: "0",
      HOST: "127.0.0.1",
      DATA_DIR: dataDir,
      LOG_LEVEL: process.env.TEST_LOG_LEVEL ?? "silent",
      BOOTSTRAP: "false",
      ADMIN_TOKEN,
      EGRESS_ALLOW_CIDRS: "127.0.0.0/8,::1/128",
      // Test files keep many 2 GB sandboxes alive at once (memory limits, not use); the
      // host admission (docs/sandboxes.md: Sandbox quotas) is tested where a test sets it.
      SANDBOX_HOST_MEMORY_SHARE: "1000",
      PATH: process.env.PATH,
      HOME: process.env.HOME,
      ...env,
    });
    server = await startServer(config, { database, modules: opts.modules, log: opts.log, observeResponses: opts.checkContract === false ? undefined : contractObserver });
  } catch (err) {
    // A service that failed to start (a bad setting, a port in use) leaves nothing behind.
    await drop();
    rmSync(dataDir, { recursive: true, force: true });
    throw err;
  }
  let n = 0;
  return {
    server,
    url: server.url,
    dataDir,
    async org(name) {
      return (await server.services.keys.createOrganization(name ?? `org-${Date.now()}-${n++}`)).id;
    },
    async key(organizationId, opts = {}) {
      const { record, key } = await server.services.keys.createKey({ organizationId, name: "test", ...opts });
      return { key, id: keyJson(record).id };
    },
    fetch(path, init) {
      return fetch(server.url + path, init);
    },
    async close() {
      await server.stop();
      await drop();
      // Sandboxes outlive the service by design; the test's ones go with its data dir.
      killProcessesUnder(dataDir);
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}
