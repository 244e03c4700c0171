import { Elysia, t } from "elysia";
import { requestContext } from "../http/core";
import { ApiError } from "../http/errors";
import type { NetworkRequest } from "../sandboxes/network";
import type { SandboxNetworks } from "../sandboxes/network-service";
import type { SandboxLifecycleOptions, SandboxRow, SnapshotRow } from "../sandboxes/schema";
import { CLIENT_ID, type SandboxService } from "../sandboxes/service";
import { createSnapshot, fork, listSnapshots } from "../sandboxes/snapshots";
import { resolveResources } from "../sandboxes/templates";
import { type AccessTokens, trafficToken } from "./access-token";
import { type MetricsSampler } from "./metrics";

/**
 * The E2B control plane (E2B's own API document, `spec/openapi.yml` of e2b-dev/E2B),
 * under `/e2b`, over the same sandbox service as `/sandboxes`: one sandbox is visible
 * and manageable through both. E2B's field names, status codes and `{code, message}`
 * errors. A stopped sandbox does not exist for E2B: 404, which the SDK's kill() reads
 * as "already gone".
 */

/** The envd version the data plane answers as; the SDKs gate features on it. */
export const ENVD_VERSION = "0.6.4";
const MAX_TIMEOUT_SEC = 86_400;
const MAX_PAGE = 100;
const MAX_FORKS = 16;
const SNAPSHOT_NAME = /^[A-Za-z0-9._/-]{1,128}$/;

/** E2B's template names for the templates we ship under other ids. */
const TEMPLATE_ALIASES: Record<string, string> = { "code-interpreter-v1": "code_interpreter", "code-interpreter": "code_interpreter" };

/** Threat: a plain lookup answered `constructor` (a client's templateID) with Object.prototype's member. */
function templateAlias(id: string): string | undefined {
  return Object.hasOwn(TEMPLATE_ALIASES, id) ? TEMPLATE_ALIASES[id] : undefined;
}

const hide = { hide: true };

/**
 * `domain`: SANDBOX_DOMAIN, the base of `<port>-<sandboxID>.<domain>` (host-routing.ts);
 * answered as each sandbox's `domain`, from which the SDK builds `getHost(port)`.
 */
