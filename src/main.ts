#!/usr/bin/env bun
/**
 * The one binary: `serve` (default) runs the service; `orgs` and `keys` administer
 * organizations and API keys on the configured database without a browser. On an
 * embedded database that a running service holds, they go through that service's admin
 * API (see keys/admin-client.ts): an embedded database has exactly one opener.
 */
import { parseArgs } from "node:util";
import { isSpendPeriod, SPEND_PERIODS, type SpendPeriod } from "./budgets/period";
import { surfaceScopes } from "./http/surfaces";
import { restartWithAllocatorTuned } from "./allocator";
import { type Config, loadConfig } from "./config";
import { DataDirLockedError } from "./db/data-dir";
import type { McpAllowList } from "./keys/keys";
import { workerCount } from "./workers/count";
import { templatesCommand, TEMPLATES_USAGE, TemplatesUsageError } from "./templates/cli";
import { MCP_USAGE, mcpCommand, McpUsageError } from "./mcp/cli";

// The service's modules (the route modules, the database client, the key administration)
// are imported where a command needs them, not here: `serve` replaces its process once
// before it starts (allocator.ts), and a process that loaded them all only to be replaced
// made every start load them twice.

/** Every route module's key scopes (for the usage text and `keys create --scopes`). */
async function allScopes(): Promise<string[]> {
  const { routeModules } = await import("./app");
  return surfaceScopes(routeModules.flatMap((m) => m.surfaces));
}

const usage = async () => `usage:
  gateway [serve]                         run the service (PORT, DATA_DIR, DATABASE_URL, ...)
  gateway orgs create <name> [--spending-limit <usd>] [--spending-period <p>]
                                          create an organization
  gateway orgs update <id|name> [--spending-limit <usd>|none] [--spending-period <p>]
                                          change an organization's budget
  gateway orgs list                       list organizations
  gateway orgs sandbox-quota <id|name> [--max-sandboxes <n>] [--max-memory-mb <n>] [--max-cpus <n>]
                                          set an organization's sandbox quota (an omitted limit: the default)
  gateway keys create --org <id|name> --name <label>
                      [--spending-limit <usd>] [--spending-period <p>] [--rpm <n>] [--tpm <n>]
                      [--expires-at <ISO date>] [--scopes a,b] [--mcp-servers a,b] [--mcp-tools s__t,...]
                                          create an API key (printed once);
                                          scopes: ${(await allScopes()).join(", ")}
  gateway keys update <key id> [--spending-limit <usd>|none] [--spending-period <p>]
                      [--rpm <n>|none] [--tpm <n>|none] [--mcp-servers a,b|*|none] [--mcp-tools s__t,...]
                                          change a key's limits and MCP allow list (docs/mcp.md)
  gateway keys list [--org <id|name>]     list keys (never their secrets)
  gateway keys revoke <key id>            revoke a key (stops working at once)
${TEMPLATES_USAGE}
${MCP_USAGE}
  gateway migrate                         apply database migrations and exit
  gateway healthcheck                     exit 0 when the local service answers /healthz (for containers)

Beside a running service on the same embedded DATA_DIR, orgs/keys commands go through
that service. Configuration is read from the environment; see docs/configuration.md.

A spending limit is in USD per period; <p> is daily, weekly, monthly (reset at 00:00 UTC;
weeks start on Monday) or none (never reset, the default).`;

/** The settings once read: a failure after that is explained with them (which setting names the path that failed). */
let loaded: Config | undefined;

