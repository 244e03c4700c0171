import { t } from "elysia";
import { named } from "../../openapi/declare";
import { MAX_SYSTEM_CHARS, modelField, open } from "../schemas";
import { GENVENDOR_STREAM_STATUS } from "./genvendor";
import { cached, count, defineProtocol, parseJson } from "./spec";

/**
 * Interactions (generative vendor): a resource created with `POST {version}/interactions`
 * and read with `GET {version}/interactions/{id}`; its routes live in src/gateway/interactions.ts.
 */
const InteractionBody = named(
  "InteractionRequest",
  t.Object(
  {
    model: modelField,
    input: t.Union([t.String(), t.Object({}, open), t.Array(t.Any())], { error: "input is required: a string, an object or an array" }),
    stream: t.Optional(t.Boolean({ error: "stream must be a boolean" })),
    background: t.Optional(t.Boolean({ error: "background must be a boolean" })),
    previous_interaction_id: t.Optional(t.String({ minLength: 1 })),
    store: t.Optional(t.Boolean()),
    system_instruction: t.Optional(t.String({ maxLength: MAX_SYSTEM_CHARS, error: `system_instruction must be at most ${MAX_SYSTEM_CHARS} characters` })),
    tools: t.Optional(t.Array(t.Any())),
    generation_config: t.Optional(t.Object({}, open)),
    response_format: t.Optional(t.Union([t.Object({}, open), t.Array(t.Any())])),
    response_modalities: t.Optional(t.Array(t.Any())),
  },
  { ...open, description: "Interaction create request; fields beyond these are forwarded unchanged" },
  ),
);

export const interactions = defineProtocol({
  name: "interactions",
  label: "Interactions",
  route: { kind: "resource", body: InteractionBody },
  surfaces: [{ prefix: "/v1/interactions" }],
  credentials: "genvendor",
  errorFamily: "genvendor",
  spendLimitStatus: 403,
  // Finished Interactions are stored (a copy outlives the upstream's retention).
  passThrough: false,
  codec: {
    // Event types are open-ended (spec: forwarded unfiltered), so no event is required last.
    hasTerminalEvent: false,
    lastEventIsTerminal: false,
    markers: ['"total_input_tokens"', '"total_output_tokens"'],
    usageFromBody(json, u) {
      u.inputTokens = count(json?.usage?.total_input_tokens);
      u.outputTokens = count(json?.usage?.total_output_tokens);
      cached(u, json?.usage?.total_cached_tokens);
    },
    onEvent(ev, u) {
      if (!ev.data.includes('"total_input_tokens"') && !ev.data.includes('"total_output_tokens"')) return undefined;
      const json = parseJson(ev.data);
      const usage = json?.usage ?? json?.interaction?.usage;
      if (usage) {
        u.inputTokens = count(usage.total_input_tokens);
        u.outputTokens = count(usage.total_output_tokens);
        cached(u, usage.total_cached_tokens);
      }
      return undefined;
    },
    errorEvent: (status, message) =>
      `event: error\ndata: ${JSON.stringify({ event_type: "error", error: { code: GENVENDOR_STREAM_STATUS[status] ?? "INTERNAL", message } })}\n\n`,
  },
});
