import { isNotNull } from "drizzle-orm";
import type { Database, Db } from "../db/client";
import { type ChangeWatch, watchChanges } from "../db/watch";
import { organizations } from "../keys/schema";
import type { Logger } from "../log";
import { isSpendPeriod, type SpendState } from "./period";

/** A notification's payload (see the budgets migration): the organization's budget row. */
interface ChangePayload {
  id: string;
  spendingLimit: string | number | null;
  spendPeriod: string;
  spent: string | number;
  periodSpent: string | number;
  periodStart: string | null;
}

/**
 * The budgets of the organizations that have a spending limit, held in memory so the check
 * on every model request costs a Map lookup. Few organizations have limits, so all of them
 * are loaded at start-up and there is no miss path: an organization not in the map has no
 * limit. Kept current like the key cache: a trigger announces every change of a limited
 * organization's row (its spend, written by any process's usage meter, or its settings) on
 * channel `organizations_changed` with the row; a poll (the key cache's interval) reloads
 * them all, for notifications lost while the listening connection was down.
 */
export class OrgBudgets {
  private budgets = new Map<string, SpendState>();
  private watch?: ChangeWatch;
  /** Bumped by each applied notification, so a reload that read older rows does not put them back. */
  private seq = 0;

  constructor(
    private readonly db: Db,
    private readonly log: Logger,
    private readonly opts: { listen?: Database["listen"]; pollMs: number },
  ) {}

  get(organizationId: string): SpendState | undefined {
    return this.budgets.get(organizationId);
  }

  /** Applies a change made by this process at once (an admin edit), before its notification arrives. */
  set(organizationId: string, state: SpendState): void {
    this.seq++;
    if (state.spendingLimit === null) this.budgets.delete(organizationId);
    else this.budgets.set(organizationId, state);
  }

  async start(): Promise<void> {
    await this.reload();
    this.watch = await watchChanges<ChangePayload>({
      listen: this.opts.listen,
      channel: "organizations_changed",
      pollMs: this.opts.pollMs,
      log: this.log,
      what: "organization budgets",
      onChange: (c) => this.onChange(c),
      catchUp: () => void this.reload(),
    });
  }

  async stop(): Promise<void> {
    const watch = this.watch;
    this.watch = undefined;
    await watch?.stop();
  }

  async reload(): Promise<void> {
    const seq = this.seq;
    try {
      const rows = await this.db
        .select({
          id: organizations.id,
          spendingLimit: organizations.spendingLimit,
          spendPeriod: organizations.spendPeriod,
          spent: organizations.spent,
          periodSpent: organizations.periodSpent,
          periodStart: organizations.periodStart,
        })
        .from(organizations)
        .where(isNotNull(organizations.spendingLimit));
      if (seq !== this.seq) return; // a notification came meanwhile; the next poll catches up
      const next = new Map<string, SpendState>();
      for (const r of rows) next.set(r.id, { ...r, spendPeriod: isSpendPeriod(r.spendPeriod) ? r.spendPeriod : "none" });
      this.budgets = next;
    } catch (err) {
      this.log.warn("organization budgets reload failed; will retry", { err });
    }
  }

  private onChange(c: ChangePayload): void {
    this.set(c.id, {
      spendingLimit: c.spendingLimit === null ? null : Number(c.spendingLimit),
      spendPeriod: isSpendPeriod(c.spendPeriod) ? c.spendPeriod : "none",
      spent: Number(c.spent),
      periodSpent: Number(c.periodSpent),
      periodStart: c.periodStart ? new Date(c.periodStart) : null,
    });
  }
}