export function e2bControlRoutes(sandboxes: SandboxService, networks: SandboxNetworks, tokens: AccessTokens, metrics: MetricsSampler, domain: string | undefined) {
  /** The sandbox as E2B describes it at create and connect: with the envd credentials. */
  const created = async (row: SandboxRow) => {
    const token = await tokens.tokenFor(row.organizationId, row.id);
    return {
      sandboxID: row.id,
      templateID: row.templateId,
      clientID: CLIENT_ID,
      envdVersion: ENVD_VERSION,
      envdAccessToken: token,
      // For the sandbox's ports with allowPublicTraffic false, and sent by the code
      // interpreter SDK on its context calls; it does not open envd (access-token.ts).
      trafficAccessToken: trafficToken(token),
      domain: domain ?? null,
    };
  };

  const detail = async (row: SandboxRow) => {
    const template = await sandboxes.templateOf(row);
    const r = template ? resolveResources(template, {}) : undefined;
    const res = typeof r === "object" ? r : { cpuCount: 1, memoryMB: 0, diskSizeMB: 0 };
    return {
      sandboxID: row.id,
      templateID: row.templateId,
      clientID: CLIENT_ID,
      startedAt: row.startedAt.toISOString(),
      endAt: row.endAt.toISOString(),
      state: row.status === "paused" ? "paused" : "running",
      metadata: row.metadata,
      cpuCount: Math.max(1, Math.ceil(res.cpuCount)),
      memoryMB: res.memoryMB,
      diskSizeMB: res.diskSizeMB,
      envdVersion: ENVD_VERSION,
      domain: domain ?? null,
      allowInternetAccess: row.network?.allowInternetAccess ?? null,
      ...(row.network ? { network: { allowOut: row.network.allowOut, denyOut: row.network.denyOut, allowPublicTraffic: row.network.allowPublicTraffic, ...(row.network.maskRequestHost ? { maskRequestHost: row.network.maskRequestHost } : {}) } } : {}),
      volumeMounts: [],
      lifecycle: { onTimeout: row.lifecycle?.onTimeout ?? "kill", autoResume: row.lifecycle?.autoResume ?? false },
    };
  };

  /** A live sandbox of the organization; stopped ones are "not found" as in E2B. */
  const live = async (org: string, id: string) => {
    const row = await sandboxes.get(org, id).catch((e) => {
      if (e instanceof ApiError && e.status === 400) throw new ApiError(404, `sandbox ${id} not found`);
      throw e;
    });
    if (row.status !== "running" && row.status !== "paused") throw new ApiError(404, `sandbox ${id} not found`);
    return row;
  };

  const create = async (org: string, body: Record<string, unknown>) => {
    const asked = String(body.templateID);
    // A configured template of that name wins over E2B's alias.
    const templateID = sandboxes.templates.has(asked) ? asked : (templateAlias(asked) ?? asked);
    return created(
      await sandboxes.create(org, {
        templateID,
        timeout: timeoutOf(body.timeout, false),
        metadata: stringMap("metadata", body.metadata),
        envVars: stringMap("envVars", body.envVars),
        network: networkOf(body),
        lifecycle: lifecycleOf(body),
      }),
    );
  };

  /** E2B's snapshot as its API answers it: the id a create takes, and the names it can be found by. */
  const snapshotJson = (s: SnapshotRow) => ({ snapshotID: s.id, names: s.name ? [s.name] : [] });

  const createBody = t.Object(
    {
      templateID: t.String({ minLength: 1, error: "templateID is required (a string)" }),
      timeout: t.Optional(t.Unknown()),
      metadata: t.Optional(t.Unknown()),
      envVars: t.Optional(t.Unknown()),
      allow_internet_access: t.Optional(t.Unknown()),
      network: t.Optional(t.Unknown()),
      autoPause: t.Optional(t.Unknown()),
      autoPauseMemory: t.Optional(t.Unknown()),
      autoResume: t.Optional(t.Unknown()),
    },
    { additionalProperties: true },
  );

  return new Elysia({ prefix: "/e2b" })
    .use(requestContext)
    .post("/sandboxes", async ({ auth, body, set }) => ((set.status = 201), create(auth.organizationId, body)), { body: createBody, detail: hide })
    .post("/v2/sandboxes", async ({ auth, body, set }) => ((set.status = 201), create(auth.organizationId, body)), { body: createBody, detail: hide })
    .get("/sandboxes", async ({ auth, query }) => Promise.all(filterRows(await sandboxes.list(auth.organizationId, "running"), query.metadata).map(detail)), {
      query: t.Object({ metadata: t.Optional(t.String()) }),
      detail: hide,
    })
    .get(
      "/v2/sandboxes",
      async ({ auth, query, set }) => {
        const states = (query.state ?? "running,paused").split(",").filter(Boolean);
        for (const s of states) if (s !== "running" && s !== "paused") throw new ApiError(400, `state must be running or paused, not '${s}'`);
        const limit = query.limit === undefined ? MAX_PAGE : Number(query.limit);
        if (!Number.isInteger(limit) || limit < 1 || limit > MAX_PAGE) throw new ApiError(400, `limit must be an integer from 1 to ${MAX_PAGE}`);
        const asc = query.order === "asc";
        if (query.order !== undefined && query.order !== "asc" && query.order !== "desc") throw new ApiError(400, "order must be asc or desc");
        let rows = (await sandboxes.list(auth.organizationId)).filter((r) => states.includes(r.status));
        rows = filterRows(rows, query.metadata);
        if (query.template) rows = rows.filter((r) => r.templateId === query.template || templateAlias(query.template!) === r.templateId);
        if (query.startedAfter) {
          const after = Date.parse(query.startedAfter);
          if (Number.isNaN(after)) throw new ApiError(400, "startedAfter must be a date-time");
          rows = rows.filter((r) => r.startedAt.getTime() >= after);
        }
        if (asc) rows.reverse();
        // The cursor is the last id of the previous page; ids sort by creation time.
        if (query.nextToken) rows = rows.filter((r) => (asc ? r.id > query.nextToken! : r.id < query.nextToken!));
        const page = rows.slice(0, limit);
        if (rows.length > limit) set.headers["x-next-token"] = page[page.length - 1].id;
        set.headers["x-total-running"] = String(rows.filter((r) => r.status === "running").length);
        return Promise.all(page.map(detail));
      },
      {
        query: t.Object({
          state: t.Optional(t.String()),
          metadata: t.Optional(t.String()),
          limit: t.Optional(t.String()),
          nextToken: t.Optional(t.String({ maxLength: 64 })),
          order: t.Optional(t.String()),
          template: t.Optional(t.String()),
          startedAfter: t.Optional(t.String()),
        }),
        detail: hide,
      },
    )
    .get("/sandboxes/:id", async ({ auth, params }) => await detail(await live(auth.organizationId, params.id)), { detail: hide })
    .delete(
      "/sandboxes/:id",
      async ({ auth, params, set }) => {
        await live(auth.organizationId, params.id);
        await sandboxes.kill(auth.organizationId, params.id);
        set.status = 204;
        return null;
      },
      { detail: hide },
    )
    .post(
      "/sandboxes/:id/timeout",
      async ({ auth, params, body, set }) => {
        await live(auth.organizationId, params.id);
        await sandboxes.setTimeout(auth.organizationId, params.id, timeoutOf(body?.timeout, true)!);
        set.status = 204;
        return null;
      },
      { body: t.Optional(t.Object({ timeout: t.Optional(t.Unknown()) }, { additionalProperties: true })), detail: hide },
    )
    .post(
      "/sandboxes/:id/pause",
      async ({ auth, params, body, set }) => {
        await live(auth.organizationId, params.id);
        // E2B's `memory: false` (the SDK's keepMemory: false): a filesystem-only pause; the
        // processes end and a resume starts the sandbox again with its files.
        const memory = (body as { memory?: unknown } | null | undefined)?.memory;
        if (memory !== undefined && memory !== null && typeof memory !== "boolean") throw new ApiError(400, "memory must be a boolean");
        await sandboxes.pause(auth.organizationId, params.id, { keepMemory: memory !== false });
        set.status = 204;
        return null;
      },
      { body: t.Optional(t.Unknown()), detail: hide },
    )
    .post(
      "/sandboxes/:id/resume",
      async ({ auth, params, body, set }) => {
        const row = await live(auth.organizationId, params.id);
        if (row.status !== "paused") throw new ApiError(409, `sandbox ${params.id} is already running`);
        set.status = 201;
        return created(await sandboxes.connect(auth.organizationId, params.id, timeoutOf(body?.timeout, false)));
      },
      { body: t.Optional(t.Object({ timeout: t.Optional(t.Unknown()) }, { additionalProperties: true })), detail: hide },
    )
    .post("/sandboxes/:id/connect", async ({ auth, params, body, set }) => connect(auth.organizationId, params.id, body?.timeout, body?.memory, set), {
      body: t.Optional(t.Object({ timeout: t.Optional(t.Unknown()), memory: t.Optional(t.Unknown()) }, { additionalProperties: true })),
      detail: hide,
    })
    .post("/v2/sandboxes/:id/connect", async ({ auth, params, body, set }) => connect(auth.organizationId, params.id, body?.timeout, body?.memory, set), {
      body: t.Optional(t.Object({ timeout: t.Optional(t.Unknown()), memory: t.Optional(t.Unknown()) }, { additionalProperties: true })),
      detail: hide,
    })
    .post(
      "/sandboxes/:id/snapshots",
      async ({ auth, params, body, set }) => {
        await live(auth.organizationId, params.id);
        const name = (body as { name?: unknown } | null | undefined)?.name;
        if (name !== undefined && name !== null && (typeof name !== "string" || !SNAPSHOT_NAME.test(name))) throw new ApiError(400, "name must be 1 to 128 letters, digits, '.', '_', '-' or '/'");
        set.status = 201;
        return snapshotJson(await createSnapshot(sandboxes, auth.organizationId, params.id, (name as string | null | undefined) ?? undefined));
      },
      { body: t.Optional(t.Unknown()), detail: hide },
    )
    .get(
      "/snapshots",
      async ({ auth, query, set }) => {
        const limit = query.limit === undefined ? MAX_PAGE : Number(query.limit);
        if (!Number.isInteger(limit) || limit < 1 || limit > MAX_PAGE) throw new ApiError(400, `limit must be an integer from 1 to ${MAX_PAGE}`);
        let rows = await listSnapshots(sandboxes, auth.organizationId, { sandboxId: query.sandboxID || undefined, name: query.name || undefined });
        // The cursor is the last id of the previous page; ids sort by creation time.
        if (query.nextToken) rows = rows.filter((r) => r.id < query.nextToken!);
        const page = rows.slice(0, limit);
        if (rows.length > limit) set.headers["x-next-token"] = page[page.length - 1].id;
        return page.map(snapshotJson);
      },
      { query: t.Object({ sandboxID: t.Optional(t.String({ maxLength: 64 })), name: t.Optional(t.String({ maxLength: 256 })), limit: t.Optional(t.String()), nextToken: t.Optional(t.String({ maxLength: 64 })) }), detail: hide },
    )
    // Deleting a snapshot: DELETE /templates/{id} (template-routes.ts), as E2B deletes a snapshot as the template it is.
    .post(
      "/sandboxes/:id/fork",
      async ({ auth, params, body, set }) => {
        await live(auth.organizationId, params.id);
        const b = (body ?? {}) as Record<string, unknown>;
        const count = b.count === undefined || b.count === null ? 1 : b.count;
        if (typeof count !== "number" || !Number.isInteger(count) || count < 1 || count > MAX_FORKS) throw new ApiError(400, `count must be an integer from 1 to ${MAX_FORKS}`);
        const forks = await fork(sandboxes, auth.organizationId, params.id, count, timeoutOf(b.timeout, false));
        set.status = 201;
        return Promise.all(forks.map(async (f) => ("row" in f ? { sandbox: await created(f.row) } : { error: { code: f.error.status, message: f.error.message } })));
      },
      { body: t.Optional(t.Unknown()), detail: hide },
    )
    .put(
      "/sandboxes/:id/network",
      async ({ auth, params, body, set }) => {
        await live(auth.organizationId, params.id);
        const b = (body ?? {}) as Record<string, unknown>;
        await networks.update(auth.organizationId, params.id, { allowInternetAccess: b.allow_internet_access as boolean | undefined, allowOut: b.allowOut as string[] | undefined, denyOut: b.denyOut as string[] | undefined });
        set.status = 204;
        return null;
      },
      { body: t.Optional(t.Object({ allow_internet_access: t.Optional(t.Unknown()), allowOut: t.Optional(t.Unknown()), denyOut: t.Optional(t.Unknown()) }, { additionalProperties: true })), detail: hide },
    )
    .get(
      "/sandboxes/:id/metrics",
      async ({ auth, params, query }) => {
        const start = unixSeconds(query.start, "start");
        const end = unixSeconds(query.end, "end");
        if (start !== undefined && end !== undefined && start > end) throw new ApiError(400, "start must not be after end");
        const row = await live(auth.organizationId, params.id);
        if (row.status !== "running") return [];
        return metrics.range(row, start, end);
      },
      { query: t.Object({ start: t.Optional(t.String()), end: t.Optional(t.String()) }), detail: hide },
    );

  /**
   * Resumes a paused sandbox (201) or returns a running one (200); the TTL is only ever
   * extended. `memory: false` (the SDK's onResume "reboot") starts a paused sandbox again
   * from its files even when its processes were kept.
   */
  async function connect(org: string, id: string, rawTimeout: unknown, memory: unknown, set: { status?: number | string }) {
    const row = await live(org, id);
    let timeout = timeoutOf(rawTimeout, false);
    if (memory !== undefined && memory !== null && typeof memory !== "boolean") throw new ApiError(400, "memory must be a boolean");
    if (row.status === "running" && timeout !== undefined && Date.now() + timeout * 1000 <= row.endAt.getTime()) timeout = undefined;
    const after = await sandboxes.connect(org, id, timeout, { reboot: memory === false });
    set.status = row.status === "paused" ? 201 : 200;
    return created(after);
  }
}

