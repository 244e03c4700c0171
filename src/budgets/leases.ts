import { randomBytes } from "node:crypto";
import { sql } from "drizzle-orm";
import { type Db, rowsOf } from "../db/client";
import type { Logger } from "../log";

/**
 * Budget leases: each service process reserves slices of a key's or an organization's
 * remaining budget in the database (one short transaction per slice, atomic against every
 * other process), then holds each request's maximum cost against its own slice in memory.
 * The common request makes no database round trip; the limit still holds across processes,
 * because no process can spend beyond the slices the database granted it.
 *
 * Where the money is, for one owner (key or organization) and one process:
 *   database:  spent + (live leases of every process) + (pending generation estimates) <= limit
 *   here:      granted = this process's lease; inflight = holds of requests running;
 *              unwritten = costs of finished requests the usage meter has not written yet.
 * A request fits when `granted - inflight - unwritten` covers its hold. The usage meter
 * writes a batch's costs to `spent` and takes them off this process's lease in the same
 * statement (src/metering/spend.ts), then calls `written` here.
 *
 * Threats, each next to its defence below: a process that dies keeps its slice (leases
 * lapse after LEASE_TTL_MS unless renewed); a process that is cut off from the database
 * keeps spending a slice the database has already let lapse (a slice is trusted here only
 * until a margin before its lapse as this process computed it); an idle process sits on
 * budget another process needs (idle slices are given back); two processes grant
 * themselves the same money (each grant locks the owner's row, then reads every lease in a
 * fresh statement).
 */

/** How long a lease counts in the database unless renewed. */
export const LEASE_TTL_MS = 30_000;
/** A lease is renewed when less than this is left of it (renewals run on LEASE_TICK_MS). */
const RENEW_WITHIN_MS = 20_000;
/**
 * A lease is trusted here only until this long before its lapse: covers the time a grant
 * took to come back and clock skew between hosts (other processes judge the lapse with
 * their own clocks).
 */
const TRUST_MARGIN_MS = 5_000;
/** A slice without holds, unused this long, is given back (another process may need it). */
const IDLE_RETURN_MS = 2_000;
const LEASE_TICK_MS = 1_000;
/**
 * How long a refused grant answers for later requests of this process that need as much or
 * more (no room came back here meanwhile). Room freed by another process is seen after it.
 */
const REFUSAL_MEMO_MS = 1_000;
/**
 * A grant asks for what the request needs plus room for this many more like it, but at
 * most half of what is left beyond the need: near the limit slices get small, and two
 * processes share what is left instead of the first taking it all.
 */
const LEASE_REQUESTS = 64;

export type OwnerKind = "key" | "org";
const TABLES = { key: "api_keys", org: "organizations" } as const;

interface Lease {
  kind: OwnerKind;
  id: string;
  /** USD this process's lease holds in the database (as far as this process knows). */
  granted: number;
  /** USD held by requests in flight. */
  inflight: number;
  /** USD of finished requests queued for the usage meter. */
  unwritten: number;
  /**
   * The spending limit the lease was granted under. Threat: an operator lowers a limit while
   * a process holds a slice of the old one; the slice is not trusted past the change (the
   * next hold asks for a grant under the new limit).
   */
  limit: number | null;
  /** Epoch ms (this process's clock) until which the lease is trusted; 0: none. */
  trustedUntil: number;
  /** Epoch ms the database lease lapses at, as written. */
  lapsesAt: number;
  lastUse: number;
  /** Bumped whenever room comes back here (a hold settled or released, a cost written, the limit changed). */
  version: number;
  /** The last refused grant: what it needed, when, at which version. */
  refused?: { need: number; at: number; version: number };
  /** Serialises this lease's database work (grants, returns). */
  busy: Promise<unknown>;
  /** Database work queued or running on it. */
  working: number;
}

/** Budget held for one request against this process's leases (see BudgetHold). */
export interface LeasedAmount {
  amount: number;
  key?: string;
  org?: string;
}

