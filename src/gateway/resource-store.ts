import { and, desc, eq, lt } from "drizzle-orm";
import { rawBodies } from "../http/body";
import { ApiError } from "../http/errors";
import type { Gateway, Incoming } from "./gateway";
import type { Protocol } from "./protocols";
import type { UpstreamRequest } from "./provider";
import type { Candidate } from "./router";
import { gatewayStoredResources } from "./schema";

/**
 * What the pass-through resource APIs (files, batches, cached contents, resumable
 * uploads, of every vendor) share: an upstream id remembered with the organization that
 * created it and the provider that holds it (gateway_stored_resources), and one call to
 * that provider.
 *
 * Threat: the upstream account is shared by every organization, so the upstream would
 * read, download, delete or cancel any id it knows, and list everyone's. Unknown and
 * foreign ids look the same (404, in the vendor's own shape) and nothing about them
 * reaches an upstream; listings come from this organization's rows, never from the
 * upstream's list.
 */
export type StoredRow = typeof gatewayStoredResources.$inferSelect;

/** The longest upstream id remembered (ids come from upstreams; a huge one is not ours to keep). */
export const MAX_ID = 256;

export class ResourceStore {
  constructor(private readonly g: Gateway) {}

  private get db() {
    return this.g.s.db;
  }

  /** This organization's row for `id` of `kind`, or the vendor's 404 (`notFound`). */
  async remembered(inc: Incoming, kind: string, id: string, notFound: string): Promise<StoredRow> {
    const row = await this.find(inc, kind, id);
    if (!row) throw new ApiError(404, notFound);
    return row;
  }

  async find(inc: Incoming, kind: string, id: string): Promise<StoredRow | undefined> {
    const [row] = await this.db
      .select()
      .from(gatewayStoredResources)
      .where(and(eq(gatewayStoredResources.id, id), eq(gatewayStoredResources.kind, kind), eq(gatewayStoredResources.organizationId, inc.auth.organizationId)));
    return row;
  }

  /** Remembers an id at `provider` for this organization; an id already taken stays with its first owner. */
  async remember(inc: Incoming, kind: string, provider: string, id: unknown, object: unknown, keyId = inc.auth.key.id): Promise<void> {
    if (typeof id !== "string" || !id || id.length > MAX_ID) return;
    await this.db.insert(gatewayStoredResources).values({ id, kind, organizationId: inc.auth.organizationId, keyId, provider, object: storable(object) }).onConflictDoNothing();
  }

  /** Keeps the upstream's latest object for listings. */
  async refresh(id: string, object: unknown): Promise<void> {
    await this.db.update(gatewayStoredResources).set({ object: storable(object) }).where(eq(gatewayStoredResources.id, id));
  }

  async forget(id: string): Promise<void> {
    await this.db.delete(gatewayStoredResources).where(eq(gatewayStoredResources.id, id));
  }

  /**
   * Claims the metering of a resource's results: true for exactly one caller, ever, so
   * results read twice (or by two clients at once) are billed once.
   */
  async claimMetering(id: string): Promise<boolean> {
    const rows = await this.db
      .update(gatewayStoredResources)
      .set({ metered: true })
      .where(and(eq(gatewayStoredResources.id, id), eq(gatewayStoredResources.metered, false)))
      .returning({ id: gatewayStoredResources.id });
    return rows.length === 1;
  }

  /** Newest first, `limit + 1` rows (the caller tells whether there are more); `before`: rows created before that one. */
  async list(inc: Incoming, kind: string, limit: number, before?: StoredRow): Promise<StoredRow[]> {
    const conditions = [eq(gatewayStoredResources.organizationId, inc.auth.organizationId), eq(gatewayStoredResources.kind, kind)];
    if (before) conditions.push(lt(gatewayStoredResources.createdAt, before.createdAt));
    return this.db.select().from(gatewayStoredResources).where(and(...conditions)).orderBy(desc(gatewayStoredResources.createdAt)).limit(limit + 1);
  }

  /**
   * Sends one call to a provider. A JSON answer is handed to `seen` (to remember or refresh
   * it) and passed on as the upstream wrote it; anything else (file bytes, refusals) passes
   * through unread.
   */
  async call(inc: Incoming, provider: string, protocol: Protocol, req: Partial<UpstreamRequest>, seen?: (json: any) => unknown, opts: CallOptions = {}): Promise<Response> {
    const entry = this.g.providers.get(provider);
    if (!entry) throw new ApiError(503, `provider ${provider}, which holds this resource, is no longer configured`);
    const ac = new AbortController();
    const onClientGone = () => ac.abort();
    if (!opts.outliveClient) inc.request.signal.addEventListener("abort", onClientGone, { once: true });
    const timer = setTimeout(() => ac.abort(), this.g.deps.options.timeoutMs);
    let res: Response;
    try {
      res = await entry.provider.send({ protocol, model: "", stream: false, clientHeaders: inc.request.headers, signal: ac.signal, ...req });
    } catch {
      throw new ApiError(ac.signal.aborted && !inc.request.signal.aborted ? 504 : 503, `provider ${provider} did not answer`);
    } finally {
      clearTimeout(timer);
    }
    // Credential failures are the gateway's upstream key, not the client's.
    if (res.status === 401 || res.status === 403) throw new ApiError(502, `provider ${provider} rejected the gateway's credentials (${res.status})`);
    const headers = new Headers({ "content-type": res.headers.get("content-type") ?? "application/json", "x-gateway-provider": provider });
    for (const name of opts.keep ?? []) {
      const v = res.headers.get(name);
      if (v !== null) headers.set(name, v);
    }
    if (!seen || !res.ok) {
      const length = res.headers.get("content-length");
      if (length) headers.set("content-length", length);
      return new Response(res.body, { status: res.status, headers });
    }
    const text = await res.text();
    let json: any;
    try {
      json = JSON.parse(text);
    } catch {}
    if (json) await seen(json);
    return new Response(json && opts.rewrite ? JSON.stringify(opts.rewrite(json)) : text, { status: res.status, headers });
  }

