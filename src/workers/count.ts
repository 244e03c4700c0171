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
  const count = config.workers ?? (config.databaseUrl ? availableParallelism() : 1);
  if (count > 1 && !config.databaseUrl) {
    throw new ConfigError(`WORKERS=${count} needs DATABASE_URL: the embedded database belongs to one process; set DATABASE_URL to a PostgreSQL server, or WORKERS=1`);
  }
  if (count > 1 && config.sandboxes.nodeUrl) {
    const url = new URL(config.sandboxes.nodeUrl);
    const port = Number(url.port || (url.protocol === "https:" ? 443 : 80));
    if (port === config.port) throw new ConfigError(`SANDBOX_NODE_URL's port (${port}) is PORT: with several workers the sandbox-node process listens apart from them; give it a port of its own`);
  }
  return count;
}