const EPSILON = 1e-9;

/** `a - b`, never below zero, and zero when only floating-point dust would be left. */
const less = (a: number, b: number) => {
  const d = a - b;
  return d < EPSILON ? 0 : d;
};

export class BudgetLeases {
  /** This process's name in the leases column: random, so a restarted process starts with nothing. */
  readonly holder = "p" + randomBytes(8).toString("hex");
  private readonly leases = new Map<string, Lease>();
  private timer?: ReturnType<typeof setInterval>;
  private ticking = false;

  constructor(
    private readonly db: Db,
    private readonly log: Logger,
    /** Epoch ms (the service's clock; tests move it). */
    private readonly now: () => number,
  ) {}

  start(): void {
    this.timer ??= setInterval(() => void this.tick(), LEASE_TICK_MS);
    this.timer.unref?.();
  }

  /**
   * Holds `amount` USD against the key's and/or the organization's budget, or says which
   * refused. Without a database round trip while this process's slices cover it. With both,
   * nothing stays held when either refuses.
   */
  async hold(o: { keyId: string; orgId: string; key: boolean; org: boolean; amount: number; keyLimit?: number | null; orgLimit?: number | null }): Promise<"key" | "org" | null> {
    const k = o.key ? this.lease("key", o.keyId, o.keyLimit) : undefined;
    const g = o.org ? this.lease("org", o.orgId, o.orgLimit) : undefined;
    // Either budget's fresh refusal answers at once, before any grant is asked of the other.
    const refusal = () => (k && this.recentlyRefused(k, o.amount) ? "key" : g && this.recentlyRefused(g, o.amount) ? "org" : null);
    const early = refusal();
    if (early) return early;
    if (k && !(this.takeLocal(k, o.amount) || (await this.grantAndTake(k, o.amount, refusal)))) return refusal() ?? "key";
    if (g && !(this.takeLocal(g, o.amount) || (await this.grantAndTake(g, o.amount, () => (this.recentlyRefused(g, o.amount) ? "org" : null))))) {
      if (k) {
        k.inflight = less(k.inflight, o.amount);
        k.version++;
      }
      return "org";
    }
    return null;
  }

  /** A held request finished and its usage record (cost `cost`) is queued: the hold becomes unwritten spend. */
  settled(h: LeasedAmount, cost: number): void {
    for (const l of this.leasesOf(h)) {
      l.inflight = less(l.inflight, h.amount);
      l.unwritten += cost;
      l.version++;
    }
  }

  /** The usage meter wrote a settled request's cost (and took it off this process's lease). */
  written(h: LeasedAmount, cost: number): void {
    for (const l of this.leasesOf(h)) {
      l.unwritten = less(l.unwritten, cost);
      l.granted = less(l.granted, cost);
      l.version++;
    }
  }

  /** A held request failed with nothing to record: the hold goes back to the slice. */
  released(h: LeasedAmount): void {
    for (const l of this.leasesOf(h)) {
      l.inflight = less(l.inflight, h.amount);
      l.version++;
    }
  }

  /** What this process knows of one lease (tests, diagnostics). */
  state(kind: OwnerKind, id: string): { granted: number; inflight: number; unwritten: number } | undefined {
    const l = this.leases.get(kind + ":" + id);
    return l && { granted: l.granted, inflight: l.inflight, unwritten: l.unwritten };
  }