async function main(argv: string[]): Promise<number> {
  const [command = "serve", sub, ...rest] = argv;
  if (command === "help" || command === "--help" || command === "-h") {
    console.log(await usage());
    return 0;
  }
  const config = (loaded = loadConfig());
  if (command === "healthcheck") {
    const res = await fetch(`http://127.0.0.1:${config.port}/healthz`).catch(() => undefined);
    return res?.ok ? 0 : 1;
  }
  if (command === "worker") {
    // Started by `serve` (workers/primary.ts): not a command for people, so not in USAGE.
    const { runWorker } = await import("./workers/worker");
    await runWorker(config, Number(sub), Number(rest[0] ?? 0));
    return -1;
  }
  if (command === "serve") {
    await restartWithAllocatorTuned(config);
    const workers = workerCount(config);
    if (workers > 1) {
      const { runPrimary } = await import("./workers/primary");
      await runPrimary(config, workers);
      return -1;
    }
    // The handlers come before start-up: a signal while the service starts (migrations, the
    // first key's bootstrap) lets it finish starting, then stops it the same graceful way,
    // instead of killing it half-way. (Not before the restart above: a signal caught there
    // would be lost with the process image it was caught in.)
    // The embedded database's WebAssembly compiles on the engine's own threads while the
    // service's modules load (its open awaits the same compilation, db/pglite-assets.ts).
    if (!config.databaseUrl && !config.pgliteThread) void import("./db/pglite-assets").then((m) => m.pgliteAssets(false)).catch(() => {});
    const { startServer } = await import("./server");
    let server: Awaited<ReturnType<typeof startServer>> | undefined;
    let received: string | undefined;
    // Runs once: from the first signal when the service is up, or after start-up when the
    // signal came before.
    const shutdown = () => {
      if (!server || !received) return;
      server.services.log.info("signal received", { signal: received });
      server.stop().then(
        () => process.exit(0),
        (err) => {
          console.error(err);
          process.exit(1);
        },
      );
    };
    for (const signal of ["SIGTERM", "SIGINT"] as const) {
      process.once(signal, () => {
        if (received) return; // already stopping, or will once started
        received = signal;
        shutdown();
      });
    }
    server = await startServer(config);
    shutdown(); // a signal that came during start-up
    return -1; // keep running
  }

  if (command === "mcp") {
    // A client of the running service's MCP server API, like `templates`.
    try {
      return await mcpCommand(sub, rest, `http://127.0.0.1:${config.port}`);
    } catch (e) {
      if (e instanceof McpUsageError) throw new UsageError(e.message);
      throw e;
    }
  }

  if (command === "templates") {
    // A client of the running service (builds run its sandboxes): nothing local is opened.
    try {
      return await templatesCommand(sub, rest, `http://127.0.0.1:${config.port}`);
    } catch (e) {
      if (e instanceof TemplatesUsageError) throw new UsageError(e.message);
      throw e;
    }
  }

  // Checked before anything is opened, so a typo costs nothing.
  const scopes = command === "keys" && sub === "create" ? await scopesFlag(rest) : undefined;
  const { openKeyAdmin } = await import("./keys/admin-client");
  const admin = await openKeyAdmin(config);
  try {
    switch (`${command} ${sub ?? ""}`.trim()) {
      case "migrate":
        console.log(admin.servicePid ? `migrations applied (by the running service, pid ${admin.servicePid})` : "migrations applied");
        return 0;
      case "orgs create": {
        const { values, positionals } = parseArgs({ args: rest, options: BUDGET_OPTIONS, allowPositionals: true });
        const name = positionals[0];
        if (!name) throw new UsageError("orgs create needs a name");
        const budget = { spendingLimit: numberFlag("spending-limit", values["spending-limit"]), spendPeriod: periodFlag(values["spending-period"]) };
        console.log(JSON.stringify(await admin.createOrganization(name, budget), null, 2));
        return 0;
      }
      case "orgs update": {
        const { values, positionals } = parseArgs({ args: rest, options: BUDGET_OPTIONS, allowPositionals: true });
        if (!positionals[0]) throw new UsageError("orgs update needs an organization id or name; list them with 'orgs list'");
        const org = await admin.findOrganization(positionals[0]);
        if (!org) throw new UsageError(`no organization "${positionals[0]}"; list them with 'orgs list'`);
        const patch = { spendingLimit: nullableNumberFlag("spending-limit", values["spending-limit"]), spendPeriod: periodFlag(values["spending-period"]) };
        console.log(JSON.stringify(await admin.updateOrganization(org.id, patch), null, 2));
        return 0;
      }
      case "orgs sandbox-quota": {
        const { values, positionals } = parseArgs({ args: rest, options: QUOTA_OPTIONS, allowPositionals: true });
        const org = positionals[0] ? await admin.findOrganization(positionals[0]) : undefined;
        if (!org) throw new UsageError(`orgs sandbox-quota needs an organization id or name${positionals[0] ? ` (no organization "${positionals[0]}")` : ""}; list them with 'orgs list'`);
        const quota = { maxSandboxes: quotaFlag("max-sandboxes", values["max-sandboxes"], true), maxMemoryMB: quotaFlag("max-memory-mb", values["max-memory-mb"], true), maxCpus: quotaFlag("max-cpus", values["max-cpus"], false) };
        console.log(JSON.stringify(await admin.setSandboxQuota(org.id, quota), null, 2));
        return 0;
      }
      case "orgs list":
        console.log(JSON.stringify(await admin.listOrganizations(), null, 2));
        return 0;
      case "keys create": {
        const { values } = parseArgs({ args: rest, options: KEY_CREATE_OPTIONS });
        if (!values.org || !values.name) throw new UsageError("keys create needs --org and --name");
        const org = await admin.findOrganization(values.org);
        if (!org) throw new UsageError(`no organization "${values.org}"; list them with 'orgs list'`);
        const created = await admin.createKey({
          organizationId: org.id,
          name: values.name,
          spendingLimit: numberFlag("spending-limit", values["spending-limit"]),
          spendPeriod: periodFlag(values["spending-period"]),
          rpm: countFlag("rpm", values.rpm),
          tpm: countFlag("tpm", values.tpm),
          expiresAt: dateFlag(values["expires-at"]),
          scopes,
          mcp: mcpFlag(values),
        });
        console.log(JSON.stringify(created, null, 2));
        console.error("The key above is shown only once.");
        return 0;
      }
      case "keys list": {
        const { values } = parseArgs({ args: rest, options: { org: { type: "string" } } });
        const org = values.org ? await admin.findOrganization(values.org) : undefined;
        if (values.org && !org) throw new UsageError(`no organization "${values.org}"`);
        console.log(JSON.stringify(await admin.listKeys(org?.id), null, 2));
        return 0;
      }
      case "keys update": {
        const { values, positionals } = parseArgs({ args: rest, options: KEY_UPDATE_OPTIONS, allowPositionals: true });
        if (!positionals[0]) throw new UsageError("keys update needs a key id (key_...); find it with 'keys list'");
        const patch = {
          spendingLimit: nullableNumberFlag("spending-limit", values["spending-limit"]),
          spendPeriod: periodFlag(values["spending-period"]),
          rpm: values.rpm === "none" ? null : countFlag("rpm", values.rpm),
          tpm: values.tpm === "none" ? null : countFlag("tpm", values.tpm),
          mcp: mcpFlag(values),
        };
        console.log(JSON.stringify(await admin.updateKey(positionals[0], patch), null, 2));
        return 0;
      }
      case "keys revoke": {
        if (!rest[0]) throw new UsageError("keys revoke needs a key id (key_...); find it with 'keys list'");
        console.log(JSON.stringify(await admin.revokeKey(rest[0]), null, 2));
        return 0;
      }
      default:
        throw new UsageError(`unknown command "${argv.join(" ")}"`);
    }
  } finally {
    await admin.close();
  }
}