  /** The provider a new resource goes to: the one named by `x-gateway-provider`, else the first that serves `protocol`. */
  target(inc: Incoming, protocol: Protocol, what: string): string {
    const asked = inc.request.headers.get("x-gateway-provider");
    const serving = [...this.g.providers.values()].filter((p) => p.serves.includes(protocol));
    const target = asked ? serving.find((p) => p.name === asked) : serving[0];
    if (!target) throw new ApiError(asked ? 400 : 503, asked ? `provider '${asked}' does not serve ${what}` : `no configured provider serves ${what}`);
    return target.name;
  }

  /**
   * The provider of a create that names models (a batch's requests, a cache): the first
   * candidate of the first model that serves `protocol`, which must also be a candidate
   * of every other model (one batch lives at one provider); `holder`: the provider that
   * must serve them all (it holds files the requests name).
   */
  providerForModels(inc: Incoming, protocol: Protocol, models: string[], holder?: string): { provider: string; upstreamModel: (model: string) => string } {
    if (!models.length) throw new ApiError(400, "the request names no model");
    const byModel = new Map<string, string>();
    let provider: string | undefined = holder;
    for (const model of new Set(models)) {
      const candidates = this.g.router.candidates(model, protocol);
      const chosen = provider === undefined ? candidates[0] : candidates.find((c) => c.provider === provider);
      if (!chosen) throw new ApiError(400, `model '${model.slice(0, 200)}' is not served by provider ${provider}, which serves the batch's other requests (or holds its files); send one batch per provider`);
      provider ??= chosen.provider;
      byModel.set(model, chosen.model);
    }
    return { provider: provider!, upstreamModel: (m) => byModel.get(m) ?? m };
  }
}

export interface CallOptions {
  /** Upstream headers the client needs (resumable-upload state). */
  keep?: readonly string[];
  /** The answer is read to its end even when the client leaves (batch results, to meter them). */
  outliveClient?: boolean;
  /** The JSON the client gets instead of the upstream's (URLs pointing at the upstream rewritten to the gateway). */
  rewrite?: (json: any) => unknown;
}

/** Whether a request's body may name files by `file_id` (cheap: most requests do not mention it). */
export function mentionsFiles(request: Request): boolean {
  return rawBodies.get(request)?.includes("file_id") ?? true;
}

/** Every `file_id` a JSON body names, however deep. */
export function fileIds(body: unknown): string[] {
  const out = new Set<string>();
  const walk = (v: unknown, depth: number) => {
    if (depth > 64 || v === null || typeof v !== "object") return;
    if (Array.isArray(v)) for (const x of v) walk(x, depth + 1);
    else for (const [k, x] of Object.entries(v)) k === "file_id" && typeof x === "string" ? out.add(x) : walk(x, depth + 1);
  };
  walk(body, 0);
  return [...out];
}

/**
 * The provider holding every file (of `kind`) that `body` names by `file_id`, undefined
 * when it names none; the vendor's 404 (`notFound`) for a file this organization did not
 * upload. A request naming another organization's file would have the shared upstream
 * account read it for this one (see ResourceStore).
 */
export async function holderOfFileIds(store: ResourceStore, inc: Incoming, body: unknown, kind: string, notFound: (id: string) => string): Promise<string | undefined> {
  let holder: string | undefined;
  for (const id of fileIds(body)) {
    const row = await store.remembered(inc, kind, id, notFound(id));
    if (holder !== undefined && holder !== row.provider) throw new ApiError(400, "the request names files held by different providers");
    holder = row.provider;
  }
  return holder;
}

/** Of `candidates`, those at `holder` (all of them when there is none); a 400 when none is. */
export function heldAt(candidates: Candidate[], holder: string | undefined, model: string): Candidate[] {
  if (holder === undefined) return candidates;
  const kept = candidates.filter((c) => c.provider === holder);
  if (!kept.length) throw new ApiError(400, `no provider for model '${model.slice(0, 200)}' holds the files this request names (provider ${holder} does)`);
  return kept;
}

/**
 * The copy of an upstream object kept for listings, with what the database cannot store
 * (NUL, lone surrogates: a file name or display name echoed from the client) replaced by
 * U+FFFD, so remembering an id never fails on its object. The client still gets the
 * upstream's answer as it was sent. JSON.stringify escapes exactly those as `\u....`.
 */
function storable(object: unknown): unknown {
  const text = JSON.stringify(object ?? null);
  return /\\u(0000|d[89a-f])/i.test(text) ? JSON.parse(text.replace(/(?<!\\)((?:\\\\)*)\\u(?:0000|d[89a-f][0-9a-f]{2})/gi, "$1\\ufffd")) : object;
}

/** The client's query string without `?` (undefined when empty). */
export function queryOf(request: Request): string | undefined {
  const q = request.url.indexOf("?");
  return q < 0 ? undefined : request.url.slice(q + 1) || undefined;
}