/** A metrics window bound: Unix seconds, as E2B's API takes them. */
function unixSeconds(value: string | undefined, name: string): number | undefined {
  if (value === undefined || value === "") return undefined;
  if (!/^[0-9]{1,12}$/.test(value)) throw new ApiError(400, `${name} must be a Unix timestamp in seconds`);
  return Number(value);
}

/**
 * E2B's network options of a create (`allow_internet_access`, `network`); undefined when it
 * has none, so the template's or the operator's default applies. `rules`, `egressProxy`
 * and `httpsPorts` are refused rather than ignored: the sandbox would not do what they ask.
 */
function networkOf(body: Record<string, unknown>): NetworkRequest | undefined {
  const n = body.network;
  if (body.allow_internet_access === undefined && (n === undefined || n === null)) return undefined;
  if (n !== undefined && n !== null && (typeof n !== "object" || Array.isArray(n))) throw new ApiError(400, "network must be an object");
  const net = (n ?? {}) as Record<string, unknown>;
  for (const unsupported of ["rules", "egressProxy", "httpsPorts"]) {
    if (net[unsupported] !== undefined && net[unsupported] !== null) throw new ApiError(400, `network.${unsupported} is not supported by this service`);
  }
  return {
    allowInternetAccess: body.allow_internet_access as boolean | undefined,
    allowOut: net.allowOut as string[] | undefined,
    denyOut: net.denyOut as string[] | undefined,
    allowPublicTraffic: net.allowPublicTraffic as boolean | undefined,
    maskRequestHost: net.maskRequestHost as string | undefined,
  };
}

