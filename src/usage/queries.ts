import { type SQL, sql } from "drizzle-orm";
import { type Db, rowsOf } from "../db/client";
import { ApiError } from "../http/errors";

/**
 * Reads of the usage tables for the usage API: totals per time bucket and dimension, and
 * the request log page by page. Every read is confined to one organization unless the
 * caller is the operator (admin routes pass `organizationId` only as a filter then).
 * Threat: one organization reading another's usage; the organization is a required
 * argument of the org-key routes, taken from the key, never from the query string.
 */

export type Interval = "hour" | "day";
export type Dimension = "model" | "provider" | "key" | "surface" | "organization" | "none";

export interface UsageFilter {
  organizationId?: string;
  keyId?: string;
  model?: string;
  provider?: string;
  surface?: string;
  from: Date;
  to: Date;
}

export const DIMENSION_COLUMNS: Record<Exclude<Dimension, "none">, string> = {
  model: "public_model",
  provider: "provider",
  key: "key_id",
  surface: "surface",
  organization: "organization_id",
};

/** Longest range per interval: a response stays a few thousand buckets at most. */
const MAX_RANGE_DAYS: Record<Interval, number> = { hour: 31, day: 400 };

export interface Bucket {
  start: string;
  group: string | null;
  requests: number;
  inputTokens: number;
  outputTokens: number;
  cachedTokens: number;
  cacheWriteTokens: number;
  reasoningTokens: number;
  cost: number;
}

/** Parses the API's time range (ISO 8601), defaulting to the last `defaultDays` days. */
export function timeRange(from: string | undefined, to: string | undefined, defaultDays: number, now = new Date()): { from: Date; to: Date } {
  const end = to ? parseTime(to, "to") : now;
  const start = from ? parseTime(from, "from") : new Date(end.getTime() - defaultDays * 86_400_000);
  if (start.getTime() >= end.getTime()) throw new ApiError(400, "`from` must be before `to`");
  return { from: start, to: end };
}

function parseTime(v: string, name: string): Date {
  const d = new Date(v);
  // Threat: a date JavaScript accepts but PostgreSQL does not (a negative or six-digit
  // year) would fail the query with a 500; refused here as what it is, bad input.
  const year = d.getUTCFullYear();
  if (Number.isNaN(d.getTime()) || year < 1 || year > 9999) throw new ApiError(400, `\`${name}\` is not a date-time; use ISO 8601, e.g. 2026-01-31T00:00:00Z`);
  return d;
}

/**
 * Whether the read is confined to some series. Their ids are then found first and their
 * sums read by the primary key (series, hour): written as a plain join, the planner
 * scanned every organization's sums (docs/gateway.md, Usage API, has the figures).
 */
export function hasSeriesFilter(f: UsageFilter): boolean {
  return f.organizationId !== undefined || f.keyId !== undefined || f.model !== undefined || f.provider !== undefined || f.surface !== undefined;
}

/** The series conditions (organization, key, model, provider, surface) on `usage_series s`. */
export function seriesWhere(f: UsageFilter): SQL {
  const parts: SQL[] = [sql`true`];
  if (f.organizationId !== undefined) parts.push(sql`s.organization_id = ${f.organizationId}`);
  if (f.keyId !== undefined) parts.push(sql`s.key_id = ${f.keyId}`);
  if (f.model !== undefined) parts.push(sql`s.public_model = ${f.model}`);
  if (f.provider !== undefined) parts.push(sql`s.provider = ${f.provider}`);
  if (f.surface !== undefined) parts.push(sql`s.surface = ${f.surface}`);
  return sql.join(parts, sql` and `);
}

/**
 * Requests, tokens and cost per bucket (UTC hour or day) and dimension value, from the
 * hourly sums the meter keeps (src/metering/hourly.ts): the range is taken in whole
 * hours (`from` rounded down, `to` up), and rows the request log's retention deleted still count.
 */
