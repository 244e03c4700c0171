import Anthropic from "@anthropic-ai/sdk";
import { LLMock } from "@copilotkit/aimock";
import type { TestService } from "../helpers/service";

/** A real mock model upstream (aimock) on a free port. */
export async function startModel(): Promise<LLMock> {
  const mock = new LLMock({ port: 0, host: "127.0.0.1" });
  await mock.start();
  return mock;
}

/** Zero-config providers pointed at the mock: messages (anthropic) and chat completions (openai). */
export function modelEnv(mock: LLMock): Record<string, string> {
  return {
    ANTHROPIC_API_KEY: "sk-upstream-anthropic",
    ANTHROPIC_BASE_URL: mock.url,
    OPENAI_API_KEY: "sk-upstream-openai",
    OPENAI_BASE_URL: `${mock.url}/v1`,
    USAGE_FLUSH_MS: "20",
  };
}

/** The local sandbox backend needs bubblewrap: fail (never skip) naming the Debian package. */
export function requireBubblewrap(): void {
  if (!Bun.which("bwrap")) throw new Error("bwrap not found: install the Debian package 'bubblewrap' to run the agent loop tests");
}

export function sdk(svc: { url: string }, key: string): Anthropic {
  return new Anthropic({ baseURL: svc.url, apiKey: key, maxRetries: 0 });
}

/** Polls the session until it is idle (the loop finished its turn) and returns the event list. */
export async function waitIdle(client: Anthropic, sessionId: string, timeoutMs = 60_000): Promise<any[]> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const s = await client.beta.sessions.retrieve(sessionId);
    if (s.status === "idle") {
      const all: any[] = [];
      for await (const e of client.beta.sessions.events.list(sessionId, { limit: 100 })) all.push(e);
      return all;
    }
    if (Date.now() > until) throw new Error(`session ${sessionId} still ${s.status} after ${timeoutMs} ms`);
    await Bun.sleep(50);
  }
}

export const types = (events: { type: string }[]) => events.map((e) => e.type);

export async function webhook(svc: TestService, key: string, url: string): Promise<void> {
  const res = await svc.fetch("/events/webhooks", {
    method: "POST",
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
    body: JSON.stringify({ name: "sessions", url, resourceType: "session" }),
  });
  if (res.status !== 201) throw new Error(`webhook registration failed: ${res.status} ${await res.text()}`);
}

/** The SDK's API error a call fails with (fails the test when it succeeds or throws something else). */
export async function errorOf(p: Promise<unknown>): Promise<InstanceType<typeof Anthropic.APIError>> {
  try {
    await p;
  } catch (e) {
    if (e instanceof Anthropic.APIError) return e;
    throw e;
  }
  throw new Error("expected an API error");
}
