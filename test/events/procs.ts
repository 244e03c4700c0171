import postgres from "postgres";
import { withDatabase } from "../helpers/database";
import { ADMIN_TOKEN } from "../helpers/service";

export const ROOT = new URL("../..", import.meta.url).pathname;

/** Environment of a real service process in these tests. */
export function serviceEnv(extra: Record<string, string>): Record<string, string> {
  return {
    BOOTSTRAP: "false",
    ADMIN_TOKEN,
    LOG_LEVEL: "info",
    EGRESS_ALLOW_CIDRS: "127.0.0.0/8,::1/128",
    ...extra,
  };
}

/**
 * A fresh database on a real PostgreSQL server: TEST_DATABASE_URL when set, else the
 * local default. No server answering is a failure that names the package to install.
 */
export async function freshPostgres(): Promise<{ url: string; drop(): Promise<void> }> {
  const serverUrl = process.env.TEST_DATABASE_URL || "postgres://postgres@127.0.0.1:5432/test";
  const admin = postgres(serverUrl, { max: 1, onnotice: () => {}, connect_timeout: 5 });
  const name = `t_evt_${process.pid}_${Math.random().toString(36).slice(2, 10)}`;
  try {
    await admin.unsafe(`create database "${name}"`);
  } catch (e) {
    await admin.end({ timeout: 1 }).catch(() => {});
    throw new Error(
      `this test needs a real PostgreSQL server at ${serverUrl} (set TEST_DATABASE_URL to use another): ${(e as Error).message}. ` +
        "Install and start the Debian package postgresql.",
    );
  }
  return {
    url: withDatabase(serverUrl, name),
    async drop() {
      await admin.unsafe(`drop database if exists "${name}" with (force)`);
      await admin.end();
    },
  };
}
