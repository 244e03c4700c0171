// Database-independent: the publication of route schemas in the OpenAPI document (src/openapi/schemas.ts).
import { expect, test } from "bun:test";
import Ajv2020 from "ajv/dist/2020";
import { SchemaPublisher } from "../../src/openapi/schemas";

const publish = (schema: unknown) => new SchemaPublisher().publish(structuredClone(schema)) as Record<string, unknown>;

test("unions of bare types and nullable members are published as type lists", () => {
  expect(publish({ anyOf: [{ type: "string" }, { type: "integer" }, { type: "null" }] })).toEqual({ type: ["string", "integer", "null"] });
  expect(publish({ description: "per minute", anyOf: [{ type: "integer", minimum: 1 }, { type: "null" }] })).toEqual({ description: "per minute", type: ["integer", "null"], minimum: 1 });
  expect(publish({ anyOf: [{ type: "null" }, { type: "object", required: ["a"], properties: { a: { type: "string" } } }] })).toEqual({
    type: ["object", "null"],
    required: ["a"],
    properties: { a: { type: "string" } },
  });
});

test("a union whose member constrains every type, or clashes with the keywords beside it, stays a union", () => {
  // An enum (or const) without null would refuse null once merged.
  const enumOrNull = { anyOf: [{ type: "string", enum: ["a", "b"] }, { type: "null" }] };
  expect(publish(enumOrNull)).toEqual(enumOrNull);
  const clash = { description: "outer", anyOf: [{ type: "string", description: "inner" }, { type: "null" }] };
  expect(publish(clash)).toEqual(clash);
  const mixed = { anyOf: [{ type: "string" }, { type: "object", properties: { id: { type: "string" } } }] };
  expect(publish(mixed)).toEqual(mixed);
});

test("'any value' sub-schemas of items and of every property name are left out", () => {
  expect(publish({ type: "array", items: {} })).toEqual({ type: "array" });
  expect(publish({ type: "object", patternProperties: { "^(.*)$": {} } })).toEqual({ type: "object" });
  // A pattern with a schema constrains the values: kept.
  expect(publish({ type: "object", patternProperties: { "^(.*)$": { type: "number" } } })).toEqual({ type: "object", patternProperties: { "^(.*)$": { type: "number" } } });
});

test("the published form accepts exactly the values the route schema accepts", () => {
  const schema = {
    type: "object",
    properties: {
      rpm: { anyOf: [{ type: "integer", minimum: 1 }, { type: "null" }] },
      code: { anyOf: [{ type: "string" }, { type: "integer" }, { type: "null" }] },
      mode: { anyOf: [{ type: "string", enum: ["a"] }, { type: "null" }] },
      usage: { anyOf: [{ type: "object", patternProperties: { "^(.*)$": { type: "number" } } }, { type: "null" }] },
      data: { type: "object", patternProperties: { "^(.*)$": {} } },
      list: { type: ["array", "null"], items: {} },
    },
  };
  const ajv = new Ajv2020({ strict: false });
  const route = ajv.compile(schema);
  const published = ajv.compile(publish(schema));
  const values = [null, 0, 1, 2.5, "", "x", "a", true, [], [1, "x"], {}, { k: 1 }, { k: "x" }];
  for (const key of Object.keys(schema.properties)) {
    for (const value of values) expect(published({ [key]: value }), `${key}: ${JSON.stringify(value)}`).toBe(route({ [key]: value }));
  }
});