  /**
   * Shutdown, after the usage meter drained: each lease shrinks to what requests still in
   * flight or unwritten need (those lapse with the lease), so the rest is free at once for
   * the other processes.
   */
  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    await Promise.all([...this.leases.values()].map((l) => this.serial(l, () => this.shrink(l, l.inflight + l.unwritten)))).catch((err) =>
      this.log.warn("budget leases not given back at shutdown; they lapse on their own", { err }),
    );
  }

  /** `limit`: the owner's limit as the caches know it now (undefined: not known, trusted as it is). */
  private lease(kind: OwnerKind, id: string, limit?: number | null): Lease {
    const k = kind + ":" + id;
    let l = this.leases.get(k);
    if (l && limit !== undefined && l.limit !== limit) {
      l.limit = limit;
      l.trustedUntil = 0;
      l.version++;
    }
    if (!l) this.leases.set(k, (l = { kind, id, granted: 0, inflight: 0, unwritten: 0, limit: limit ?? null, trustedUntil: 0, lapsesAt: 0, lastUse: 0, version: 0, busy: Promise.resolve(), working: 0 }));
    return l;
  }

  private *leasesOf(h: LeasedAmount): Iterable<Lease> {
    if (h.key !== undefined) {
      const l = this.leases.get("key:" + h.key);
      if (l) yield l;
    }
    if (h.org !== undefined) {
      const l = this.leases.get("org:" + h.org);
      if (l) yield l;
    }
  }

  /** The hot path: the slice covers the hold (and is still trusted). */
  private takeLocal(l: Lease, amount: number): boolean {
    const now = this.now();
    if (now >= l.trustedUntil || l.granted - l.inflight - l.unwritten + EPSILON < amount) return false;
    l.inflight += amount;
    l.lastUse = now;
    return true;
  }

  private serial<T>(l: Lease, work: () => Promise<T>): Promise<T> {
    l.working++;
    const run = l.busy.then(work, work).finally(() => l.working--);
    l.busy = run.catch(() => undefined);
    return run;
  }

  /**
   * Threat: a client hammering a spent budget would cost a database transaction per
   * request, one after another, and its refusals would queue behind each other (a burst of
   * 50 takes seconds to refuse, and outlives the request it was refused for). A refusal
   * stands for REFUSAL_MEMO_MS for any request that does not fit the slice and needs as
   * much, unless room came back here meanwhile.
   */
  private recentlyRefused(l: Lease, amount: number): boolean {
    const r = l.refused;
    if (!r || r.version !== l.version || this.now() - r.at >= REFUSAL_MEMO_MS) return false;
    if (this.now() < l.trustedUntil && l.granted - l.inflight - l.unwritten + EPSILON >= amount) return false;
    return amount + l.inflight + l.unwritten >= r.need - EPSILON;
  }

  /**
   * One grant at a time per lease; a request queued behind another's grant may fit once it
   * is in. `refusal`: a fresh refusal of this or the other budget ends the wait without a grant.
   */
  private grantAndTake(l: Lease, amount: number, refusal: () => OwnerKind | null): Promise<boolean> {
    return this.serial(l, async () => {
      if (this.takeLocal(l, amount)) return true;
      if (refusal()) return false;
      // What the lease must hold in total: this request, the holds in flight, the spend not
      // yet written (all of it counted against the lease again, whether or not it lapsed).
      const need = amount + l.inflight + l.unwritten;
      const sentAt = this.now();
      const version = l.version;
      const granted = await grantLease(this.db, { table: TABLES[l.kind], id: l.id, holder: this.holder, need, extra: amount * LEASE_REQUESTS, now: sentAt });
      if (granted === null) {
        l.refused = { need, at: sentAt, version };
        return false;
      }
      l.refused = undefined;
      l.granted = granted;
      l.lapsesAt = sentAt + LEASE_TTL_MS;
      l.trustedUntil = l.lapsesAt - TRUST_MARGIN_MS;
      return this.takeLocal(l, amount);
    });
  }

  /** Sets this process's lease to `keep` USD (removed at 0). */
  private async shrink(l: Lease, keep: number): Promise<void> {
    if (l.granted <= keep + EPSILON && keep > 0) return;
    if (l.granted <= EPSILON && l.trustedUntil === 0 && keep <= EPSILON && l.lapsesAt === 0) return; // never granted
    const table = sql.raw(TABLES[l.kind]);
    if (keep <= EPSILON) {
      l.granted = 0;
      l.trustedUntil = 0;
      await this.db.execute(sql`update ${table} set leases = leases - ${this.holder}::text where id = ${l.id} and leases -> ${this.holder}::text is not null`);
    } else {
      l.granted = keep;
      await this.db.execute(
        sql`update ${table} set leases = jsonb_set(leases, array[${this.holder}::text, 'a'], to_jsonb(${keep.toFixed(9)}::numeric)) where id = ${l.id} and leases -> ${this.holder}::text is not null`,
      );
    }
  }

  /**
   * Renews leases that are in use before they lapse, and gives back idle ones. Threat: a
   * long stream outlives a lease taken when it started; renewal keeps the lease counted for
   * as long as anything holds it (or its cost is unwritten).
   */
  private async tick(): Promise<void> {
    if (this.ticking) return;
    this.ticking = true;
    try {
      const now = this.now();
      const renew: Lease[] = [];
      for (const [k, l] of this.leases) {
        const busy = l.inflight > EPSILON || l.unwritten > EPSILON || l.working > 0;
        const idle = !busy && now - l.lastUse > IDLE_RETURN_MS;
        if (idle && l.granted <= EPSILON) {
          this.leases.delete(k); // nothing held: forget it (memory bounded by the owners in use)
          continue;
        }
        if (idle) {
          // Not trusted from now on: a hold arriving meanwhile asks for a grant, which
          // queues behind the return; the return is skipped if one came first.
          l.granted = 0;
          l.trustedUntil = 0;
          void this.serial(l, async () => {
            if (l.granted <= EPSILON && l.inflight <= EPSILON && l.unwritten <= EPSILON) await this.shrink(l, 0);
          }).catch((err) => this.log.warn("idle budget lease not given back; it lapses on its own", { err }));
        } else if (l.granted > EPSILON && l.lapsesAt - now < RENEW_WITHIN_MS) renew.push(l);
      }
      for (const kind of ["key", "org"] as const) {
        const list = renew.filter((l) => l.kind === kind);
        if (!list.length) continue;
        const until = now + LEASE_TTL_MS;
        const rows = rowsOf<{ id: string }>(
          await this.db.execute(sql`update ${sql.raw(TABLES[kind])} set leases = jsonb_set(leases, array[${this.holder}::text, 'u'], to_jsonb(${until}::bigint))
            where id in (${sql.join(list.map((l) => sql`${l.id}`), sql`, `)}) and (leases -> ${this.holder}::text ->> 'u')::bigint > ${now}::bigint returning id`),
        );
        const renewed = new Set(rows.map((r) => r.id));
        for (const l of list) {
          if (renewed.has(l.id)) {
            l.lapsesAt = until;
            // A slice distrusted for a changed limit stays so (its next hold asks for a grant).
            if (l.trustedUntil > 0) l.trustedUntil = until - TRUST_MARGIN_MS;
          } else {
            // Lapsed in the database (other processes may have been granted its money since):
            // never revived; the next hold asks for a new grant.
            l.granted = 0;
            l.trustedUntil = 0;
          }
        }
      }
    } catch (err) {
      this.log.warn("budget lease renewal failed; will retry", { err });
    } finally {
      this.ticking = false;
    }
  }
}

