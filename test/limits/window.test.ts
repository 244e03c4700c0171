import { afterEach, expect, test } from "bun:test";
import { LocalRateLimiter, WINDOW_MS } from "../../src/limits";
import { readSettings } from "../../src/settings";

let now = 1_000_000;
const clock = () => now;
const limiters: LocalRateLimiter[] = [];
function limiter(globalLimit = 0) {
  const l = new LocalRateLimiter(globalLimit, clock);
  limiters.push(l);
  return l;
}
afterEach(() => {
  for (const l of limiters.splice(0)) l.close();
});

test("a key's rpm admits that many requests per minute, then refuses", () => {
  const l = limiter();
  expect([l.acquire("k1", 3), l.acquire("k1", 3), l.acquire("k1", 3)]).toEqual([null, null, null]);
  expect(l.acquire("k1", 3)).toBe("key");
  expect(l.acquire("k1", 3)).toBe("key");
  // Other keys have their own window; keys without rpm are not capped.
  expect(l.acquire("k2", 3)).toBeNull();
  for (let i = 0; i < 100; i++) expect(l.acquire("k3", 0)).toBeNull();
});

test("the window slides: each request frees its slot exactly one minute after it was admitted", () => {
  const l = limiter();
  const start = now;
  expect(l.acquire("k", 3)).toBeNull(); // t=0
  now = start + 30_000;
  expect(l.acquire("k", 3)).toBeNull(); // t=30s
  now = start + 40_000;
  expect(l.acquire("k", 3)).toBeNull(); // t=40s
  now = start + 59_999;
  expect(l.acquire("k", 3)).toBe("key");
  now = start + WINDOW_MS;
  expect(l.acquire("k", 3)).toBeNull(); // the t=0 request left the window
  expect(l.acquire("k", 3)).toBe("key");
  now = start + 30_000 + WINDOW_MS;
  expect(l.acquire("k", 3)).toBeNull(); // the t=30s request left
  expect(l.acquire("k", 3)).toBe("key");
});

test("refused requests do not count against the window", () => {
  const l = limiter();
  const start = now;
  expect(l.acquire("k", 1)).toBeNull();
  for (let i = 1; i <= 50; i++) {
    now = start + i * 1000;
    expect(l.acquire("k", 1)).toBe("key");
  }
  now = start + WINDOW_MS;
  expect(l.acquire("k", 1)).toBeNull();
});

test("the platform-wide cap is shared by all keys; the key cap is reported first", () => {
  const l = limiter(4);
  expect(l.acquire("a", 0)).toBeNull();
  expect(l.acquire("b", 0)).toBeNull();
  expect(l.acquire("c", 2)).toBeNull();
  expect(l.acquire("c", 2)).toBeNull();
  expect(l.acquire("d", 0)).toBe("global");
  expect(l.acquire("c", 2)).toBe("key");
  // A request refused by the global cap does not use the key's slot.
  expect(l.acquire("e", 1)).toBe("global");
  now += WINDOW_MS;
  expect(l.acquire("e", 1)).toBeNull();
});

test("changing a key's rpm keeps its recent requests", () => {
  const l = limiter();
  for (let i = 0; i < 5; i++) expect(l.acquire("k", 5)).toBeNull();
  expect(l.acquire("k", 3)).toBe("key"); // lowered: 5 recent requests already exceed 3
  expect(l.acquire("k", 10)).toBeNull(); // raised: 5 recent + 1 fits in 10
  for (let i = 0; i < 4; i++) expect(l.acquire("k", 10)).toBeNull();
  expect(l.acquire("k", 10)).toBe("key");
});

test("idle keys are forgotten, so memory does not grow with every key ever seen", () => {
  const l = limiter();
  for (let i = 0; i < 1000; i++) l.acquire(`key-${i}`, 5);
  expect(l.trackedKeys()).toBe(1000);
  now += 30_000;
  l.acquire("recent", 5);
  l.sweep();
  expect(l.trackedKeys()).toBe(1001);
  now += WINDOW_MS - 29_000;
  l.sweep();
  expect(l.trackedKeys()).toBe(1);
});

test("RATE_LIMIT_RPM is validated", () => {
  const globalLimit = (env: Record<string, string>) => readSettings(env).limits.globalRpm;
  expect(globalLimit({})).toBe(0);
  expect(globalLimit({ RATE_LIMIT_RPM: "120" })).toBe(120);
  expect(() => globalLimit({ RATE_LIMIT_RPM: "-1" })).toThrow(/RATE_LIMIT_RPM must be a non-negative integer/);
  expect(() => globalLimit({ RATE_LIMIT_RPM: "lots" })).toThrow(/RATE_LIMIT_RPM/);
});

test("a request outside the platform-wide cap's reach counts against its key only", () => {
  const l = limiter(2);
  for (let i = 0; i < 5; i++) expect(l.acquire(`k${i}`, 0, false)).toBeNull();
  expect([l.acquire("a", 0), l.acquire("b", 0), l.acquire("c", 0)]).toEqual([null, null, "global"]);
  expect([l.acquire("d", 2, false), l.acquire("d", 2, false), l.acquire("d", 2, false)]).toEqual([null, null, "key"]);
});
