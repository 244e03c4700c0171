// Database-independent: the COPY encoder, checked against an embedded PGlite of its own; the PostgreSQL pass of npm test leaves it out.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { PGlite } from "@electric-sql/pglite";
import { BinaryCopyWriter, base10000Digits, scaledDigits } from "../../src/db/copy-binary";

// The binary COPY writer against the server's own reading of the same values: each row
// goes in once through binary COPY and once as text parameters, and both tables must
// read back identically.
let db: PGlite;
beforeAll(async () => {
  db = await PGlite.create();
  for (const t of ["via_copy", "via_text"]) await db.exec(`create table ${t} (n int, s text, i int4, c numeric(18, 9), b boolean, at timestamptz)`);
});
afterAll(() => db.close());

const rows: [number, string | null, number, number | null, boolean, number][] = [
  [1, "plain", 0, 0, false, Date.UTC(2000, 0, 1)],
  [2, 'quotes " and , commas\nnewline', 2_147_483_647, 0.000012345, true, Date.UTC(2026, 10, 22, 10, 0, 0, 123)],
  [3, "unicode é 漢字 \u{1F600}", -2_147_483_648, 12345.678901234, false, Date.UTC(1999, 11, 31, 23, 59, 59, 999)],
  [4, null, 42, 1e-9, true, Date.UTC(1970, 0, 1)],
  [5, "", 7, -3.5, false, Date.UTC(2100, 5, 15, 12)],
  [6, "x".repeat(5000), 1, 99_999_999.5, true, Date.UTC(2026, 0, 1)],
  [7, "null cost", 1, null, false, Date.UTC(2026, 0, 1)],
  [8, "rounds below the scale", 1, 4e-10, false, Date.UTC(2026, 0, 1)],
  [9, "whole number", 1, 10_000, false, Date.UTC(2026, 0, 1)],
  [10, "integer and fraction groups", 1, 1234.5, false, Date.UTC(2026, 0, 1)],
  [11, "a typical request's cost", 1, 0.00018375, false, Date.UTC(2026, 0, 1)],
  [12, "rounds up to the next group", 1, 0.9999999996, false, Date.UTC(2026, 0, 1)],
];

test("rows written in binary read back as the same rows written as text", async () => {
  // A tiny first buffer, so the writer has to grow it.
  const w = new BinaryCopyWriter(64);
  for (const [n, s, i, c, b, at] of rows) w.row(6).int4(n).text(s).int4(i).numeric(c, 9).bool(b).timestamptz(at);
  await db.query("copy via_copy from '/dev/blob' with (format binary)", [], { blob: new Blob([w.finish()]) });
  for (const [n, s, i, c, b, at] of rows) {
    await db.query("insert into via_text values ($1, $2, $3, $4::float8::numeric(18, 9), $5, $6)", [n, s, i, c, b, new Date(at)]);
  }
  const read = async (t: string) => (await db.query<Record<string, string>>(`select n, s, i, c::text as c, b, at from ${t} order by n`)).rows;
  const copied = await read("via_copy");
  expect(copied).toHaveLength(rows.length);
  expect(copied).toEqual(await read("via_text"));
  expect(copied[1].c).toBe("0.000012345");
  expect(copied[4].c).toBe("-3.500000000");
  expect(copied[6].c).toBeNull();
  expect((copied[1] as unknown as { at: Date }).at.toISOString()).toBe("2026-11-22T10:00:00.123Z");
});

test("a corrupt stream is refused by the server, not half-read", async () => {
  const w = new BinaryCopyWriter();
  w.row(6).int4(1).text("only two fields");
  await expect(db.query("copy via_copy from '/dev/blob' with (format binary)", [], { blob: new Blob([w.finish()]) })).rejects.toThrow();
  expect((await db.query("select count(*)::int as n from via_copy where n = 1 and s = 'only two fields'")).rows).toEqual([{ n: 0 }]);
});

test("numeric digits by arithmetic equal those from the decimal text", () => {
  const values = [0, 1e-9, 4e-10, 0.000012345, 0.00018375, 0.5, 0.9999999996, 1, 9999.9999, 10_000, 12345.678901234, 1234.5, 9_007_199.254740991];
  for (let i = 0; i < 2000; i++) values.push(Math.random() * 10 ** Math.floor(Math.random() * 7 - 3));
  for (const v of values) {
    const scaled = Math.round(v * 1e9);
    if (!Number.isSafeInteger(scaled)) continue;
    const text = (scaled / 1e9).toFixed(9);
    expect([v, scaledDigits(scaled, 9)]).toEqual([v, base10000Digits(text)]);
  }
});

test("numeric digits: base 10000 groups around the decimal point", () => {
  expect(base10000Digits("0.000000000")).toEqual({ values: [], weight: 0 });
  expect(base10000Digits("12345.678901234")).toEqual({ values: [1, 2345, 6789, 123, 4000], weight: 1 });
  expect(base10000Digits("0.000012345")).toEqual({ values: [1234, 5000], weight: -2 });
  expect(base10000Digits("10000.000000000")).toEqual({ values: [1], weight: 1 });
});