export async function usageBuckets(db: Db, f: UsageFilter, interval: Interval, by: Dimension): Promise<Bucket[]> {
  const days = (f.to.getTime() - f.from.getTime()) / 86_400_000;
  if (days > MAX_RANGE_DAYS[interval]) {
    throw new ApiError(400, `a range of ${Math.ceil(days)} days is too long for interval=${interval} (at most ${MAX_RANGE_DAYS[interval]}); narrow from/to or use interval=day`);
  }
  const group = by === "none" ? sql`null::text` : sql.raw(`s.${DIMENSION_COLUMNS[by]}`);
  const unit = sql.raw(`'${interval}'`);
  const rows = rowsOf<Record<string, string | number | null>>(
    await db.execute(sql`
      select to_char(date_trunc(${unit}, h.hour, 'UTC') at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"') as start,
        ${group} as grp,
        sum(h.requests)::text as requests, sum(h.input_tokens)::text as input, sum(h.output_tokens)::text as output,
        sum(h.cached_tokens)::text as cached, sum(h.cache_write_tokens)::text as cache_write, sum(h.reasoning_tokens)::text as reasoning, sum(h.cost)::text as cost
      from usage_hourly h join usage_series s on s.id = h.series_id
      where ${hasSeriesFilter(f) ? sql`h.series_id = any(array(select id from usage_series s where ${seriesWhere(f)}))` : sql`true`}
        and h.hour >= date_trunc('hour', ${f.from.toISOString()}::timestamptz, 'UTC') and h.hour < ${f.to.toISOString()}::timestamptz
      group by 1, 2 order by 1, 2 nulls first`),
  );
  return rows.map((r) => ({
    start: String(r.start),
    group: r.grp === null ? null : String(r.grp),
    requests: Number(r.requests),
    inputTokens: Number(r.input),
    outputTokens: Number(r.output),
    cachedTokens: Number(r.cached),
    cacheWriteTokens: Number(r.cache_write),
    reasoningTokens: Number(r.reasoning),
    cost: Number(r.cost),
  }));
}

export interface LogFilter extends UsageFilter {
  /** An exact status (`429`), a class (`4xx`), or `error` (400 and above). */
  status?: string;
  /** One request (its X-Request-ID). */
  requestId?: string;
  cursor?: string;
  limit: number;
}

/** A try of the request that failed before another answered (or before the gateway gave up). */
export interface FailedAttempt {
  provider: string;
  model: string;
  /** The upstream's status; 0 when it gave none (unreachable, timed out). */
  status: number;
  error: string;
}

export interface LogEntry {
  id: string;
  time: string;
  organizationId: string;
  /** Names as they are now (null when the organization or key no longer exists). */
  organizationName: string | null;
  keyId: string;
  keyName: string | null;
  requestId: string;
  surface: string;
  model: string;
  upstreamModel: string | null;
  provider: string | null;
  attempts: number;
  failedAttempts: FailedAttempt[];
  status: number;
  streamed: boolean;
  inputTokens: number;
  outputTokens: number;
  cachedTokens: number;
  cacheWriteTokens: number;
  cacheWrite1hTokens: number;
  reasoningTokens: number;
  inputAudioTokens: number;
  outputAudioTokens: number;
  estimated: boolean;
  cost: number | null;
  latencyMs: number;
  requestBody: string | null;
  responseBody: string | null;
  responseBytes: number;
}

const STATUS = /^(?:[1-5][0-9]{2}|[1-5]xx|error)$/;

function statusWhere(status: string | undefined): SQL {
  if (status === undefined) return sql`true`;
  if (!STATUS.test(status)) throw new ApiError(400, "`status` must be a status code (429), a class (4xx) or `error`");
  if (status === "error") return sql`r.status >= 400`;
  if (status.endsWith("xx")) {
    const base = Number(status[0]) * 100;
    return sql`r.status >= ${base} and r.status < ${base + 100}`;
  }
  return sql`r.status = ${Number(status)}`;
}

/** The cursor: the last row's time (epoch ms) and id, opaque to clients. */
function encodeCursor(ms: number, id: string): string {
  return Buffer.from(`${ms}.${id}`).toString("base64url");
}

function decodeCursor(c: string): { at: string; id: string } {
  // Digits bounded so a forged cursor cannot overflow the bigint id or the Date (a 500).
  const m = /^(\d{1,15})\.(\d{1,18})$/.exec(Buffer.from(c, "base64url").toString());
  if (!m) throw new ApiError(400, "`cursor` is not one this API returned; pass `nextCursor` from the previous page as it is");
  return { at: new Date(Number(m[1])).toISOString(), id: m[2] };
}

