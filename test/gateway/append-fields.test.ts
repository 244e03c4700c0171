import { expect, test } from "bun:test";
import { appendFields } from "../../src/gateway/gateway";

// The gateway adds `stream_options.include_usage` to chat streams by appending it to the
// client's own JSON text: the result must parse to the body plus the field, keep the
// client's bytes otherwise, and never produce a duplicate key.
test("fields the body lacks are appended to its text", () => {
  const raw = ' {"model":"m","messages":[{"role":"user","content":"a } in text"}],"stream":true}\n';
  const out = appendFields(raw, JSON.parse(raw), { stream_options: { include_usage: true } })!;
  expect(JSON.parse(out)).toEqual({ ...JSON.parse(raw), stream_options: { include_usage: true } });
  expect(out.startsWith(' {"model":"m","messages":[{"role":"user","content":"a } in text"}],"stream":true,')).toBe(true);
});

test("a field the body already has (even as null) is not appended: the caller serialises instead", () => {
  for (const raw of ['{"model":"m","stream_options":null}', '{"model":"m","stream_options":{"include_usage":false}}']) {
    expect(appendFields(raw, JSON.parse(raw), { stream_options: { include_usage: true } })).toBeUndefined();
  }
});

test("an empty object gets the field without a leading comma", () => {
  expect(appendFields("{}", {}, { a: 1 })).toBe('{"a":1}');
});
