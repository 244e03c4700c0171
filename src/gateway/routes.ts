import { Elysia, t } from "elysia";
import { requestContext } from "../http/core";
import { ApiError } from "../http/errors";
import type { Surface } from "../http/surfaces";
import type { Services } from "../services";
import { checkSystemLength, gatewayFor, textOf } from "./gateway";
import { createInteraction, getInteraction } from "./interactions";
import { genvendorModelRoutes, modelRoutes } from "./models";
import { responds, sse } from "../openapi/declare";
import type { DocumentPath } from "../openapi/paths";
import { CHAT_EVENTS, ChatCompletion, GENERATE_CONTENT_EVENTS, GenerateContentResponse, Interaction, INTERACTION_EVENTS, Message, MESSAGES_EVENTS, ResponseObject, RESPONSES_EVENTS } from "./response-schemas";
import { ChatBody, GenerateContentBody, InteractionBody, MAX_SYSTEM_CHARS, MessagesBody, ResponsesBody } from "./schemas";

const GENERATE = /^\/v1(beta)?\/models\/[^/]+:(generateContent|streamGenerateContent)$/;

/**
 * Model surfaces (spec: Authentication and Errors tables): family, credentials and the
 * spending-limit status per surface. `spendLimitStatus` also marks them as model
 * surfaces for rate limiting.
 */
export const gatewaySurfaces: Surface[] = [
  { prefix: "/v1/chat/completions", family: "chat", credentials: "bearer", scope: "models", spendLimitStatus: 402, passThrough: true },
  { prefix: "/v1/responses", family: "chat", credentials: "bearer", scope: "models", spendLimitStatus: 402, passThrough: true },
  { prefix: "/v1/messages", family: "messages", credentials: "messages", scope: "models", spendLimitStatus: 403, passThrough: true },
  { prefix: "/v1beta", family: "genvendor", credentials: "genvendor", scope: "models", spendLimitStatus: 403, passThrough: true },
  // The generative-vendor SDK defaults to API version v1: the same handlers under /v1.
  { prefix: "/v1/models", pattern: GENERATE, family: "genvendor", credentials: "genvendor", scope: "models", spendLimitStatus: 403, passThrough: true },
  { prefix: "/v1/interactions", family: "genvendor", credentials: "genvendor", scope: "models", spendLimitStatus: 403 },
  { prefix: "/v1/models", family: "chat", credentials: "bearer", scope: "models" },
  { prefix: "/api/models", family: "flat", credentials: "bearer", scope: "models" },
];

const tags = ["model gateway"];

/**
 * `{model}:generateContent` is one router parameter (model names may hold anything but
 * '/'); clients call two paths, published as such. The catalog lookup takes model ids
 * with slashes, hence a wildcard route, published with its parameter.
 */
export const gatewayDocumentPaths: Record<string, DocumentPath[]> = Object.fromEntries([
  ...["/v1beta", "/v1"].map((v) => {
    const suffix = v === "/v1" ? "V1" : "";
    const model = { model: "Model id (`models/` prefix optional), a route or `<provider>/<model>`" };
    return [
      `${v}/models/{call}`,
      [
        { path: `${v}/models/{model}:generateContent`, operationId: `generateContent${suffix}`, summary: `Generate content (${v})`, params: model },
        { path: `${v}/models/{model}:streamGenerateContent`, operationId: `streamGenerateContent${suffix}`, summary: `Generate content as a stream (${v})`, params: model },
      ],
    ];
  }),
  ["/v1/models/*", [{ path: "/v1/models/{id_or_name}", params: { id_or_name: "Model id, catalog display name, or `<provider>/<model>`" } }]],
]);
// Handlers destructure the context: Elysia prepares only what a handler names (a handler
// that hands its whole context to a function gets headers, cookies and query parsed on
// every request).

