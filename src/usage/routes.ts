import { Elysia, t } from "elysia";
import { requestContext } from "../http/core";
import type { Surface } from "../http/surfaces";
import { named } from "../openapi/declare";
import type { Services } from "../services";
import { usageOverview } from "./overview";
import { type Dimension, type Interval, requestLogPage, timeRange, type UsageFilter, usageBuckets } from "./queries";

/**
 * Usage and the request log of the caller's organization, for keys holding scope `usage`
 * (keys without scopes hold every scope). Flat `{error}` bodies, like the admin API.
 */
export const usageSurface: Surface = { prefix: "/v1/usage", family: "flat", credentials: "bearer", scope: "usage" };

const ErrorSchema = t.Object({ error: t.String() });

const BucketSchema = t.Object({
  start: t.String({ format: "date-time", description: "Start of the UTC hour or day" }),
  group: t.Union([t.String(), t.Null()], { description: "The groupBy value (model, provider, key id, surface or organization id); null for groupBy=none or a request that reached no provider" }),
  requests: t.Integer(),
  inputTokens: t.Integer(),
  outputTokens: t.Integer(),
  cachedTokens: t.Integer({ description: "Input tokens read from the provider's prompt cache, as the provider reports them (part of inputTokens)" }),
  cacheWriteTokens: t.Integer({ description: "Input tokens written to the provider's prompt cache (part of inputTokens)" }),
  reasoningTokens: t.Integer({ description: "Output tokens spent on reasoning (part of outputTokens)" }),
  cost: t.Number({ description: "USD (requests without a known price count 0)" }),
});

const UsageSchema = named("Usage", t.Object({
  object: t.Literal("usage"),
  from: t.String({ format: "date-time" }),
  to: t.String({ format: "date-time" }),
  interval: t.Union([t.Literal("hour"), t.Literal("day")]),
  groupBy: t.String(),
  buckets: t.Array(BucketSchema),
}));

const LogEntrySchema = named("RequestLogEntry", t.Object({
  id: t.String({ description: "Row id (insertion order)" }),
  time: t.String({ format: "date-time" }),
  organizationId: t.String(),
  organizationName: t.Union([t.String(), t.Null()], { description: "The organization's name now; null when it no longer exists" }),
  keyId: t.String(),
  keyName: t.Union([t.String(), t.Null()], { description: "The key's name now; null when it no longer exists" }),
  requestId: t.String({ description: "X-Request-ID of the request" }),
  surface: t.String({ description: "Protocol: chat, responses, messages, generateContent, interactions, generation; `mcp` for MCP gateway tool calls (model: `<server>__<tool>`, provider: the server)" }),
  model: t.String({ description: "Model name the client asked for" }),
  upstreamModel: t.Union([t.String(), t.Null()]),
  provider: t.Union([t.String(), t.Null()]),
  attempts: t.Integer({ description: "Upstream tries, fallbacks included" }),
  failedAttempts: t.Array(
    t.Object({
      provider: t.String(),
      model: t.String({ description: "Upstream model id tried" }),
      status: t.Integer({ description: "The upstream's status; 0 when it gave none (unreachable, timed out)" }),
      error: t.String({ description: "Why the try failed (clipped)" }),
    }),
    { description: "The tries that failed before the answer (fallbacks), oldest first; empty when the first try answered" },
  ),
  status: t.Integer(),
  streamed: t.Boolean(),
  outputTokens: t.Integer(),
  inputTokens: t.Integer({ description: "Every prompt token, cache reads and writes included" }),
  cachedTokens: t.Integer({ description: "Prompt-cache reads (part of inputTokens)" }),
  cacheWriteTokens: t.Integer({ description: "Prompt-cache writes, every TTL (part of inputTokens)" }),
  cacheWrite1hTokens: t.Integer({ description: "Prompt-cache writes with the one-hour TTL (part of cacheWriteTokens)" }),
  reasoningTokens: t.Integer({ description: "Reasoning tokens (part of outputTokens)" }),
  inputAudioTokens: t.Integer({ description: "Audio tokens (part of inputTokens)" }),
  outputAudioTokens: t.Integer({ description: "Audio tokens (part of outputTokens)" }),
  estimated: t.Boolean({ description: "The counts are the gateway's estimate: a stream cut off before the provider reported usage" }),
  cost: t.Union([t.Number(), t.Null()], { description: "USD, each part at its own price; null when the model has no known price" }),
  latencyMs: t.Integer(),
  requestBody: t.Union([t.String(), t.Null()], { description: "Only with REQUEST_LOG_BODIES=true, clipped" }),
  responseBody: t.Union([t.String(), t.Null()], { description: "Non-streamed answers only, with REQUEST_LOG_BODIES=true, clipped" }),
  responseBytes: t.Integer({ description: "Size of the answer in bytes where the surface measures it (MCP tool calls: the tool result's JSON); 0 otherwise" }),
}));

