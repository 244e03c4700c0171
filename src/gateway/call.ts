import { checkBudgets } from "../budgets";
import { checkKey } from "../http/auth";
import type { Surface } from "../http/surfaces";
import { newId } from "../ids";
import type { KeyRecord } from "../keys/keys";
import type { Services } from "../services";
import { gatewayFor } from "./gateway";
import { type Protocol, PROTOCOL_SPECS, surfacesOf } from "./protocols";

/** Protocols whose request body names the model, the ones an in-process caller can use. */
export type JsonProtocol = "chat" | "messages" | "responses";

/** Each protocol's first surface: the one its HTTP route authenticates on. */
const SURFACES = Object.fromEntries(PROTOCOL_SPECS.map((spec) => [spec.name, surfacesOf(spec)[0]])) as Record<Protocol, Surface>;

/** The protocols a model's providers serve natively (404 ApiError for an unknown model). */
export function protocolsOf(s: Services, model: string): Protocol[] {
  return gatewayFor(s).router.protocolsOf(model);
}

/**
 * The gateway as an in-process API: one model request (not streamed: `body.stream` unset) made with a key's
 * authority, e.g. by the agent loop for a session. Threat: code inside the service
 * acting for a key must not get past what that key may do over HTTP, so the key goes
 * through the surface's own check (revoked, expired, scope, spending limit: the same
 * ApiErrors an HTTP client gets), then the request takes the surfaces' data path
 * (router, fallback, metering charged to the key). `key` null: the key no longer exists.
 */
export async function callGateway(
  s: Services,
  protocol: JsonProtocol,
  key: KeyRecord | null,
  body: Record<string, unknown> & { model: string; stream?: false },
  signal: AbortSignal,
): Promise<{ ok: boolean; status: number; text: string }> {
  const surface = SURFACES[protocol];
  const auth = checkKey(key, surface);
  checkBudgets(s, auth, surface);
  // The data path reads only the abort signal and the (here empty) client headers of a request.
  const request = new Request(`http://in-process${surface.prefix}`, { method: "POST", signal });
  const res = await gatewayFor(s).forwardJson(protocol, { request, auth, requestId: newId("req_"), startedAt: performance.now() }, body);
  return { ok: res.ok, status: res.status, text: await res.text() };
}
