import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { calcPrice } from "@pydantic/genai-prices";
import { sql } from "drizzle-orm";
import { leasesFor } from "../../src/budgets";
import { rowsOf } from "../../src/db/client";
import { usageMeterFor } from "../../src/metering";
import { startTestService, type TestService } from "../helpers/service";
import { CACHE_USAGE, startCacheUpstream } from "./cache-upstream";
import { eventually, usageOf } from "./helpers";

// Usage as the vendor bills it: prompt-cache writes (by TTL) and reads, cached prompt
// tokens, reasoning, priced at the catalog's prices for each part; and what a cut-off
// stream records.

let up: ReturnType<typeof startCacheUpstream>;
let svc: TestService;
let org: string;
beforeAll(async () => {
  up = startCacheUpstream();
  svc = await startTestService({
    ANTHROPIC_API_KEY: "sk-upstream-anthropic",
    ANTHROPIC_BASE_URL: up.url,
    OPENAI_API_KEY: "sk-upstream-openai",
    OPENAI_BASE_URL: `${up.url}/v1`,
    GEMINI_API_KEY: "upstream-gemini",
    GEMINI_BASE_URL: up.url,
  });
  org = await svc.org();
});
afterAll(async () => {
  await svc?.close();
  up?.stop();
});

const within1pct = (actual: number, expected: number) => expect(Math.abs(actual - expected) / expected).toBeLessThan(0.01);

describe("cache-aware metering", () => {
  test("a Claude Code run through the gateway costs in the request log what the CLI itself reports", async () => {
    const { key, id } = await svc.key(org);
    const home = mkdtempSync(join(tmpdir(), "cc-home-"));
    const bin = join(import.meta.dir, "../../node_modules/.bin/claude");
    const proc = Bun.spawn([bin, "-p", "say hello", "--output-format", "json", "--model", "claude-sonnet-4-5"], {
      cwd: home,
      env: {
        PATH: process.env.PATH ?? "",
        HOME: home,
        ANTHROPIC_BASE_URL: svc.url,
        ANTHROPIC_API_KEY: key,
        CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: "1",
        DISABLE_AUTOUPDATER: "1",
      },
      stdout: "pipe",
      stderr: "pipe",
    });
    const killer = setTimeout(() => proc.kill(), 150_000);
    try {
      const out = await new Response(proc.stdout).text();
      await proc.exited;
      const result = JSON.parse(out) as { total_cost_usd: number; is_error: boolean };
      expect(result.is_error).toBe(false);
      const rows = (await usageOf(svc, id)).filter((r) => r.surface === "messages");
      expect(rows.length).toBeGreaterThanOrEqual(1);
      const logged = rows.reduce((a, r) => a + (r.cost ?? 0), 0);
      within1pct(logged, result.total_cost_usd);
      const u = CACHE_USAGE.messages;
      const row = rows[0];
      expect(row.inputTokens).toBe(u.input_tokens + u.cache_creation_input_tokens + u.cache_read_input_tokens);
      expect(row.cachedTokens).toBe(u.cache_read_input_tokens);
      expect(row.cacheWriteTokens).toBe(u.cache_creation_input_tokens);
      expect(row.cacheWrite1hTokens).toBe(u.cache_creation.ephemeral_1h_input_tokens);
      expect(row.estimated).toBe(false);
    } finally {
      clearTimeout(killer);
      proc.kill();
      rmSync(home, { recursive: true, force: true });
    }
  }, 180_000);

  test("OpenAI cached prompt tokens and reasoning are priced as the catalog's prices say", async () => {
    const { key, id } = await svc.key(org);
    const res = await svc.fetch("/v1/chat/completions", {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: JSON.stringify({ model: "gpt-4o", max_tokens: 600, messages: [{ role: "user", content: "hi" }] }),
    });
    expect(res.status).toBe(200);
    await res.text();
    const [row] = await usageOf(svc, id);
    const u = CACHE_USAGE.chat;
    const expected = calcPrice({ input_tokens: u.prompt_tokens, cache_read_tokens: u.prompt_tokens_details.cached_tokens, output_tokens: u.completion_tokens }, "gpt-4o", { providerId: "openai" })!.total_price;
    // gpt-4o: $2.50 input, $1.25 cached input, $10 output per million tokens.
    within1pct(expected, (2_000 * 2.5 + 8_000 * 1.25 + 500 * 10) / 1e6);
    within1pct(row.cost!, expected);
    expect(row.cachedTokens).toBe(8_000);
    expect(row.reasoningTokens).toBe(200);
  });

  test("Gemini cached content and thoughts are priced as the catalog's prices say", async () => {
    const { key, id } = await svc.key(org);
    const res = await svc.fetch("/v1beta/models/gemini-2.5-flash:generateContent", {
      method: "POST",
      headers: { "x-goog-api-key": key, "content-type": "application/json" },
      body: JSON.stringify({ contents: [{ role: "user", parts: [{ text: "hi" }] }], generationConfig: { maxOutputTokens: 600 } }),
    });
    expect(res.status).toBe(200);
    await res.text();
    const [row] = await usageOf(svc, id);
    const g = CACHE_USAGE.gemini;
    const output = g.candidatesTokenCount + g.thoughtsTokenCount;
    const expected = calcPrice({ input_tokens: g.promptTokenCount, cache_read_tokens: g.cachedContentTokenCount, output_tokens: output }, "gemini-2.5-flash", { providerId: "google" })!.total_price;
    within1pct(row.cost!, expected);
    expect(row.inputTokens).toBe(g.promptTokenCount);
    expect(row.outputTokens).toBe(output);
    expect(row.cachedTokens).toBe(g.cachedContentTokenCount);
    expect(row.reasoningTokens).toBe(g.thoughtsTokenCount);
  });
});