/**
 * E2B's lifecycle fields of a create, as the SDK sends them: `autoPause` (onTimeout
 * "pause"), `autoPauseMemory` (its keepMemory) and `autoResume: { enabled }`. The SDK's
 * own checks are repeated here for other clients.
 */
function lifecycleOf(body: Record<string, unknown>): SandboxLifecycleOptions | undefined {
  const { autoPause, autoPauseMemory } = body;
  const autoResume = body.autoResume === undefined || body.autoResume === null ? undefined : body.autoResume;
  if (autoPause !== undefined && autoPause !== null && typeof autoPause !== "boolean") throw new ApiError(400, "autoPause must be a boolean");
  if (autoPauseMemory !== undefined && autoPauseMemory !== null && typeof autoPauseMemory !== "boolean") throw new ApiError(400, "autoPauseMemory must be a boolean");
  let resume: boolean | undefined;
  if (autoResume !== undefined) {
    const enabled = typeof autoResume === "boolean" ? autoResume : typeof autoResume === "object" && !Array.isArray(autoResume) ? (autoResume as { enabled?: unknown }).enabled : undefined;
    if (typeof enabled !== "boolean") throw new ApiError(400, "autoResume must be { enabled: boolean }");
    resume = enabled;
  }
  if (!autoPause) {
    if (resume) throw new ApiError(400, "autoResume needs autoPause: a killed sandbox cannot be resumed");
    if (typeof autoPauseMemory === "boolean") throw new ApiError(400, "autoPauseMemory is only allowed with autoPause");
    return undefined;
  }
  const keepMemory = autoPauseMemory !== false;
  if (resume && !keepMemory) throw new ApiError(400, "autoResume is not allowed with autoPauseMemory: false (a filesystem-only pause is resumed with connect)");
  return { onTimeout: "pause", keepMemory, autoResume: resume ?? false };
}