const LogPageSchema = named("RequestLogPage", t.Object({
  object: t.Literal("list"),
  data: t.Array(LogEntrySchema),
  nextCursor: t.Union([t.String(), t.Null()], { description: "Pass as `cursor` for the next (older) page; null on the last page" }),
}));

const FiguresProps = {
  requests: t.Integer(),
  errors: t.Integer({ description: "Requests answered with status 400 or above (client cancellations, 499, included)" }),
  p50LatencyMs: t.Union([t.Number(), t.Null()], { description: "Median time from arrival to the end of the answer; null without requests" }),
  p99LatencyMs: t.Union([t.Number(), t.Null()]),
  inputTokens: t.Integer(),
  outputTokens: t.Integer(),
  cachedTokens: t.Integer({ description: "Prompt-cache reads (part of inputTokens)" }),
  cost: t.Number({ description: "USD (requests without a known price count 0)" }),
};

const OverviewSchema = named("UsageOverview", t.Object({
  object: t.Literal("usage.overview"),
  from: t.String({ format: "date-time" }),
  to: t.String({ format: "date-time" }),
  interval: t.Union([t.Literal("hour"), t.Literal("day")]),
  groupBy: t.String(),
  totals: t.Object(FiguresProps),
  buckets: t.Array(t.Object({ start: t.String({ format: "date-time", description: "Start of the UTC hour or day; buckets without requests are left out" }), ...FiguresProps })),
  groups: t.Array(
    t.Object({
      group: t.Union([t.String(), t.Null()], { description: "The groupBy value (model, provider, key id, organization id); null for requests that reached no provider" }),
      name: t.Union([t.String(), t.Null()], { description: "The key's or organization's name; the value itself for the other dimensions" }),
      ...FiguresProps,
    }),
    { description: "The 20 busiest groups over the range" },
  ),
}));

const text = (description: string) => t.Optional(t.String({ minLength: 1, maxLength: 256, description }));
const filters = {
  from: t.Optional(t.String({ description: "ISO 8601 date-time, inclusive" })),
  to: t.Optional(t.String({ description: "ISO 8601 date-time, exclusive (default: now)" })),
  keyId: text("Only this key's requests"),
  model: text("Only this model (as the client named it)"),
  provider: text("Only this provider"),
  surface: text("Only this surface (chat, responses, messages, generateContent, interactions, generation)"),
};
const orgDimensions = ["model", "provider", "key", "surface", "none"] as const;
const usageQuery = (dimensions: readonly string[]) =>
  t.Object({
    ...filters,
    interval: t.Optional(t.Union([t.Literal("hour"), t.Literal("day")], { description: "Bucket size (default day)" })),
    groupBy: t.Optional(t.Union(dimensions.map((d) => t.Literal(d)), { description: "Split each bucket by this dimension (default none)" })),
  });
const logQuery = t.Object({
  ...filters,
  status: t.Optional(t.String({ description: "A status (429), a class (4xx) or `error` (400 and above)" })),
  requestId: text("Only this request (its X-Request-ID)"),
  limit: t.Optional(t.Numeric({ minimum: 1, maximum: 200, description: "Rows per page (default 50, at most 200)" })),
  cursor: t.Optional(t.String({ maxLength: 100, description: "`nextCursor` of the previous page" })),
});

const overviewQuery = (dimensions: readonly string[]) =>
  t.Object({
    ...filters,
    interval: t.Optional(t.Union([t.Literal("hour"), t.Literal("day")], { description: "Bucket size (default hour)" })),
    groupBy: t.Optional(t.Union(dimensions.map((d) => t.Literal(d)), { description: "The breakdown's dimension (default model)" })),
  });

type UsageQuery = { from?: string; to?: string; keyId?: string; model?: string; provider?: string; surface?: string; interval?: Interval; groupBy?: string };
type LogQuery = Omit<UsageQuery, "interval" | "groupBy"> & { status?: string; requestId?: string; limit?: number; cursor?: string };

/** Default ranges: a week of usage, a day of the log. */
const USAGE_DAYS = 7;
const LOG_DAYS = 1;
const OVERVIEW_DAYS = 1;

function filterOf(q: UsageQuery, organizationId: string | undefined, defaultDays: number): UsageFilter {
  return { organizationId, keyId: q.keyId, model: q.model, provider: q.provider, surface: q.surface, ...timeRange(q.from, q.to, defaultDays) };
}

