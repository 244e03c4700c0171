/**
 * Budget periods. A spending limit applies to what was spent since the start of the
 * current period; periods start at UTC midnight (daily), Monday 00:00 UTC (weekly, as
 * PostgreSQL's date_trunc('week') counts) or the 1st of the month 00:00 UTC (monthly).
 * `none` never resets: the limit is on everything spent.
 */
export const SPEND_PERIODS = ["none", "daily", "weekly", "monthly"] as const;
export type SpendPeriod = (typeof SPEND_PERIODS)[number];

export function isSpendPeriod(v: unknown): v is SpendPeriod {
  return typeof v === "string" && (SPEND_PERIODS as readonly string[]).includes(v);
}

/** Start of the period containing `now`, or null for `none`. */
export function periodStart(period: SpendPeriod, now: Date): Date | null {
  const y = now.getUTCFullYear();
  const m = now.getUTCMonth();
  const d = now.getUTCDate();
  switch (period) {
    case "none":
      return null;
    case "daily":
      return new Date(Date.UTC(y, m, d));
    case "weekly":
      // getUTCDay: Sunday 0 ... Saturday 6; weeks start on Monday.
      return new Date(Date.UTC(y, m, d - ((now.getUTCDay() + 6) % 7)));
    case "monthly":
      return new Date(Date.UTC(y, m, 1));
  }
}

/** Start of the next period after the one containing `now` (when the spend resets), or null for `none`. */
export function periodEnd(period: SpendPeriod, now: Date): Date | null {
  const start = periodStart(period, now);
  if (!start) return null;
  const y = start.getUTCFullYear();
  const m = start.getUTCMonth();
  const d = start.getUTCDate();
  if (period === "daily") return new Date(Date.UTC(y, m, d + 1));
  if (period === "weekly") return new Date(Date.UTC(y, m, d + 7));
  return new Date(Date.UTC(y, m + 1, 1));
}

/** What a key or organization carries for its budget (maintained by the usage meter). */
export interface SpendState {
  spendingLimit: number | null;
  spendPeriod: SpendPeriod;
  /** USD spent ever. */
  spent: number;
  /** USD spent in the period starting at `periodStart`. */
  periodSpent: number;
  periodStart: Date | null;
}

/**
 * USD spent in the period containing `now`. The stored counter belongs to the period it
 * was last written in: once `now` is past that period it counts as zero (the reset needs
 * no write at the boundary, so it happens at the same instant on every process).
 */
export function spentInPeriod(s: SpendState, now: Date): number {
  if (s.spendPeriod === "none") return s.spent;
  const start = periodStart(s.spendPeriod, now)!;
  if (!s.periodStart) return 0;
  return s.periodStart.getTime() >= start.getTime() ? s.periodSpent : 0;
}

/** True when the limit is set and what was spent in the current period reached it. */
export function limitReached(s: SpendState, now: Date): boolean {
  return s.spendingLimit !== null && spentInPeriod(s, now) >= s.spendingLimit;
}

/**
 * The SQL expression of the period start of timestamp `at` for a row whose period is in
 * column `period` (null for `none`). Same boundaries as periodStart.
 */
export function periodStartSql(period: string, at: string): string {
  return `date_trunc(case ${period} when 'daily' then 'day' when 'weekly' then 'week' when 'monthly' then 'month' end, ${at}, 'UTC')`;
}
