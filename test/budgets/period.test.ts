import { expect, test } from "bun:test";
import { limitReached, periodEnd, periodStart, spentInPeriod, type SpendState } from "../../src/budgets/period";

const at = (iso: string) => new Date(iso);

test("period boundaries are UTC midnights: the day, Monday of the week, the 1st of the month", () => {
  expect(periodStart("daily", at("2030-03-10T23:59:59.999Z"))).toEqual(at("2030-03-10T00:00:00Z"));
  expect(periodEnd("daily", at("2030-03-10T23:59:59.999Z"))).toEqual(at("2030-03-11T00:00:00Z"));
  // 2030-03-10 is a Sunday: its week began on Monday 2030-03-04.
  expect(periodStart("weekly", at("2030-03-10T12:00:00Z"))).toEqual(at("2030-03-04T00:00:00Z"));
  expect(periodStart("weekly", at("2030-03-11T00:00:00Z"))).toEqual(at("2030-03-11T00:00:00Z"));
  expect(periodEnd("weekly", at("2030-03-10T12:00:00Z"))).toEqual(at("2030-03-11T00:00:00Z"));
  // Across a month and a year.
  expect(periodStart("weekly", at("2031-01-01T05:00:00Z"))).toEqual(at("2030-12-30T00:00:00Z"));
  expect(periodStart("monthly", at("2030-02-28T23:00:00Z"))).toEqual(at("2030-02-01T00:00:00Z"));
  expect(periodEnd("monthly", at("2030-12-31T23:00:00Z"))).toEqual(at("2031-01-01T00:00:00Z"));
  expect(periodStart("none", at("2030-02-28T23:00:00Z"))).toBeNull();
  expect(periodEnd("none", at("2030-02-28T23:00:00Z"))).toBeNull();
});

test("the stored counter counts only in its own period; `none` counts everything", () => {
  const s: SpendState = { spendingLimit: 5, spendPeriod: "daily", spent: 40, periodSpent: 5, periodStart: at("2030-03-10T00:00:00Z") };
  expect(spentInPeriod(s, at("2030-03-10T23:59:59Z"))).toBe(5);
  expect(limitReached(s, at("2030-03-10T23:59:59Z"))).toBe(true);
  expect(spentInPeriod(s, at("2030-03-11T00:00:00Z"))).toBe(0);
  expect(limitReached(s, at("2030-03-11T00:00:00Z"))).toBe(false);
  expect(spentInPeriod({ ...s, spendPeriod: "none" }, at("2040-01-01T00:00:00Z"))).toBe(40);
  expect(spentInPeriod({ ...s, periodStart: null }, at("2030-03-10T01:00:00Z"))).toBe(0);
  expect(limitReached({ ...s, spendingLimit: null }, at("2030-03-10T01:00:00Z"))).toBe(false);
});
