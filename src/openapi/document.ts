import { toOpenAPISchema } from "@elysiajs/openapi";
import type { AnyElysia } from "elysia";
import type { SurfaceTable } from "../http/surfaces";
import { SERVICE_VERSION } from "../version";
import { DECLARED, type Declared, type Success } from "./declare";
import { ERROR_COMPONENTS, ErrorResponses, SECURITY_SCHEMES, securityFor, surfaceErrorStatuses } from "./errors";
import { type DocumentPath, publishPaths } from "./paths";
import { SchemaPublisher } from "./schemas";

export const TITLE = "Model gateway, sandbox and agents API";

const INFO = {
  title: TITLE,
  version: SERVICE_VERSION,
  description:
    "One API key for a model gateway (OpenAI, messages and Gemini-compatible surfaces), an E2B-style sandbox API and managed agents. " +
    "Error bodies differ per endpoint family (flat, agent, chat, messages, genvendor, sandbox); each operation documents its own.",
  license: { name: "Apache-2.0", identifier: "Apache-2.0" },
};

/**
 * The tags in the order a reader meets the products: the model gateway first (what most
 * callers come for), then sandboxes, agents, and the service's own endpoints, admin last.
 * The renderer lists tags in the document's order and opens on the first.
 */
const TAGS: [name: string, description: string][] = [
  ["model gateway", "Chat completions, messages, responses, embeddings, token counts, generateContent, embedContent, Interactions and model lists"],
  ["asynchronous generation", "Image, audio and video models as predictions; task costs"],
  ["usage", "Usage and the request log of the key's organization"],
  ["sandboxes", "E2B-style sandboxes: lifecycle, processes and files"],
  ["templates", "Sandbox templates of the organization: builds from a Dockerfile or E2B's steps, their logs, tags and deletion"],
  ["events", "Sandbox lifecycle events and webhooks"],
  ["agents", "Managed agents and their versions"],
  ["environments", "Sandbox configurations for agent sessions"],
  ["sessions", "Agent sessions and their events"],
  ["skills", "Skill bundles for agents"],
  ["endpoints", "An agent and environment behind one run call"],
  ["deployments", "Agent runs on a schedule or on demand"],
  ["mcp", "The MCP gateway: one MCP endpoint over the organization's MCP servers, and those servers"],
  ["operations", "Service index and health checks"],
  ["admin", "Organizations and API keys (ADMIN_TOKEN)"],
];
const TAG_ORDER = new Map(TAGS.map(([name], i) => [name, i]));
const TAG_DESCRIPTIONS = new Map(TAGS);

/** Known tags in product order; a tag not listed yet goes after them, before admin, alphabetically. */
function byProduct(a: string, b: string): number {
  const rank = (t: string) => TAG_ORDER.get(t) ?? TAG_ORDER.get("admin")! - 0.5;
  return rank(a) - rank(b) || a.localeCompare(b);
}

const METHODS = ["get", "put", "post", "delete", "patch", "head", "options", "trace"];

export interface DocumentSources {
  app: AnyElysia;
  surfaces: SurfaceTable;
  /** Router paths that are published under other paths (see ./paths.ts). */
  paths?: Record<string, DocumentPath[]>;
}

/**
 * The OpenAPI 3.1 document of the service, generated from the same TypeBox schemas that
 * validate requests, then made into a contract clients can be generated from: declared
 * responses for every status, family error components, security per surface, named
 * component schemas, and no keyword that is not OpenAPI's.
 */
