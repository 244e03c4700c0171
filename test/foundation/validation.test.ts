import { describe, expect, test } from "bun:test";
import { Errors } from "@sinclair/typebox/errors";
import { t } from "elysia";
import { firstError } from "../../src/http/validation";

// The first validation error found with compiled checks must be the one TypeBox's own
// walk reports first: same place, same reason (the client sees both in the message).
const Tool = t.Object({ type: t.Literal("custom"), name: t.String({ maxLength: 8 }) });
const schema = t.Object({
  name: t.String({ minLength: 1 }),
  tools: t.Optional(t.Union([t.Array(Tool, { maxItems: 3 }), t.Null()])),
  metadata: t.Optional(t.Record(t.String(), t.String())),
  mode: t.Optional(t.Union([t.Literal("async"), t.Literal("sync")])),
  strict: t.Optional(t.Object({ a: t.Number() }, { additionalProperties: false })),
});

const cases: [string, unknown][] = [
  ["valid", { name: "x", tools: [{ type: "custom", name: "a" }] }],
  ["missing required", { tools: null }],
  ["wrong scalar type", { name: 1 }],
  ["too short", { name: "" }],
  ["array too long", { name: "x", tools: [1, 2, 3, 4] }],
  ["record value", { name: "x", metadata: { a: "b", c: 3 } }],
  ["union of literals", { name: "x", mode: "later" }],
  ["additional property", { name: "x", strict: { a: 1, b: 2 } }],
  ["not an object", [1, 2]],
];

describe("first validation error", () => {
  for (const [name, value] of cases) {
    test(name, () => {
      const ours = firstError(schema, [], value, "");
      const theirs = Errors(schema, [], value).First();
      expect(ours?.path).toBe(theirs?.path);
      if (name !== "array too long") expect(ours?.message).toBe(theirs?.message);
    });
  }

  test("inside a union, the field of the variant the value has the type of", () => {
    // TypeBox stops at the union ("Expected union value" at /tools); the search goes on
    // into the array the value is, and names the field that is wrong.
    const value = { name: "x", tools: [{ type: "custom", name: "a" }, { type: "custom", name: "far too long" }] };
    expect(Errors(schema, [], value).First()?.path).toBe("/tools");
    const ours = firstError(schema, [], value, "");
    expect(ours?.path).toBe("/tools/1/name");
    expect(ours?.message).toBe("Expected string length less or equal to 8");
  });
});