describe("cut-off streams", () => {
  async function cutOff(path: string, headers: Record<string, string>, body: unknown) {
    up.setHang(true);
    const ac = new AbortController();
    try {
      const res = await svc.fetch(path, { method: "POST", headers: { "content-type": "application/json", ...headers }, body: JSON.stringify(body), signal: ac.signal });
      expect(res.status).toBe(200);
      const reader = res.body!.getReader();
      await reader.read(); // the first events reached the client
      ac.abort();
    } finally {
      up.setHang(false);
    }
  }

  test("a chat stream the client cuts before usage arrived records the request's estimated input and the deltas seen, marked estimated, and releases its hold", async () => {
    const { key, id } = await svc.key(org, { spendingLimit: 10 });
    const content = "x".repeat(4000);
    await cutOff("/v1/chat/completions", { authorization: `Bearer ${key}` }, { model: "gpt-4o", stream: true, messages: [{ role: "user", content }] });
    const row = await eventually(async () => (await usageOf(svc, id))[0]);
    expect(row.status).toBe(499);
    expect(row.estimated).toBe(true);
    // About a token per four bytes of the request sent upstream.
    expect(row.inputTokens).toBeGreaterThanOrEqual(1000);
    expect(row.inputTokens).toBeLessThan(1100);
    expect(row.outputTokens).toBeGreaterThanOrEqual(1);
    expect(row.cost).toBeGreaterThan(0);
    // The maximum cost held at admission is released, the estimated cost spent instead
    // (and taken off this process's budget lease).
    await usageMeterFor(svc.server.services).flush();
    const lease = leasesFor(svc.server.services).state("key", id);
    expect(lease?.inflight ?? 0).toBe(0);
    expect(lease?.unwritten ?? 0).toBe(0);
    const [k] = rowsOf<{ spent: string }>(await svc.server.services.db.execute(sql`select spent from api_keys where id = ${id}`));
    expect(Number(k.spent)).toBeCloseTo(row.cost!, 5);
  });

  test("a Messages stream cut off keeps the input its first event reported, cache parts included", async () => {
    const { key, id } = await svc.key(org);
    await cutOff("/v1/messages", { "x-api-key": key, "anthropic-version": "2023-06-01" }, { model: "claude-sonnet-4-5", max_tokens: 1000, stream: true, messages: [{ role: "user", content: "hi" }] });
    const row = await eventually(async () => (await usageOf(svc, id))[0]);
    const u = CACHE_USAGE.messages;
    expect(row.status).toBe(499);
    expect(row.estimated).toBe(true);
    expect(row.inputTokens).toBe(u.input_tokens + u.cache_creation_input_tokens + u.cache_read_input_tokens);
    expect(row.cacheWriteTokens).toBe(u.cache_creation_input_tokens);
    expect(row.outputTokens).toBeGreaterThanOrEqual(1);
  });
});
