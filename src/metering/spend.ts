import { periodStartSql } from "../budgets/period";

/** Decimal places of `usage_records.cost` (numeric(18, 9)). */
const COST_SCALE = 9;

/**
 * A batch's cost per owner (key or organization) and UTC day: every period boundary is a
 * UTC midnight, so the SQL below can tell which period each part belongs to, whatever the
 * owner's period is.
 */
export class SpendByDay {
  private readonly costs = new Map<string, { id: string; day: number; cost: number; release: number }>();

  /** `release`: USD taken off this process's budget lease in the same update (src/budgets/leases.ts). */
  add(id: string, at: number, cost: number, release = 0): void {
    const day = Math.floor(at / DAY_MS) * DAY_MS;
    const k = `${id}\0${day}`;
    const e = this.costs.get(k);
    if (e) {
      e.cost += cost;
      e.release += release;
    } else this.costs.set(k, { id, day, cost, release });
  }

  /** The JSON parameter of spendCtes; owners in a fixed order, so two processes updating the same rows lock them alike. */
  json(): string {
    const list = [...this.costs.values()].sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : a.day - b.day));
    return JSON.stringify(list.map((e) => ({ id: e.id, day: new Date(e.day).toISOString(), cost: e.cost.toFixed(COST_SCALE), release: e.release.toFixed(COST_SCALE) })));
  }
}

const DAY_MS = 86_400_000;

/**
 * CTEs around the JSON parameter of SpendByDay (text before it, text after it), prefixed
 * `p`: each part's period start under the owner's period (`ps`), and per owner the total
 * (`total`), the latest period in the batch (`latest`) and what belongs to it (`latest_cost`).
 */
function spendCtes(p: string, table: string): [string, string] {
  return [
    `${p}_v as (select * from json_to_recordset(`,
    `::json) as v(id text, day timestamptz, cost numeric, release numeric)),
    ${p}_p as (select v.id, v.cost, v.release, ${periodStartSql("t.spend_period", "v.day")} as ps from ${p}_v v join ${table} t on t.id = v.id),
    ${p}_w as (select id, cost, release, ps, max(ps) over (partition by id) as latest from ${p}_p),
    ${p}_agg as (select id, sum(cost) as total, sum(release) as released, max(latest) as latest, coalesce(sum(cost) filter (where ps is not distinct from latest), 0) as latest_cost from ${p}_w group by id)`,
  ];
}
export const KEY_SPEND = spendCtes("k", "api_keys");
export const ORG_SPEND = spendCtes("o", "organizations");

/**
 * Adds the batch's cost to each owner's `spent` and to its period counter: the counter
 * carries on in the same period, starts over in a later one, and ignores parts of an
 * earlier period than the one it holds (a late batch of another process: that period is
 * over). Bumps `updated_at`, so the change reaches every process's caches.
 */
export function spendUpdate(p: string, table: string, holder?: string): string {
  // The holder is this process's own random id (src/budgets/leases.ts), never a client's text.
  if (holder !== undefined && !/^p[0-9a-f]{16}$/.test(holder)) throw new Error("invalid lease holder");
  const leases = holder
    ? `leases = case when a.released > 0 and t.leases -> '${holder}' is not null
        then jsonb_set(t.leases, '{${holder},a}', to_jsonb(greatest(0, (t.leases #>> '{${holder},a}')::numeric - a.released))) else t.leases end,`
    : "";
  return `update ${table} as t set spent = t.spent + a.total,
    period_spent = case when t.period_start is not distinct from a.latest then t.period_spent + a.latest_cost
                        when t.period_start is null or t.period_start < a.latest then a.latest_cost
                        else t.period_spent end,
    period_start = case when t.period_start is null or t.period_start < a.latest then a.latest else t.period_start end,
    ${leases}
    updated_at = now()
    from ${p}_agg a where t.id = a.id`;
}

