import { expect, test } from "bun:test";
import { sql } from "drizzle-orm";
import { openDatabase } from "../../src/db/client";
import { msUntil, pauseUntilDue, WakeableSleep } from "../../src/db/due";
import { rowsOf } from "../../src/db/client";

test("a loop sleeps until its next due work, at most its slow look, and never spins on work left due", () => {
  expect(pauseUntilDue(null, 30_000)).toBe(30_000);
  expect(pauseUntilDue(undefined, 30_000)).toBe(30_000);
  expect(pauseUntilDue(Number.NaN, 30_000)).toBe(30_000);
  expect(pauseUntilDue(2_000, 30_000)).toBe(2_005);
  expect(pauseUntilDue(120_000, 30_000)).toBe(30_000);
  // Due already (what the last pass left): the busy pause, never 0.
  expect(pauseUntilDue(0, 30_000)).toBe(1_000);
  expect(pauseUntilDue(-5_000, 30_000)).toBe(1_000);
  // A look shorter than the busy pause (tests' 100 ms) is kept.
  expect(pauseUntilDue(-5_000, 100)).toBe(100);
});

test("wake() ends a sleep at once, and one that came while the loop was busy ends its next sleep", async () => {
  const pause = new WakeableSleep();
  const long = pause.sleep(600_000);
  pause.wake();
  await long;
  pause.wake();
  // Woken before sleeping: returns without waiting the ten minutes.
  await pause.sleep(600_000);
  // take() reads and forgets a wake.
  pause.wake();
  expect(pause.take()).toBe(true);
  expect(pause.take()).toBe(false);
  const short = await Promise.race([pause.sleep(50).then(() => "slept"), Bun.sleep(5_000).then(() => "stuck")]);
  expect(short).toBe("slept");
});

test("msUntil reads the time to a due moment on the database's clock (null when there is none)", async () => {
  const database = await openDatabase({ dataDir: "memory://" });
  try {
    const [row] = rowsOf<{ soon: number; none: number | null; past: number }>(
      await database.db.execute(sql`select ${msUntil(sql`now() + interval '90 seconds'`)} as soon, ${msUntil(sql`null::timestamptz`)} as none, ${msUntil(sql`now() - interval '1 second'`)} as past`),
    );
    expect(row.soon).toBe(90_000);
    expect(row.none).toBeNull();
    expect(row.past).toBe(-1_000);
  } finally {
    await database.close();
  }
});