/**
 * Sets `holder`'s lease on one owner to at least `need` USD, and up to `need + extra` but
 * at most half of what is left beyond the need, if the owner's budget has room for the need
 * beside its spend in the current period, every other live lease and (keys and
 * organizations) the estimates of pending generation tasks. Returns the lease's new amount
 * (the need or more), or null when it does not fit. Lapsed leases of other holders are
 * dropped on the way. An owner without a limit (it was lifted meanwhile) grants the need.
 *
 * One transaction: the owner's row is locked first (FOR UPDATE), then read again by a
 * second statement, whose snapshot (READ COMMITTED) sees everything committed before the
 * lock was had: every other process's grant and the generation tasks submitted under the
 * same lock (src/generation/service.ts).
 */
export async function grantLease(db: Db, o: { table: "api_keys" | "organizations"; id: string; holder: string; need: number; extra: number; now: number }): Promise<number | null> {
  const table = sql.raw(o.table);
  const need = sql`${o.need.toFixed(9)}::numeric`;
  const pendingColumn = sql.raw(o.table === "api_keys" ? "p.key_id" : "p.organization_id");
  return db.transaction(async (tx) => {
    await tx.execute(sql`select 1 from ${table} where id = ${o.id} for update`);
    const rows = rowsOf<{ amount: string }>(
      await tx.execute(sql`
        with f as (
          select t.id, t.spending_limit - (${spentNow(o.now)} + ${otherLeases(o.holder, o.now)}
            + (select coalesce(sum(p.estimated_cost), 0) from predictions p where ${pendingColumn} = t.id and p.settlement = 'pending')) as room
          from ${table} t where t.id = ${o.id}
        ), g as (
          select id, case when room is null then ${need} else least(room, ${need} + least(${o.extra.toFixed(9)}::numeric, greatest(0, room - ${need}) / 2)) end as amount
          from f where room is null or room >= ${need}
        )
        update ${table} t set leases = ${liveLeasesJson(o.holder, o.now)} || jsonb_build_object(${o.holder}::text, jsonb_build_object('a', g.amount, 'u', ${o.now + LEASE_TTL_MS}::bigint))
        from g where t.id = g.id
        returning g.amount::text as amount`),
    );
    return rows.length ? Number(rows[0].amount) : null;
  });
}