async function usageResponse(s: Services, q: UsageQuery, organizationId: string | undefined) {
  const f = filterOf(q, organizationId, USAGE_DAYS);
  const interval = q.interval ?? "day";
  const groupBy = (q.groupBy ?? "none") as Dimension;
  const buckets = await usageBuckets(s.db, f, interval, groupBy);
  return { object: "usage" as const, from: f.from.toISOString(), to: f.to.toISOString(), interval, groupBy, buckets };
}

async function overviewResponse(s: Services, q: UsageQuery, organizationId: string | undefined) {
  const f = filterOf(q, organizationId, OVERVIEW_DAYS);
  const interval = q.interval ?? "hour";
  const groupBy = (q.groupBy ?? "model") as Exclude<Dimension, "none">;
  return { object: "usage.overview" as const, from: f.from.toISOString(), to: f.to.toISOString(), interval, groupBy, ...(await usageOverview(s.db, f, interval, groupBy)) };
}

async function logResponse(s: Services, q: LogQuery, organizationId: string | undefined) {
  const page = await requestLogPage(s.db, { ...filterOf(q, organizationId, LOG_DAYS), status: q.status, requestId: q.requestId, cursor: q.cursor, limit: q.limit ?? 50 });
  return { object: "list" as const, ...page };
}

export function usageRoutes(s: Services) {
  const detail = (operationId: string, summary: string, description?: string) => ({ tags: ["usage"], operationId, summary, ...(description ? { description } : {}) });
  return new Elysia({ prefix: "/v1/usage" })
    .use(requestContext)
    .get("", ({ query, auth }) => usageResponse(s, query, auth.organizationId), {
      query: usageQuery(orgDimensions),
      response: { 200: UsageSchema, 400: ErrorSchema, 401: ErrorSchema, 403: ErrorSchema },
      detail: detail("getUsage", "Usage of the key's organization per hour or day"),
    })
    .get("/overview", ({ query, auth }) => overviewResponse(s, query, auth.organizationId), {
      query: overviewQuery(orgDimensions.filter((d) => d !== "none")),
      response: { 200: OverviewSchema, 400: ErrorSchema, 401: ErrorSchema, 403: ErrorSchema },
      detail: detail("getUsageOverview", "Requests, errors, latency percentiles, tokens and spend of the key's organization over time and per group", "Read from the request log (at most 7 days; default the last 24 hours per hour)."),
    })
    .get("/requests", ({ query, auth }) => logResponse(s, query, auth.organizationId), {
      query: logQuery,
      response: { 200: LogPageSchema, 400: ErrorSchema, 401: ErrorSchema, 403: ErrorSchema },
      detail: detail("listUsageRequests", "Request log of the key's organization, newest first"),
    });
}

/** The same reads across organizations, under /admin (ADMIN_TOKEN); `organizationId` narrows to one. */
export function adminUsageRoutes(s: Services) {
  const detail = (operationId: string, summary: string, description?: string) => ({ tags: ["admin"], operationId, summary, ...(description ? { description } : {}) });
  const organizationId = t.Optional(t.String({ minLength: 1, maxLength: 64, description: "Only this organization (default: all)" }));
  return new Elysia({ prefix: "/admin/usage" })
    .get("", ({ query }) => usageResponse(s, query, query.organizationId), {
      query: t.Composite([usageQuery([...orgDimensions, "organization"]), t.Object({ organizationId })]),
      response: { 200: UsageSchema, 400: ErrorSchema, 401: ErrorSchema },
      detail: detail("getAdminUsage", "Usage across organizations per hour or day"),
    })
    .get("/overview", ({ query }) => overviewResponse(s, query, query.organizationId), {
      query: t.Composite([overviewQuery([...orgDimensions.filter((d) => d !== "none"), "organization"]), t.Object({ organizationId })]),
      response: { 200: OverviewSchema, 400: ErrorSchema, 401: ErrorSchema },
      detail: detail("getAdminUsageOverview", "Requests, errors, latency percentiles, tokens and spend across organizations over time and per group", "Read from the request log (at most 7 days; default the last 24 hours per hour)."),
    })
    .get("/requests", ({ query }) => logResponse(s, query, query.organizationId), {
      query: t.Composite([logQuery, t.Object({ organizationId })]),
      response: { 200: LogPageSchema, 400: ErrorSchema, 401: ErrorSchema },
      detail: detail("listAdminUsageRequests", "Request log across organizations, newest first"),
    });
}
