import { and, eq } from "drizzle-orm";
import { ApiError } from "../http/errors";
import type { Gateway, Incoming } from "./gateway";
import { forward } from "./forward";
import type { Candidate } from "./router";
import { lossyCopy } from "./interaction-copy";
import { gatewayInteractions } from "./schema";

const TERMINAL = new Set(["completed", "failed", "cancelled", "incomplete"]);

/**
 * Interactions (spec: Generative-vendor Interactions). The upstream id is the public id;
 * the provider that created it is remembered so reads and `previous_interaction_id`
 * go back to that provider and fail rather than switch (another provider cannot know it).
 */
export async function createInteraction(g: Gateway, inc: Incoming, body: Record<string, any> & { model: string }, prefix: string): Promise<Response> {
  if (body.background === true && body.stream === true) throw new ApiError(400, "background cannot be combined with stream");
  if (body.agent !== undefined) throw new ApiError(400, "agent Interactions are not supported; give a model");
  let candidates: Candidate[] | undefined;
  if (body.previous_interaction_id) {
    const row = await find(g, inc, body.previous_interaction_id);
    if (!row) throw new ApiError(400, `previous_interaction_id '${body.previous_interaction_id}' has no provider affinity here; it cannot be continued`);
    candidates = g.router.candidates(body.model, "interactions", g.compat("interactions", inc, body.stream === true)).filter((c) => c.provider === row.provider);
    if (!candidates.length) {
      throw new ApiError(400, `previous_interaction_id '${body.previous_interaction_id}' belongs to provider ${row.provider}, which does not serve model '${body.model}'`);
    }
  }
  const remember = async (id: unknown, c: Candidate, metered: boolean, finished?: unknown) => {
    if (typeof id !== "string" || !id) return;
    await g.s.db
      .insert(gatewayInteractions)
      .values({ id, organizationId: inc.auth.organizationId, keyId: inc.auth.key.id, provider: c.provider, upstreamModel: c.model, publicModel: body.model, metered, stored: finished === undefined ? null : lossyCopy(finished) })
      // An id already taken stays with its first owner: nobody can claim another key's Interaction.
      .onConflictDoNothing();
  };
  // Rule 1: a synchronous create answers 200 within a bounded wait, finished or not. The
  // upstream is asked to run it in the background (so it answers with the id at once) and
  // polled until it finishes or the wait is over; then it is read once more the ordinary
  // way (usage counted on the first terminal read, `Location` while in progress). Not
  // when the client turned storage off: the upstream keeps no background Interaction then.
  const bounded = body.stream !== true && body.background !== true && body.store !== false;
  const deadline = Date.now() + g.deps.options.interactionWaitMs;
  let createdBy: Candidate | undefined;
  const res = await g.forwardJson("interactions", inc, body, {
    candidates,
    patch: bounded ? { background: true } : undefined,
    extra: {
      async onBody(json, c, headers) {
        createdBy = c;
        const terminal = TERMINAL.has(json.status);
        await remember(json.id, c, terminal, terminal ? json : undefined);
        if (json.status === "in_progress" && typeof json.id === "string") headers.set("location", `${prefix}/interactions/${encodeURIComponent(json.id)}`);
        // Usage to date of a running Interaction is not metered: its first terminal read counts the whole.
        if (!terminal) return false;
      },
      async onStreamStart(first, c) {
        // The first event (interaction.created) carries the id.
        const m = /"id"\s*:\s*"([^"]+)"/.exec(typeof first === "string" ? first : new TextDecoder().decode(first));
        await remember(m?.[1], c, true);
      },
    },
  });
  if (body.stream === true || res.status !== 200 || !createdBy) return res;
  const text = await res.text();
  const json = parseJson(text);
  if (!bounded || json?.status !== "in_progress" || typeof json.id !== "string") return withoutPartialOutput(text, json, res);
  await waitWhileInProgress(createdBy, inc, json.id, deadline);
  return getInteraction(g, inc, json.id, prefix);
}

/**
 * Spec: non-terminal reads omit partial output and usage. An upstream that reports them
 * while the Interaction is still running (in_progress, requires_action) has them removed;
 * terminal answers and anything that is not an Interaction pass unchanged.
 */
