// Request limits benchmark: what the JSON nesting check (src/http/body.ts) costs next to the
// JSON.parse every body gets anyway, for bodies the model gateway sees, and what a
// validation error costs when the failing field sits at the end of a wide body (the
// compiled first-error search of src/http/validation.ts against TypeBox's own walk).
// `npm run bench -- limits`. In-process timings (performance.now), median of rounds.
import { t } from "elysia";
import { Errors } from "@sinclair/typebox/errors";
import { MAX_JSON_DEPTH, nestedDeeperThan } from "../src/http/body";
import { firstError } from "../src/http/validation";
import { fmt } from "./lib";

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 7);

/** Median time of `fn` in microseconds, over rounds of enough calls to take ~50 ms. */
function time(fn: () => unknown): number {
  let n = 1;
  for (;;) {
    const s = performance.now();
    for (let i = 0; i < n; i++) fn();
    if (performance.now() - s > 50) break;
    n *= 2;
  }
  const rounds: number[] = [];
  for (let r = 0; r < ROUNDS; r++) {
    const s = performance.now();
    for (let i = 0; i < n; i++) fn();
    rounds.push(((performance.now() - s) * 1000) / n);
  }
  return rounds.sort((a, b) => a - b)[Math.floor(rounds.length / 2)];
}

const tool = (i: number) => ({ type: "function", function: { name: `tool_${i}`, description: "Looks something up", parameters: { type: "object", properties: { q: { type: "string" }, options: { type: "object", properties: { limit: { type: "integer" } } } }, required: ["q"] } } });
const message = (i: number) => ({ role: i % 2 ? "assistant" : "user", content: [{ type: "text", text: `message ${i} `.repeat(20) }] });
const bodies: [string, string][] = [
  ["small chat request (the gateway bench's)", JSON.stringify({ model: "gpt-4o-mini", messages: [{ role: "user", content: "Say hello" }] })],
  ["chat request, 20 messages and 16 tools", JSON.stringify({ model: "gpt-4o-mini", messages: Array.from({ length: 20 }, (_, i) => message(i)), tools: Array.from({ length: 16 }, (_, i) => tool(i)) })],
  ["chat request, 2,000 messages (about 1 MB)", JSON.stringify({ model: "gpt-4o-mini", messages: Array.from({ length: 2_000 }, (_, i) => message(i)) })],
  ["a million nested arrays (refused)", `{"x":${"[".repeat(1_000_000)}${"]".repeat(1_000_000)}}`],
];

export async function run() {
  console.log(`In-process, median of ${ROUNDS} rounds. Depth limit ${MAX_JSON_DEPTH}.\n`);
  console.log("| body | bytes | nesting check us | JSON.parse us | check / parse |");
  console.log("|---|---:|---:|---:|---:|");
  for (const [name, text] of bodies) {
    const check = time(() => nestedDeeperThan(text, MAX_JSON_DEPTH));
    const refused = nestedDeeperThan(text, MAX_JSON_DEPTH);
    const parse = refused ? Number.NaN : time(() => JSON.parse(text));
    console.log(`| ${name} | ${text.length.toLocaleString("en-US")} | ${fmt(check, 2)} | ${refused ? "not parsed" : fmt(parse, 1)} | ${refused ? "-" : `${fmt((check / parse) * 100, 1)}%`} |`);
  }
  const schema = t.Object({ name: t.String(), initial_events: t.Array(t.Object({ type: t.String() }, { additionalProperties: true })) });
  console.log("\n| validation error, failing field at the end | items | first error, compiled search us | first error, TypeBox walk us |");
  console.log("|---|---:|---:|---:|");
  for (const items of [1_000, 40_000]) {
    const value = { name: "d", initial_events: [...Array.from({ length: items }, () => ({ type: "user.message" })), { type: 1 }] };
    const fast = time(() => firstError(schema, [], value, ""));
    const walk = time(() => Errors(schema, [], value).First());
    console.log(`| deployment initial_events | ${items.toLocaleString("en-US")} | ${fmt(fast, 0)} | ${fmt(walk, 0)} |`);
  }
}
