// Database-independent: the log's timestamps.
import { expect, test } from "bun:test";
import { isoNow } from "../../src/log";

test("log lines are stamped as toISOString writes the time, across milliseconds, seconds and days", () => {
  const day = Date.UTC(2026, 10, 27, 23, 59, 59, 0);
  const times = [0, 1, 9, 10, 99, 100, 999, 1000, 1001, 60_000, day, day + 7, day + 99, day + 999, day + 1000, day + 1000, day + 1005, 253402300799999];
  for (let i = 0; i < 2000; i++) times.push(day + Math.floor(Math.random() * 86_400_000 * 400));
  for (const ms of times) expect(isoNow(ms)).toBe(new Date(ms).toISOString());
  expect(isoNow()).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
});
