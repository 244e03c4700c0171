import { type SQL, sql } from "drizzle-orm";
import { type Db, rowsOf } from "../db/client";
import { ApiError } from "../http/errors";
import { DIMENSION_COLUMNS, type Dimension, hasSeriesFilter, type Interval, seriesWhere, type UsageFilter } from "./queries";

/**
 * The console's overview: requests, errors, latency percentiles, tokens and spend per
 * time bucket, and the same per model, provider, key or organization. Latency
 * percentiles need each request, so this reads the request log's rows (not the hourly
 * sums the usage API reads): the range is bounded, and rows the log's retention deleted
 * no longer count. Threat: an organization reading another's figures; as for the usage
 * API, the organization of an org key's read comes from the key, never the query.
 */
export interface OverviewFigures {
  requests: number;
  errors: number;
  p50LatencyMs: number | null;
  p99LatencyMs: number | null;
  inputTokens: number;
  outputTokens: number;
  cachedTokens: number;
  cost: number;
}

/** Longest range: a week of raw rows, read in one statement (the usage API's hourly sums serve longer ones). */
export const MAX_OVERVIEW_DAYS = 7;
/** The breakdown keeps the busiest groups. */
const MAX_GROUPS = 20;

const FIGURES = sql`count(*)::text as requests, (count(*) filter (where r.status >= 400))::text as errors,
  percentile_cont(0.5) within group (order by r.latency_ms) as p50, percentile_cont(0.99) within group (order by r.latency_ms) as p99,
  coalesce(sum(r.input_tokens), 0)::text as input, coalesce(sum(r.output_tokens), 0)::text as output,
  coalesce(sum(r.cached_tokens), 0)::text as cached, coalesce(sum(r.cost), 0)::text as cost`;

function figures(r: Record<string, unknown>): OverviewFigures {
  const ms = (v: unknown) => (v === null || v === undefined ? null : Math.round(Number(v) * 10) / 10);
  return {
    requests: Number(r.requests),
    errors: Number(r.errors),
    p50LatencyMs: ms(r.p50),
    p99LatencyMs: ms(r.p99),
    inputTokens: Number(r.input),
    outputTokens: Number(r.output),
    cachedTokens: Number(r.cached),
    cost: Number(r.cost),
  };
}

export async function usageOverview(db: Db, f: UsageFilter, interval: Interval, by: Exclude<Dimension, "none">) {
  const days = (f.to.getTime() - f.from.getTime()) / 86_400_000;
  if (days > MAX_OVERVIEW_DAYS) throw new ApiError(400, `a range of ${Math.ceil(days)} days is too long for the overview (at most ${MAX_OVERVIEW_DAYS}); narrow from/to`);
  const where: SQL = sql`${hasSeriesFilter(f) ? sql`r.series_id = any(array(select id from usage_series s where ${seriesWhere(f)}))` : sql`true`}
    and r.created_at >= ${f.from.toISOString()}::timestamptz and r.created_at < ${f.to.toISOString()}::timestamptz`;
  const unit = sql.raw(`'${interval}'`);
  const group = sql.raw(`s.${DIMENSION_COLUMNS[by]}`);
  const [buckets, groups, totals] = await Promise.all([
    db.execute(sql`select to_char(date_trunc(${unit}, r.created_at, 'UTC') at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"') as start, ${FIGURES}
      from usage_requests r where ${where} group by 1 order by 1`),
    db.execute(sql`select ${group} as grp, ${FIGURES}
      from usage_requests r join usage_series s on s.id = r.series_id where ${where} group by 1 order by count(*) desc, 1 limit ${MAX_GROUPS}`),
    db.execute(sql`select ${FIGURES} from usage_requests r where ${where}`),
  ]);
  const groupRows = rowsOf<Record<string, unknown>>(groups);
  const names = await namesOf(db, by, groupRows.map((g) => g.grp).filter((v): v is string => typeof v === "string"));
  return {
    buckets: rowsOf<Record<string, unknown>>(buckets).map((r) => ({ start: String(r.start), ...figures(r) })),
    groups: groupRows.map((r) => {
      const id = r.grp === null || r.grp === undefined ? null : String(r.grp);
      return { group: id, name: id === null ? null : (names.get(id) ?? id), ...figures(r) };
    }),
    totals: figures(rowsOf<Record<string, unknown>>(totals)[0] ?? {}),
  };
}

/** Keys and organizations are shown by name; models, providers and surfaces are their own names. */
async function namesOf(db: Db, by: Dimension, ids: string[]): Promise<Map<string, string>> {
  const table = by === "key" ? sql`api_keys` : by === "organization" ? sql`organizations` : undefined;
  if (!table || !ids.length) return new Map();
  const rows = rowsOf<{ id: string; name: string }>(await db.execute(sql`select id, name from ${table} where id = any(${`{${ids.map((i) => JSON.stringify(i)).join(",")}}`}::text[])`));
  return new Map(rows.map((r) => [r.id, r.name]));
}
