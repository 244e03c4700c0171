import type { Config } from "../config";
import { openDatabase } from "../db/client";
import { DataDirLockedError } from "../db/data-dir";
import { keyJson, organizationJson } from "./admin-routes";
import { type BudgetPatch, type KeyPatch, KeyRepository, type NewKey } from "./keys";
import { readAdminEndpoint } from "./local-admin";
import { type QuotaOverrides, SandboxQuotas } from "../sandboxes/quota";

type OrganizationJson = ReturnType<typeof organizationJson>;
type KeyJson = ReturnType<typeof keyJson>;

/** What the CLI does to organizations and keys, wherever they live. */
export interface KeyAdmin {
  /** Set when the commands go through a running service (its pid). */
  servicePid?: number;
  createOrganization(name: string, budget?: BudgetPatch): Promise<OrganizationJson>;
  updateOrganization(id: string, patch: BudgetPatch): Promise<OrganizationJson>;
  listOrganizations(): Promise<OrganizationJson[]>;
  findOrganization(idOrName: string): Promise<OrganizationJson | undefined>;
  createKey(input: NewKey): Promise<KeyJson & { key: string }>;
  listKeys(organizationId?: string): Promise<KeyJson[]>;
  revokeKey(id: string): Promise<KeyJson>;
  updateKey(id: string, patch: KeyPatch): Promise<KeyJson>;
  /** Sets an organization's sandbox quota (null: the default); returns it as the admin API shows it. */
  setSandboxQuota(organizationId: string, quota: QuotaOverrides): Promise<unknown>;
  close(): Promise<void>;
}

/** The running service refused the command (status and its message). */
export class AdminApiError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

/** The data directory is owned by a service that cannot take commands now; says what to do. */
export class ServiceBusyError extends Error {}

/**
 * The database directly when this process may open it (PostgreSQL, or an embedded
 * directory nobody holds: it is then locked for the command's duration); otherwise the
 * service that holds the embedded directory, through its admin API. Never a second
 * opener of an embedded database.
 */
export async function openKeyAdmin(config: Config): Promise<KeyAdmin> {
  try {
    const database = await openDatabase({ url: config.databaseUrl, dataDir: config.dataDir, ownThread: config.pgliteThread });
    const c = config.sandboxes;
    const quotas = new SandboxQuotas(database.db, { maxSandboxes: c.orgMaxSandboxes, maxMemoryMB: c.orgMaxMemoryMB, maxCpus: c.orgMaxCpus });
    return directAdmin(new KeyRepository(database.db), quotas, () => database.close());
  } catch (err) {
    if (!(err instanceof DataDirLockedError)) throw err;
    const endpoint = readAdminEndpoint(config.dataDir);
    if (!endpoint || endpoint.pid !== err.ownerPid) {
      throw new ServiceBusyError(
        `${err.message}, which is not taking admin commands yet (still starting, or stopping). ` +
          "Retry in a moment; if it does not come up, stop it and run the command again.",
      );
    }
    return remoteAdmin(endpoint.url, endpoint.token, endpoint.pid);
  }
}

function directAdmin(repo: KeyRepository, quotas: SandboxQuotas, close: () => Promise<void>): KeyAdmin {
  return {
    setSandboxQuota: async (organizationId, quota) => quotas.describe(organizationId, await quotas.set(organizationId, quota)),
    createOrganization: async (name, budget) => organizationJson(await repo.createOrganization(name, budget)),
    updateOrganization: async (id, patch) => organizationJson(await repo.updateOrganization(id, patch, new Date())),
    listOrganizations: async () => (await repo.listOrganizations()).map((o) => organizationJson(o)),
    findOrganization: async (idOrName) => {
      const org = await repo.findOrganization(idOrName);
      return org && organizationJson(org);
    },
    createKey: async (input) => {
      const { record, key } = await repo.createKey(input);
      return { ...keyJson(record), key };
    },
    listKeys: async (organizationId) => (await repo.listKeys(organizationId)).map((k) => keyJson(k)),
    revokeKey: async (id) => keyJson((await repo.revokeKey(id)).record),
    updateKey: async (id, patch) => keyJson((await repo.updateKey(id, patch)).record),
    close,
  };
}

function remoteAdmin(baseUrl: string, token: string, pid: number): KeyAdmin {
  const call = async <T>(method: string, path: string, body?: unknown): Promise<T> => {
    let res: Response;
    try {
      res = await fetch(baseUrl + path, {
        method,
        headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { "content-type": "application/json" }) },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
    } catch (err) {
      throw new ServiceBusyError(
        `the gateway process (pid ${pid}) owns the data directory but does not answer at ${baseUrl} (${(err as Error).message}). ` +
          "Retry in a moment; if it stays unreachable, stop it and run the command again.",
      );
    }
    const text = await res.text();
    if (!res.ok) {
      let message = text;
      try {
        message = (JSON.parse(text) as { error?: string }).error ?? text;
      } catch {
        // not JSON: keep the text
      }
      throw new AdminApiError(res.status, message);
    }
    return JSON.parse(text) as T;
  };
  const listOrganizations = () => call<OrganizationJson[]>("GET", "/admin/organizations");
  return {
    servicePid: pid,
    createOrganization: (name, budget = {}) => call("POST", "/admin/organizations", { name, ...wireBudget(budget) }),
    updateOrganization: (id, patch) => call("PATCH", `/admin/organizations/${encodeURIComponent(id)}`, wireBudget(patch)),
    listOrganizations,
    findOrganization: async (idOrName) => (await listOrganizations()).find((o) => o.id === idOrName || o.name === idOrName),
    createKey: (input) => call("POST", "/admin/keys", { ...wireBudget(input), expiresAt: input.expiresAt?.toISOString() }),
    updateKey: (id, patch) => call("PATCH", `/admin/keys/${encodeURIComponent(id)}`, { ...wireBudget(patch), expiresAt: patch.expiresAt?.toISOString() }),
    listKeys: (organizationId) => call("GET", `/admin/keys${organizationId ? `?organizationId=${encodeURIComponent(organizationId)}` : ""}`),
    revokeKey: (id) => call("POST", `/admin/keys/${encodeURIComponent(id)}/revoke`),
    setSandboxQuota: (organizationId, quota) => call("PUT", `/admin/organizations/${encodeURIComponent(organizationId)}/sandbox-quota`, quota),
    close: async () => {},
  };
}

/** The admin API's spelling of a budget: `spendingPeriod` for the stored `spendPeriod`. */
function wireBudget<T extends { spendPeriod?: unknown }>({ spendPeriod, ...rest }: T) {
  return { ...rest, spendingPeriod: spendPeriod };
}
