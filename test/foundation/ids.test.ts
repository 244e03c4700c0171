import { expect, test } from "bun:test";
import { isWellFormedId, newId } from "../../src/ids";

test("ids made in one burst (same millisecond) are unique and sort in creation order", () => {
  const ids = Array.from({ length: 5000 }, () => newId("evt_"));
  expect(new Set(ids).size).toBe(ids.length);
  expect([...ids].sort()).toEqual(ids);
  for (const id of ids.slice(0, 10)) expect(isWellFormedId(id, "evt_")).toBe(true);
});

test("the random part carries over like a base-32 number within a millisecond", () => {
  // Many ids in one burst cross digit boundaries ("...z" -> "...10"); order and uniqueness hold.
  const ids: string[] = [];
  const start = Date.now();
  while (Date.now() === start || ids.length < 40_000) ids.push(newId("x_"));
  expect(new Set(ids).size).toBe(ids.length);
  expect([...ids].sort()).toEqual(ids);
  for (const id of ids) expect(id.length).toBe(2 + 26);
});