/** The live leases of holders other than `holder` on row `t`, summed. */
export function otherLeases(holder: string, now: number) {
  return sql`(select coalesce(sum((e.value ->> 'a')::numeric), 0) from jsonb_each(t.leases) e where e.key <> ${holder}::text and (e.value ->> 'u')::bigint > ${now}::bigint)`;
}

/** Every live lease on row `t`, summed (what no one may spend but the holders). */
export function liveLeases(now: number) {
  return sql`(select coalesce(sum((e.value ->> 'a')::numeric), 0) from jsonb_each(t.leases) e where (e.value ->> 'u')::bigint > ${now}::bigint)`;
}

/** Row `t`'s leases without lapsed ones and without `holder`'s. */
function liveLeasesJson(holder: string, now: number) {
  return sql`(select coalesce(jsonb_object_agg(e.key, e.value), '{}'::jsonb) from jsonb_each(t.leases) e where e.key <> ${holder}::text and (e.value ->> 'u')::bigint > ${now}::bigint)`;
}

/** What row `t` spent in the period containing `now` (as spentInPeriod in period.ts). */
function spentNow(now: number) {
  const at = sql`${new Date(now).toISOString()}::timestamptz`;
  return sql`case when t.spend_period = 'none' then t.spent when t.period_start >= date_trunc(case t.spend_period when 'daily' then 'day' when 'weekly' then 'week' when 'monthly' then 'month' end, ${at}, 'UTC') then t.period_spent else 0 end`;
}

/**
 * USD left on one owner's budget beside its spend in the current period, every live lease
 * and the estimates of pending generation tasks; null when it has no limit (or no row). Read
 * it under the row's lock (FOR UPDATE taken by an earlier statement of the transaction), as
 * grantLease does, so that what it sees cannot change before the caller's write commits.
 */
export async function budgetRoom(db: Db, table: "api_keys" | "organizations", id: string, now: number): Promise<number | null> {
  const pendingColumn = sql.raw(table === "api_keys" ? "p.key_id" : "p.organization_id");
  const rows = rowsOf<{ room: string | null }>(
    await db.execute(sql`
      select (t.spending_limit - (${spentNow(now)} + ${liveLeases(now)}
        + (select coalesce(sum(p.estimated_cost), 0) from predictions p where ${pendingColumn} = t.id and p.settlement = 'pending')))::text as room
      from ${sql.raw(table)} t where t.id = ${id}`),
  );
  const room = rows[0]?.room;
  return room === null || room === undefined ? null : Number(room);
}
