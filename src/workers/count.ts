import { availableParallelism } from "node:os";
import type { Config } from "../config";
import { ConfigError } from "../settings";

/**
 * How many service processes `serve` runs on PORT: WORKERS, else one per core with
 * DATABASE_URL and one on the embedded database.
 *
 * The embedded database (PGlite) is a database inside one process: it has exactly one
 * opener (DATA_DIR/gateway.lock), so a second process can neither open it nor share its
 * connections. Serving it from one owner for the others would put every statement of every
 * worker through that owner's one thread, which is the core the workers were meant to
 * free: on the embedded database the service stays one process.
 */
export function workerCount(config: Config): number {
  const nodePort = config.sandboxes.nodeUrl ? portOf(config.sandboxes.nodeUrl) : undefined;
  // A replica whose SANDBOX_NODE_URL names PORT (set up before workers existed) stays one
  // process unless WORKERS says otherwise: its node must answer on PORT.
  const count = config.workers ?? (config.databaseUrl && nodePort !== config.port ? availableParallelism() : 1);
  if (count > 1 && !config.databaseUrl) {
    throw new ConfigError(`WORKERS=${count} needs DATABASE_URL: the embedded database belongs to one process; set DATABASE_URL to a PostgreSQL server, or WORKERS=1`);
  }
  if (count > 1 && nodePort === config.port) {
    throw new ConfigError(`SANDBOX_NODE_URL's port (${nodePort}) is PORT: with several workers the sandbox-node process listens apart from them, at SANDBOX_NODE_URL's port; give it a port of its own, or set WORKERS=1`);
  }
  return count;
}

function portOf(url: string): number {
  const u = new URL(url);
  return Number(u.port || (u.protocol === "https:" ? 443 : 80));
}
