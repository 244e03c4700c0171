// Database-independent: the ring of recent upstream failures, in memory.
import { expect, test } from "bun:test";
import { RecentErrors } from "../../src/gateway/recent-errors";

test("keeps the last 50 failures, newest first, each message clipped", () => {
  const ring = new RecentErrors();
  expect(ring.list()).toEqual([]);
  for (let i = 0; i < 60; i++) ring.add({ provider: `p${i}`, model: "m", status: 500, error: i === 59 ? "x".repeat(1000) : `failure ${i}`, requestId: `req-${i}` });
  const list = ring.list();
  expect(list).toHaveLength(50);
  expect(list.map((f) => f.requestId)).toEqual(Array.from({ length: 50 }, (_, k) => `req-${59 - k}`));
  expect(list[0].error).toHaveLength(300);
  expect(list[1].error).toBe("failure 58");
  expect(Date.parse(list[0].time)).toBeGreaterThan(0);
});