function timeoutOf(v: unknown, required: boolean): number | undefined {
  if (v === undefined || v === null) {
    if (required) throw new ApiError(400, "timeout is required (seconds)");
    return undefined;
  }
  if (typeof v !== "number" || !Number.isInteger(v) || v < 0 || v > MAX_TIMEOUT_SEC) throw new ApiError(400, `timeout must be an integer number of seconds from 0 to ${MAX_TIMEOUT_SEC}`);
  // 0 would end the sandbox at once; E2B treats it as the shortest lifetime.
  return Math.max(1, v);
}

function stringMap(name: string, value: unknown): Record<string, string> | undefined {
  if (value === undefined || value === null) return undefined;
  const bad = () => new ApiError(400, `${name} must be an object of at most 256 string values`);
  if (typeof value !== "object" || Array.isArray(value)) throw bad();
  const entries = Object.entries(value);
  if (entries.length > 256) throw bad();
  for (const [k, v] of entries) if (typeof v !== "string" || k.length > 256 || v.length > 16_384) throw bad();
  return value as Record<string, string>;
}

/** E2B's metadata filter: `k=v&k2=v2`, each key and value URL-encoded; every pair must match. */
function filterRows(rows: SandboxRow[], metadata: string | undefined): SandboxRow[] {
  if (!metadata) return rows;
  // The SDK URL-encodes each key and value before joining them, so they are decoded once more.
  const want = [...new URLSearchParams(metadata)].map(([k, v]) => [decode(k), decode(v)]);
  return rows.filter((r) => want.every(([k, v]) => r.metadata[k] === v));
}

function decode(s: string): string {
  try {
    return decodeURIComponent(s);
  } catch {
    return s;
  }
}