export function buildOpenApiDocument({ app, surfaces, paths: rewrites = {} }: DocumentSources): Record<string, any> {
  const generated = generate(app);
  const schemas = new SchemaPublisher();
  const errors = new ErrorResponses();
  const paths = publishPaths(generated.paths, rewrites);
  const tags = new Set<string>();
  for (const [path, item] of Object.entries(paths)) {
    for (const method of METHODS) {
      const op = item[method];
      if (!op) continue;
      const surface = surfaces.match(path.replace(/\{[^}]+\}/g, "x"));
      const declared = op[DECLARED] as Declared | undefined;
      delete op[DECLARED];
      const responses: Record<string, any> = {};
      // A route that declares 429 itself refuses past a quota in its family's shape, besides the flat rate-limit body.
      const quota429 = "429" in ((op.responses ?? {}) as Record<string, unknown>);
      for (const [status, res] of Object.entries((op.responses ?? {}) as Record<string, any>)) responses[status] = res;
      for (const [status, success] of Object.entries(declared?.success ?? {})) responses[status] = successResponse(Number(status), success);
      const hasPathParams = /\{[^}]+\}/.test(path);
      for (const status of [...surfaceErrorStatuses(surface, method, hasPathParams), ...(declared?.errors ?? [])]) responses[String(status)] = {};
      for (const status of Object.keys(responses)) {
        if (Number(status) >= 400) responses[status] = errors.ref(surface, Number(status), quota429);
        else responses[status] = publishResponse(responses[status], schemas);
      }
      op.responses = sortByStatus(responses);
      op.security = securityFor(surface);
      for (const p of op.parameters ?? []) p.schema = schemas.publish(p.schema);
      for (const media of Object.values((op.requestBody?.content ?? {}) as Record<string, { schema: unknown }>)) media.schema = schemas.publish(media.schema);
      for (const tag of op.tags ?? []) tags.add(tag);
    }
  }
  return {
    openapi: "3.1.0",
    info: INFO,
    tags: [...tags].sort(byProduct).map((name) => (TAG_DESCRIPTIONS.has(name) ? { name, description: TAG_DESCRIPTIONS.get(name) } : { name })),
    paths,
    components: {
      securitySchemes: SECURITY_SCHEMES,
      schemas: { ...ERROR_COMPONENTS, ...sortKeys(schemas.components) },
      responses: sortKeys(errors.components),
    },
  };
}

/** Elysia's generator, with request bodies declared as JSON (the only type the service parses). */
function generate(app: AnyElysia): { paths: Record<string, Record<string, any>> } {
  // The plugin documents a body's media types from the route's named parsers; ours is an
  // unnamed global hook, so hide it while generating (synchronously: no request can run
  // in between) and declare application/json below.
  const hidden: [{ parse?: unknown }, unknown][] = [];
  for (const route of app.routes as { hooks?: { parse?: { fn: unknown }[] } }[]) {
    const parse = route.hooks?.parse;
    if (parse?.every((p) => typeof p.fn === "function")) {
      hidden.push([route.hooks!, parse]);
      route.hooks!.parse = undefined;
    }
  }
  let generated: { paths: Record<string, Record<string, any>> };
  try {
    // Deep-copied: the generator hands out the routes' own schema objects, which the
    // publication steps below rewrite.
    generated = JSON.parse(JSON.stringify(toOpenAPISchema(app, undefined, undefined, undefined, "3.1.0"))) as typeof generated;
  } finally {
    for (const [hooks, parse] of hidden) hooks.parse = parse;
  }
  for (const item of Object.values(generated.paths)) {
    for (const op of Object.values(item)) {
      const content = op?.requestBody?.content;
      if (content?.["application/json"]) op.requestBody.content = { "application/json": content["application/json"] };
    }
  }
  return generated;
}

const SUCCESS_DESCRIPTIONS: Record<number, string> = { 200: "OK", 201: "Created", 202: "Accepted, still running", 204: "No content", 101: "Switching protocols" };

function successResponse(status: number, success: Success): Record<string, unknown> {
  const description = SUCCESS_DESCRIPTIONS[status] ?? "Success";
  if (success === null) return { description };
  if ("sse" in success && typeof success.sse === "string") {
    const content: Record<string, unknown> = {
      "text/event-stream": { schema: { type: "string", description: `Server-sent events. ${success.sse}` } },
    };
    if (success.json) content["application/json"] = { schema: success.json };
    return { description, content };
  }
  if ("binary" in success && typeof success.binary === "string") {
    return { description: success.binary, content: { [success.mediaType]: { schema: { type: "string", contentMediaType: success.mediaType === "*/*" ? "application/octet-stream" : success.mediaType } } } };
  }
  return { description, content: { "application/json": { schema: success } } };
}

function publishResponse(res: Record<string, any>, schemas: SchemaPublisher): Record<string, unknown> {
  const out = { ...res };
  if (out.content) {
    out.content = Object.fromEntries(Object.entries(out.content as Record<string, { schema?: unknown }>).map(([type, media]) => [type, { ...media, schema: schemas.publish(media.schema) }]));
  }
  if (!out.description) out.description = "Success";
  return out;
}

function sortByStatus(responses: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(Object.entries(responses).sort(([a], [b]) => a.localeCompare(b)));
}

function sortKeys(o: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(Object.entries(o).sort(([a], [b]) => a.localeCompare(b)));
}
