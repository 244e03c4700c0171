import { randomBytes } from "node:crypto";
import { existsSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";

/**
 * How the CLI reaches the service that owns an embedded data directory: the service
 * writes its admin URL and a credential of its own into DATA_DIR when it starts and
 * removes them when it stops. The CLI, finding the directory locked, sends its command
 * to that URL instead of opening the database a second time.
 *
 * Threat: the credential grants the admin API. It is random per start, lives only in a
 * 0600 file inside the 0700 data directory (readable by the service's user, who can read
 * the database anyway), and dies with the process that made it.
 */
export interface AdminEndpoint {
  url: string;
  token: string;
  pid: number;
}

export const ADMIN_ENDPOINT_FILE = "admin-endpoint.json";

export function newLocalAdminToken(): string {
  return "local-" + randomBytes(32).toString("hex");
}

export function writeAdminEndpoint(dataDir: string, endpoint: AdminEndpoint): void {
  const file = join(dataDir, ADMIN_ENDPOINT_FILE);
  // Written aside and renamed, so a reader never sees half a file.
  const tmp = `${file}.${process.pid}.tmp`;
  writeFileSync(tmp, JSON.stringify(endpoint), { mode: 0o600 });
  renameSync(tmp, file);
}

/** Removes the file if it is this process's (a newer owner's must stay). */
export function removeAdminEndpoint(dataDir: string, pid = process.pid): void {
  const current = readAdminEndpoint(dataDir);
  if (current?.pid === pid) rmSync(join(dataDir, ADMIN_ENDPOINT_FILE), { force: true });
}

export function readAdminEndpoint(dataDir: string): AdminEndpoint | undefined {
  const file = join(dataDir, ADMIN_ENDPOINT_FILE);
  if (!existsSync(file)) return undefined;
  try {
    const v = JSON.parse(readFileSync(file, "utf8")) as AdminEndpoint;
    return typeof v.url === "string" && typeof v.token === "string" && Number.isInteger(v.pid) ? v : undefined;
  } catch {
    return undefined;
  }
}