const QUOTA_OPTIONS = {
  "max-sandboxes": { type: "string" },
  "max-memory-mb": { type: "string" },
  "max-cpus": { type: "string" },
} as const;

/** A quota flag: a non-negative number (whole where `whole`); absent: the service's default. */
function quotaFlag(name: string, value: string | undefined, whole: boolean): number | null {
  if (value === undefined) return null;
  const n = Number(value);
  if (value.trim() === "" || !Number.isFinite(n) || n < 0 || (whole && !Number.isInteger(n))) throw new UsageError(`--${name} must be a non-negative ${whole ? "integer" : "number"}, not "${value}"`);
  return n;
}

const BUDGET_OPTIONS = {
  "spending-limit": { type: "string" },
  "spending-period": { type: "string" },
} as const;

const KEY_UPDATE_OPTIONS = {
  ...BUDGET_OPTIONS,
  rpm: { type: "string" },
  tpm: { type: "string" },
  "mcp-servers": { type: "string" },
  "mcp-tools": { type: "string" },
} as const;

/** The key's MCP allow list from --mcp-servers / --mcp-tools (comma-separated; `none`: no MCP access); undefined when neither is given. */
function mcpFlag(values: { "mcp-servers"?: string; "mcp-tools"?: string }): McpAllowList | null | undefined {
  const servers = values["mcp-servers"];
  const tools = values["mcp-tools"];
  if (servers === undefined && tools === undefined) return undefined;
  if (servers === "none" && tools === undefined) return null;
  const list = (v: string | undefined) => (v === undefined || v === "none" ? [] : v.split(",").map((x) => x.trim()).filter(Boolean));
  return { servers: list(servers), tools: list(tools) };
}