function withoutPartialOutput(text: string, json: any, res: Response): Response {
  if (!json || typeof json !== "object" || typeof json.status !== "string" || TERMINAL.has(json.status) || !("outputs" in json || "usage" in json)) {
    return new Response(text, { status: res.status, headers: res.headers });
  }
  const { outputs: _outputs, usage: _usage, ...rest } = json;
  return new Response(JSON.stringify(rest), { status: res.status, headers: res.headers });
}

/** Upstream polls during the bounded wait: quick at first, for short Interactions, then every 2 s. */
const POLL_STEPS_MS = [200, 300, 500, 1000, 2000];

/** Polls the upstream (unmetered reads) until the Interaction is no longer in progress, the deadline passes or the client leaves. */
async function waitWhileInProgress(c: Candidate, inc: Incoming, id: string, deadline: number): Promise<void> {
  for (let i = 0; !inc.request.signal.aborted; i++) {
    const left = deadline - Date.now();
    if (left <= 0) return;
    await Bun.sleep(Math.min(POLL_STEPS_MS[Math.min(i, POLL_STEPS_MS.length - 1)], left));
    try {
      const res = await c.upstream.send({
        protocol: "interactions",
        model: c.model,
        stream: false,
        clientHeaders: inc.request.headers,
        signal: AbortSignal.any([inc.request.signal, AbortSignal.timeout(Math.max(deadline - Date.now(), 1))]),
        interactionId: id,
      });
      const status = parseJson(await res.text())?.status;
      // Finished, or a failed read: the final read reports either as it is.
      if (!res.ok || status !== "in_progress") return;
    } catch {
      return;
    }
  }
}

function parseJson(text: string): any {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

export async function getInteraction(g: Gateway, inc: Incoming, id: string, prefix: string): Promise<Response> {
  const row = await find(g, inc, id);
  // Threat: reading another key's Interaction by guessing its id. Unknown and foreign ids look the same.
  if (!row) throw new ApiError(404, "interaction not found");
  const entry = g.providers.get(row.provider);
  if (!entry) {
    if (row.stored) return storedCopy(row.stored);
    throw new ApiError(503, `provider ${row.provider} of this interaction is no longer configured`);
  }
  const candidate: Candidate = { provider: row.provider, upstream: entry.provider, model: row.upstreamModel, key: `${row.provider}/${row.upstreamModel}` };
  const res = await forward(g.deps, {
    protocol: "interactions",
    publicModel: row.publicModel,
    stream: false,
    candidates: [candidate],
    body: () => undefined,
    interactionId: id,
    ...inc,
    async onBody(json, _c, headers) {
      if (json.status === "in_progress") headers.set("location", `${prefix}/interactions/${encodeURIComponent(id)}`);
      if (TERMINAL.has(json.status) && row.stored == null) {
        await g.s.db.update(gatewayInteractions).set({ stored: lossyCopy(json) }).where(eq(gatewayInteractions.id, id));
      }
      if (row.metered || !TERMINAL.has(json.status)) return false;
      // Count a background Interaction's usage once, on the first terminal read.
      const won = await g.s.db
        .update(gatewayInteractions)
        .set({ metered: true })
        .where(and(eq(gatewayInteractions.id, id), eq(gatewayInteractions.metered, false)))
        .returning({ id: gatewayInteractions.id });
      return won.length > 0;
    },
  });
  // Rule 6: the upstream no longer keeps it (retention expired): the stored copy, marked lossy.
  if (res.status === 404 && row.stored) return storedCopy(row.stored);
  if (res.status !== 200) return res;
  const text = await res.text();
  return withoutPartialOutput(text, parseJson(text), res);
}

function storedCopy(stored: unknown): Response {
  return Response.json(stored, { headers: { "x-interaction-copy": "lossy" } });
}

async function find(g: Gateway, inc: Incoming, id: string) {
  const [row] = await g.s.db
    .select()
    .from(gatewayInteractions)
    .where(and(eq(gatewayInteractions.id, id), eq(gatewayInteractions.organizationId, inc.auth.organizationId), eq(gatewayInteractions.keyId, inc.auth.key.id)));
  return row;
}
