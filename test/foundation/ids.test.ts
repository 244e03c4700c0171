import { expect, test } from "bun:test";
import { isWellFormedId, newId } from "../../src/ids";

test("ids made in one burst (same millisecond) are unique and sort in creation order", () => {
  const ids = Array.from({ length: 5000 }, () => newId("evt_"));
  expect(new Set(ids).size).toBe(ids.length);
  expect([...ids].sort()).toEqual(ids);
  for (const id of ids.slice(0, 10)) expect(isWellFormedId(id, "evt_")).toBe(true);
});
