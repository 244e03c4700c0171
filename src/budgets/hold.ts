import { sql } from "drizzle-orm";
import { type Db, rowsOf } from "../db/client";
import type { TokenReservation } from "../limits/tokens";

/**
 * What a request holds while it is in flight: its maximum cost against the key's and the
 * organization's budgets (only those that have a limit), and its maximum tokens in the
 * key's token window. The usage meter releases the money part in the statement that adds
 * the request's real cost (src/metering/meter.ts); the token part is settled to the real
 * count by the token limiter (src/limits).
 */
export interface BudgetHold {
  /** USD held. */
  amount: number;
  /** Held against the key's budget / the organization's budget. */
  key: boolean;
  org: boolean;
  /** Tokens counted in the key's window at admission (settled to the real count later). */
  tokens?: { count: number; reservation: TokenReservation };
  /** Set once a usage record carries the hold (the meter releases it then). */
  recorded?: boolean;
}

/**
 * How long a hold counts. Threat: a process that dies with requests in flight never
 * releases their holds; a budget must not stay blocked for good. Longer than any
 * request may take (the whole-exchange deadlines are minutes).
 */
export const HOLD_TTL_MS = 15 * 60_000;

/** A hold counts while `reserved_until` is ahead of `now`; a lapsed one counts as zero. */
const live = (now: string) => sql`case when t.reserved_until > ${now}::timestamptz then t.reserved else 0 end`;
/**
 * Holds `amount` USD against the key's and/or the organization's budget (`key`, `org`:
 * which have a limit), or refuses: one statement, so concurrent requests of one key or
 * organization queue on its row and each sees the holds of those before it. With both,
 * the rows are locked first (FOR UPDATE, which reads the newest version of a row once its
 * lock is had; always key before organization, the order the usage meter updates them
 * in), and nothing is held when either refuses. Returns which budget refused, or null
 * when the hold was taken.
 */
export async function takeHold(db: Db, o: { keyId: string; orgId: string; key: boolean; org: boolean; amount: number; now: Date }): Promise<"key" | "org" | null> {
  const now = o.now.toISOString();
  const until = new Date(o.now.getTime() + HOLD_TTL_MS).toISOString();
  const amount = o.amount.toFixed(9);
  // A key's pending generation tasks hold their estimates too (src/generation/service.ts,
  // which counts these holds in turn): both are counted against the key's limit.
  const pending = sql`(select coalesce(sum(p.estimated_cost), 0) from predictions p where p.key_id = t.id and p.settlement = 'pending')`;
  const fitsOf = (key: boolean) => sql`(t.spending_limit is null or ${spentNowAt(now)} + ${live(now)} + ${key ? pending : sql`0`} + ${amount}::numeric <= t.spending_limit)`;
  const set = sql`reserved = ${live(now)} + ${amount}::numeric, reserved_until = ${until}::timestamptz`;
  if (o.key !== o.org) {
    // One budget: one UPDATE whose condition PostgreSQL evaluates again on the newest
    // version of a row another transaction changed meanwhile (a third of the time of the
    // statement below, measured on the embedded database).
    const table = sql.raw(o.key ? "api_keys" : "organizations");
    const held = rowsOf(await db.execute(sql`update ${table} t set ${set} where t.id = ${o.key ? o.keyId : o.orgId} and ${fitsOf(o.key)} returning 1`));
    return held.length ? null : o.key ? "key" : "org";
  }
  const rows = rowsOf<{ key_ok: boolean | null; org_ok: boolean | null }>(
    await db.execute(sql`
      with k as (
        select t.id, ${fitsOf(true)} as ok from api_keys t where t.id = ${o.keyId} for update
      ), o as (
        select t.id, ${fitsOf(false)} as ok from organizations t where t.id = ${o.orgId} for update
      ), verdict as (
        select coalesce((select ok from k), true) as key_ok, coalesce((select ok from o), true) as org_ok
      ), uk as (
        update api_keys t set ${set} from verdict v where t.id = (select id from k) and v.key_ok and v.org_ok returning 1
      ), uo as (
        update organizations t set ${set} from verdict v where t.id = (select id from o) and v.key_ok and v.org_ok returning 1
      )
      select key_ok, org_ok, (select count(*) from uk) + (select count(*) from uo) as held from verdict`),
  );
  const r = rows[0];
  if (!r) return null;
  return r.key_ok === false ? "key" : r.org_ok === false ? "org" : null;
}

/** What the owner spent in the period containing `now` (as spentInPeriod in period.ts, periodStartSql's boundaries). */
function spentNowAt(now: string) {
  return sql`case when t.spend_period = 'none' then t.spent when t.period_start >= date_trunc(case t.spend_period when 'daily' then 'day' when 'weekly' then 'week' when 'monthly' then 'month' end, ${now}::timestamptz, 'UTC') then t.period_spent else 0 end`;
}

/**
 * Lets go of a hold that no usage record will carry (a request that failed before it was
 * recorded). Clamped at zero: a hold that lapsed meanwhile was already forgotten.
 */
export async function dropHold(db: Db, keyId: string, orgId: string, hold: BudgetHold): Promise<void> {
  const amount = hold.amount.toFixed(9);
  if (hold.key) await db.execute(sql`update api_keys set reserved = greatest(0, reserved - ${amount}::numeric) where id = ${keyId}`);
  if (hold.org) await db.execute(sql`update organizations set reserved = greatest(0, reserved - ${amount}::numeric) where id = ${orgId}`);
}
