import { LLMock } from "@copilotkit/aimock";
import { eq } from "drizzle-orm";
import { usageMeterFor } from "../../src/metering";
import { usageRecords } from "../../src/metering/schema";
import type { TestService } from "../helpers/service";

/** A real mock upstream (aimock) on a free port, with Prometheus metrics to observe disconnects. */
export async function startUpstream(): Promise<LLMock> {
  const mock = new LLMock({ port: 0, host: "127.0.0.1", metrics: true });
  await mock.start();
  return mock;
}

/** Zero-config environment: every vendor plugin pointed at one upstream. */
export function vendorEnv(mock: LLMock): Record<string, string> {
  return {
    OPENAI_API_KEY: "sk-upstream-openai",
    OPENAI_BASE_URL: `${mock.url}/v1`,
    ANTHROPIC_API_KEY: "sk-upstream-anthropic",
    ANTHROPIC_BASE_URL: mock.url,
    GEMINI_API_KEY: "upstream-gemini",
    GEMINI_BASE_URL: mock.url,
  };
}

/** Usage rows of a key, after the meter wrote everything queued. */
export async function usageOf(svc: TestService, keyId: string) {
  await usageMeterFor(svc.server.services).flush();
  return svc.server.services.db.select().from(usageRecords).where(eq(usageRecords.keyId, keyId)).orderBy(usageRecords.createdAt, usageRecords.requestId);
}

/** Waits until `check` passes (usage of a stream is recorded when the stream ends, just after the client saw it). */
export async function eventually<T>(check: () => Promise<T | undefined>, ms = 3000): Promise<T> {
  const until = Date.now() + ms;
  for (;;) {
    const v = await check();
    if (v !== undefined) return v;
    if (Date.now() > until) throw new Error("condition not met in time");
    await Bun.sleep(20);
  }
}

/** Requests aimock counted as destroyed (the client side went away mid-response). */
export async function destroyedAtUpstream(mock: LLMock, path: string): Promise<number> {
  const text = await (await fetch(`${mock.url}/metrics`)).text();
  let n = 0;
  for (const line of text.split("\n")) {
    if (line.startsWith("aimock_requests_total{") && line.includes(`path="${path}"`) && line.includes('status="destroyed"')) n += Number(line.split(" ").pop());
  }
  return n;
}
