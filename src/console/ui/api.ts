/**
 * The console's one way to the service: the signed-in credential from sessionStorage as
 * a Bearer token, same-origin only. Errors of every family ({error}, {error:{message}},
 * {code,message}) become one message to show.
 */
const STORAGE_KEY = "gateway-console-token";

export type Mode = "admin" | "organization";

export interface Session {
  mode: Mode;
}

export function storedToken(): string | null {
  return sessionStorage.getItem(STORAGE_KEY);
}

export function storeToken(token: string | null): void {
  if (token === null) sessionStorage.removeItem(STORAGE_KEY);
  else sessionStorage.setItem(STORAGE_KEY, token);
}

export class ApiFailure extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

function messageOf(body: unknown, status: number): string {
  const b = body as { error?: unknown; message?: unknown } | null;
  if (b && typeof b.error === "string") return b.error;
  if (b && b.error && typeof (b.error as { message?: unknown }).message === "string") return (b.error as { message: string }).message;
  if (b && typeof b.message === "string") return b.message;
  return `request failed with status ${status}`;
}

export async function api<T = any>(path: string, init: { method?: string; body?: unknown; token?: string } = {}): Promise<T> {
  const token = init.token ?? storedToken();
  const headers: Record<string, string> = {};
  if (token) headers.authorization = `Bearer ${token}`;
  if (init.body !== undefined) headers["content-type"] = "application/json";
  const res = await fetch(path, { method: init.method ?? "GET", headers, body: init.body === undefined ? undefined : JSON.stringify(init.body) });
  const text = await res.text();
  let body: unknown = null;
  try {
    body = text ? JSON.parse(text) : null;
  } catch {
    body = null;
  }
  if (!res.ok) throw new ApiFailure(res.status, messageOf(body, res.status));
  return body as T;
}

/** Which kind of credential this is: the admin token opens /admin, an organization key /v1/usage. */
export async function signIn(token: string): Promise<Mode> {
  try {
    await api("/admin/organizations", { token });
    return "admin";
  } catch (e) {
    if (!(e instanceof ApiFailure) || (e.status !== 401 && e.status !== 404)) throw e;
  }
  try {
    await api("/v1/usage/requests?limit=1", { token });
    return "organization";
  } catch (e) {
    if (e instanceof ApiFailure && e.status === 403) throw new ApiFailure(403, "this key may not read usage: give it scope `usage` (or no scopes)");
    if (e instanceof ApiFailure && e.status === 401) throw new ApiFailure(401, "neither the admin token nor an API key: check what you pasted");
    throw e;
  }
}

/** Where each resource lives for the signed-in credential: the admin reaches one organization's through /admin. */
export function paths(mode: Mode, org: string | undefined) {
  const base = mode === "admin" ? `/admin/organizations/${encodeURIComponent(org ?? "")}` : "";
  return {
    sandboxes: mode === "admin" ? `${base}/sandboxes` : "/sandboxes",
    sessions: mode === "admin" ? `${base}/sessions` : "/v1/sessions",
    sessionEvents: (id: string) => (mode === "admin" ? `${base}/sessions/${encodeURIComponent(id)}/events` : `/v1/sessions/${encodeURIComponent(id)}/events`),
    webhooks: mode === "admin" ? `${base}/webhooks` : "/events/webhooks",
    deliveries: (id: string) => (mode === "admin" ? `${base}/webhooks/${encodeURIComponent(id)}/deliveries` : `/events/webhooks/${encodeURIComponent(id)}/deliveries`),
    usage: mode === "admin" ? "/admin/usage" : "/v1/usage",
    requests: mode === "admin" ? "/admin/usage/requests" : "/v1/usage/requests",
  };
}

export function query(params: Record<string, string | number | undefined | null>): string {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== null && v !== "") q.set(k, String(v));
  const s = q.toString();
  return s ? `?${s}` : "";
}