export function gatewayRoutes(s: Services) {
  const g = gatewayFor(s);
  const app = new Elysia()
    .use(requestContext)
    .post(
      "/v1/chat/completions",
      ({ body, request, auth, requestId, startedAt }) => {
        let system = 0;
        for (const m of body.messages) if (m.role === "system" || m.role === "developer") system += textOf(m.content).length;
        if (system > MAX_SYSTEM_CHARS) throw new ApiError(400, `the system prompt must be at most ${MAX_SYSTEM_CHARS} characters (got ${system})`);
        // Usage is read from the stream's last chunk; ask for it when the client did not,
        // and drop that chunk again on the way back.
        const wantsUsage = body.stream_options?.include_usage === true;
        const patch = body.stream === true && !wantsUsage ? { stream_options: { ...(body.stream_options ?? {}), include_usage: true } } : undefined;
        return g.forwardJson("chat", { request, auth, requestId, startedAt }, body, { patch, stripUsage: patch !== undefined });
      },
      {
        body: ChatBody,
        detail: {
          tags,
          operationId: "createChatCompletion",
          ...responds({ 200: sse(CHAT_EVENTS, ChatCompletion) }, [404, 502, 503, 504]),
          summary: "Chat completions",
          description:
            "OpenAI-compatible chat completions. `model` is a public model name, a configured route or `<provider>/<model>`. Streams (`stream: true`) are SSE ending with `data: [DONE]`. Errors before streaming use the chat error shape; after streaming started they arrive as a `data: {\"error\":...}` chunk. 402 when the key's spending limit is reached.",
        },
      },
    )
    .post(
      "/v1/messages",
      ({ body, request, auth, requestId, startedAt }) => {
        checkSystemLength(textOf(body.system), "system");
        return g.forwardJson("messages", { request, auth, requestId, startedAt }, body);
      },
      {
        body: MessagesBody,
        detail: {
          tags,
          operationId: "createMessage",
          ...responds({ 200: sse(MESSAGES_EVENTS, Message) }, [404, 502, 503, 504, 529]),
          summary: "Messages",
          description:
            "Messages protocol. Credentials: `x-api-key`, then Bearer. `anthropic-version` (neutral spelling `msgvendor-version`) defaults to 2023-06-01 and is forwarded; `anthropic-beta` (`msgvendor-beta`) is forwarded, filtered by the provider's compatibility rules. Streams keep the strict event order and get `ping` events about every 15 s while idle. 403 when the key's spending limit is reached.",
        },
      },
    )
    .post(
      "/v1/responses",
      ({ body, request, auth, requestId, startedAt }) => {
        checkSystemLength(typeof body.instructions === "string" ? body.instructions : undefined, "instructions");
        return g.forwardJson("responses", { request, auth, requestId, startedAt }, body);
      },
      { body: ResponsesBody, detail: { tags, operationId: "createResponse", ...responds({ 200: sse(RESPONSES_EVENTS, ResponseObject) }, [404, 502, 503, 504]), summary: "Responses", description: "Responses protocol, forwarded to providers that speak it natively. 402 when the key's spending limit is reached." } },
    );
  for (const v of ["/v1beta", "/v1"]) {
    // The same operations under /v1 (the vendor SDK's default API version) get their own ids.
    const id = (name: string) => (v === "/v1" ? `${name}V1` : name);
    app
      .post(
        `${v}/models/:call`,
        ({ body, params, request, auth, requestId, startedAt }) => {
          const call = params.call;
          const colon = call.lastIndexOf(":");
          const action = colon < 0 ? "" : call.slice(colon + 1);
          if (action !== "generateContent" && action !== "streamGenerateContent") throw new ApiError(404, `unknown method '${action || call}'`);
          const model = decodeURIComponent(call.slice(0, colon)).replace(/^models\//, "");
          const sys = body.systemInstruction;
          checkSystemLength(typeof sys === "string" ? sys : textOf((sys as { parts?: unknown })?.parts), "systemInstruction");
          return g.forwardPathModel("generateContent", { request, auth, requestId, startedAt }, model, action === "streamGenerateContent", body);
        },
        {
          body: GenerateContentBody,
          params: t.Object({ call: t.String() }),
          detail: {
            tags,
            ...responds({ 200: sse(GENERATE_CONTENT_EVENTS, GenerateContentResponse) }, [404, 501, 502, 503, 504]),
            summary: `generateContent / streamGenerateContent (${v})`,
            description:
              "Generative-vendor native protocol: `{model}:generateContent`, or `{model}:streamGenerateContent` for SSE. Credentials: `x-goog-api-key` (neutral `x-genvendor-api-key`), Bearer, or `?key=`. 403 when the key's spending limit is reached.",
          },
        },
      )
      .post(`${v}/interactions`, ({ body, request, auth, requestId, startedAt }) => createInteraction(g, { request, auth, requestId, startedAt }, body, v), {
        body: InteractionBody,
        detail: {
          tags,
          operationId: id("createInteraction"),
          ...responds({ 200: sse(INTERACTION_EVENTS, Interaction) }, [404, 409, 502, 503, 504]),
          summary: `Create an Interaction (${v})`,
          description:
            "Creates an Interaction at a provider that serves Interactions natively. Returns 200 whatever the `status`; an `in_progress` one carries a `Location` to poll. `background` cannot be combined with `stream`. `previous_interaction_id` continues at the provider that created it, or fails.",
        },
      })
      .get(`${v}/interactions/:id`, ({ params, request, auth, requestId, startedAt }) => getInteraction(g, { request, auth, requestId, startedAt }, params.id, v), {
        params: t.Object({ id: t.String({ minLength: 1 }) }),
        detail: { tags, operationId: id("getInteraction"), ...responds({ 200: Interaction }, [404, 502, 503, 504]), summary: `Get an Interaction (${v})`, description: "Reads an Interaction; only the API key that created it can read it (404 otherwise)." },
      });
  }
  return app.use(modelRoutes(s, g)).use(genvendorModelRoutes(s, g));
}