const KEY_CREATE_OPTIONS = {
  ...KEY_UPDATE_OPTIONS,
  org: { type: "string" },
  name: { type: "string" },
  "expires-at": { type: "string" },
  scopes: { type: "string" },
} as const;

async function scopesFlag(args: string[]): Promise<string[]> {
  const { values } = parseArgs({ args, options: KEY_CREATE_OPTIONS });
  const scopes = values.scopes ? values.scopes.split(",").map((s) => s.trim()).filter(Boolean) : [];
  const { scopesProblem } = await import("./keys/keys");
  const problem = scopesProblem(scopes, await allScopes());
  if (problem) throw new UsageError(`--scopes: ${problem}`);
  return scopes;
}

class UsageError extends Error {}

function numberFlag(name: string, v: string | undefined): number | undefined {
  if (v === undefined) return undefined;
  const n = Number(v);
  if (!Number.isFinite(n) || n < 0) throw new UsageError(`--${name} must be a non-negative number`);
  return n;
}

/** A per-minute cap: a positive integer. */
function countFlag(name: string, v: string | undefined): number | undefined {
  if (v === undefined) return undefined;
  const n = Number(v);
  if (!Number.isInteger(n) || n < 1) throw new UsageError(`--${name} must be a positive integer (on update, none removes it)`);
  return n;
}

/** A limit flag of an update: `none` removes the limit. */
function nullableNumberFlag(name: string, v: string | undefined): number | null | undefined {
  return v === "none" ? null : numberFlag(name, v);
}

function periodFlag(v: string | undefined): SpendPeriod | undefined {
  if (v === undefined) return undefined;
  if (!isSpendPeriod(v)) throw new UsageError(`--spending-period must be one of ${SPEND_PERIODS.join(", ")}`);
  return v;
}

function dateFlag(v: string | undefined): Date | undefined {
  if (v === undefined) return undefined;
  const d = new Date(v);
  if (Number.isNaN(d.getTime())) throw new UsageError(`--expires-at must be an ISO date, e.g. 2027-01-31T00:00:00Z`);
  return d;
}

main(process.argv.slice(2)).then(
  (code) => {
    if (code >= 0) process.exit(code);
  },
  async (err) => {
    // Loaded here (see the top of this file); should that fail, the error is still shown.
    const explain = await Promise.all([import("./startup-failure"), import("./keys/admin-client")]).catch(() => undefined);
    const ServiceBusyError = explain?.[1].ServiceBusyError;
    // One line saying what to do; the stack only for those who asked for it.
    if (err instanceof UsageError) console.error(`error: ${err.message}\n\n${await usage().catch(() => "")}`);
    else console.error(explain ? explain[0].failureLine(err, loaded) : String(err));
    if (loaded?.logLevel === "debug") console.error(err);
    // 2: the command cannot run as given or now (usage, a busy data directory); 1: it failed.
    const cannotRun = err instanceof UsageError || err instanceof DataDirLockedError || (ServiceBusyError !== undefined && err instanceof ServiceBusyError);
    process.exit(cannotRun ? 2 : 1);
  },
);