/** One page of the request log, newest first; `nextCursor` is null on the last page. */
export async function requestLogPage(db: Db, f: LogFilter): Promise<{ data: LogEntry[]; nextCursor: string | null }> {
  const after = f.cursor ? decodeCursor(f.cursor) : undefined;
  const rows = rowsOf<Record<string, unknown>>(
    await db.execute(sql`
      select r.id::text as id, (extract(epoch from r.created_at) * 1000)::bigint::text as ms,
        s.organization_id, o.name as organization_name, s.key_id, k.name as key_name, r.request_id, r.failed_attempts, s.surface, s.public_model, s.upstream_model, s.provider,
        r.attempts, r.status, r.streamed, r.input_tokens, r.output_tokens, r.cached_tokens, r.cost::text as cost, r.latency_ms,
        r.cache_write_tokens, r.cache_write_1h_tokens, r.reasoning_tokens, r.input_audio_tokens, r.output_audio_tokens, r.estimated,
        r.request_body, r.response_body, r.response_bytes
      from usage_requests r join usage_series s on s.id = r.series_id
        left join organizations o on o.id = s.organization_id left join api_keys k on k.id = s.key_id
      where ${seriesWhere(f)} and ${statusWhere(f.status)} ${f.requestId !== undefined ? sql`and r.request_id = ${f.requestId}` : sql``}
        and r.created_at >= ${f.from.toISOString()}::timestamptz and r.created_at < ${f.to.toISOString()}::timestamptz
        ${after ? sql`and (r.created_at, r.id) < (${after.at}::timestamptz, ${after.id}::bigint)` : sql``}
      order by r.created_at desc, r.id desc
      limit ${f.limit + 1}`),
  );
  const more = rows.length > f.limit;
  const page = (more ? rows.slice(0, f.limit) : rows).map(
    (r): LogEntry => ({
      id: String(r.id),
      time: new Date(Number(r.ms)).toISOString(),
      organizationId: String(r.organization_id),
      organizationName: (r.organization_name as string | null) ?? null,
      keyId: String(r.key_id),
      keyName: (r.key_name as string | null) ?? null,
      requestId: String(r.request_id),
      surface: String(r.surface),
      model: String(r.public_model),
      upstreamModel: (r.upstream_model as string | null) ?? null,
      provider: (r.provider as string | null) ?? null,
      attempts: Number(r.attempts),
      failedAttempts: failedAttemptsOf(r.failed_attempts),
      status: Number(r.status),
      streamed: r.streamed === true || r.streamed === "t",
      inputTokens: Number(r.input_tokens),
      outputTokens: Number(r.output_tokens),
      cachedTokens: Number(r.cached_tokens),
      cacheWriteTokens: Number(r.cache_write_tokens),
      cacheWrite1hTokens: Number(r.cache_write_1h_tokens),
      reasoningTokens: Number(r.reasoning_tokens),
      inputAudioTokens: Number(r.input_audio_tokens),
      outputAudioTokens: Number(r.output_audio_tokens),
      estimated: r.estimated === true || r.estimated === "t",
      cost: r.cost === null || r.cost === undefined ? null : Number(r.cost),
      latencyMs: Number(r.latency_ms),
      requestBody: (r.request_body as string | null) ?? null,
      responseBody: (r.response_body as string | null) ?? null,
      responseBytes: Number(r.response_bytes ?? 0),
    }),
  );
  const last = page[page.length - 1];
  return { data: page, nextCursor: more && last ? encodeCursor(Date.parse(last.time), last.id) : null };
}

/** The stored JSON list of failed tries; anything unreadable counts as none rather than failing the page. */
function failedAttemptsOf(v: unknown): FailedAttempt[] {
  if (typeof v !== "string" || !v) return [];
  try {
    const list = JSON.parse(v);
    return Array.isArray(list)
      ? list.map((a) => ({ provider: String(a?.provider ?? ""), model: String(a?.model ?? ""), status: Number(a?.status) || 0, error: String(a?.error ?? "") }))
      : [];
  } catch {
    return [];
  }
}
