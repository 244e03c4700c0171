import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { openDatabase } from "../../src/db/client";
import { KeyRepository } from "../../src/keys/keys";
import { procStat } from "../../providers/local/procfs";
import { freshServerDatabaseUrl } from "./database";
import { killProcessesUnder } from "./process";

/**
 * What a test that kills and restarts the service on one data directory needs: the
 * directory (removed at cleanup), an organization's key made beforehand, and the
 * command and environment to spawn `serve` with (the PostgreSQL server's fresh database
 * when TEST_DATABASE=postgres). Sandboxes outlive services by design, so the cleanup
 * also kills any sandbox left in the directory if the test fails half-way.
 */
export async function restartableService(name: string, cleanup: (() => unknown)[]): Promise<{ dataDir: string; key: string; cmd: string[]; env: Record<string, string> }> {
  const dataDir = mkdtempSync(join(tmpdir(), `sbx-${name}-`));
  cleanup.push(() => {
    killProcessesUnder(dataDir);
    rmSync(dataDir, { recursive: true, force: true });
  });
  cleanup.push(() => {
    const root = join(dataDir, "sandboxes");
    for (const d of existsSync(root) ? readdirSync(root) : []) {
      try {
        const st = JSON.parse(readFileSync(join(root, d, "state.json"), "utf8")) as { initPid: number; initStart: number };
        if (procStat(st.initPid)?.startTime === st.initStart) process.kill(st.initPid, "SIGKILL");
      } catch {
        // Already gone, or never started.
      }
    }
  });
  const server = await freshServerDatabaseUrl();
  if (server) cleanup.push(() => server.drop());
  const database = await openDatabase({ url: server?.url, dataDir });
  const keys = new KeyRepository(database.db);
  const org = await keys.createOrganization(name);
  const { key } = await keys.createKey({ organizationId: org.id, name: "t" });
  await database.close();
  const env = { DATA_DIR: dataDir, BOOTSTRAP: "false", ADMIN_TOKEN: "t", LOG_LEVEL: "info", ...(server ? { DATABASE_URL: server.url } : {}) };
  return { dataDir, key, cmd: [process.execPath, "src/main.ts", "serve"], env };
}
