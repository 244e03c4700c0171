import { afterAll, beforeAll, expect, test } from "bun:test";
import type { LLMock } from "@copilotkit/aimock";
import { usageMeterFor } from "../../src/metering";
import { readSettings } from "../../src/settings";
import { requestLogSettings } from "../../src/usage/settings";
import { startTestService, type TestService } from "../helpers/service";
import { startUsageUpstream, vendorEnv } from "../metering/fixture";

// REQUEST_LOG_BODIES=true: the request as sent upstream and the non-streamed answer are
// kept, clipped; a stream's answer is not.
let mock: LLMock;
let svc: TestService;
let key: string;

beforeAll(async () => {
  mock = await startUsageUpstream();
  svc = await startTestService({ ...vendorEnv(mock), REQUEST_LOG_BODIES: "true", REQUEST_LOG_BODY_CHARS: "40" });
  key = (await svc.key(await svc.org())).key;
}, 120_000);
afterAll(async () => {
  await svc?.close();
  await mock?.stop();
});

async function chat(stream: boolean): Promise<string> {
  const res = await svc.fetch("/v1/chat/completions", {
    method: "POST",
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
    body: JSON.stringify({ model: "gpt-4o", stream, messages: [{ role: "user", content: "a prompt long enough to be clipped by the setting" }] }),
  });
  expect(res.status).toBe(200);
  await res.text();
  return res.headers.get("x-request-id")!;
}

async function logRow(requestId: string): Promise<any> {
  for (let i = 0; i < 50; i++) {
    await usageMeterFor(svc.server.services).flush();
    const res = await svc.fetch(`/v1/usage/requests?limit=200`, { headers: { authorization: `Bearer ${key}` } });
    const row = ((await res.json()) as { data: any[] }).data.find((r) => r.requestId === requestId);
    if (row) return row;
    await Bun.sleep(20);
  }
  throw new Error(`request ${requestId} never reached the log`);
}

test("a non-streamed request keeps both bodies, clipped to REQUEST_LOG_BODY_CHARS", async () => {
  const row = await logRow(await chat(false));
  expect(row.requestBody).toHaveLength(40);
  expect(row.requestBody.startsWith("{")).toBe(true);
  expect(row.requestBody).toContain("gpt-4o");
  expect(row.responseBody).toHaveLength(40);
  expect(row.responseBody.startsWith("{")).toBe(true);
});

test("a stream keeps the request body only", async () => {
  const row = await logRow(await chat(true));
  expect(row.streamed).toBe(true);
  expect(row.requestBody).toHaveLength(40);
  expect(row.responseBody).toBeNull();
});

test("settings: bodies off by default; a bad value is refused with the variable's name", () => {
  expect(requestLogSettings(readSettings({}).requestLog)).toEqual({ bodyChars: 0, retentionDays: 30, pruneEveryMs: 3_600_000 });
  expect(requestLogSettings(readSettings({ REQUEST_LOG_BODIES: "true" }).requestLog).bodyChars).toBe(4096);
  expect(() => requestLogSettings(readSettings({ REQUEST_LOG_BODIES: "maybe" }).requestLog)).toThrow("REQUEST_LOG_BODIES");
  expect(() => requestLogSettings(readSettings({ REQUEST_LOG_RETENTION_DAYS: "-1" }).requestLog)).toThrow("REQUEST_LOG_RETENTION_DAYS");
  expect(() => requestLogSettings(readSettings({ REQUEST_LOG_BODIES: "on", REQUEST_LOG_BODY_CHARS: "0" }).requestLog)).toThrow("REQUEST_LOG_BODY_CHARS");
});
