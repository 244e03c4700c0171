import { writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { LLMock } from "@copilotkit/aimock";

/** Credentials of the test providers: no page or admin answer may ever show them. */
export const UPSTREAM_SECRETS = ["sk-primary-upstream-secret", "sk-secondary-upstream-secret"];
/** USD per million tokens of the routes `duo` and `solo`. */
export const PRICES = { inputPerMTok: 3, outputPerMTok: 15 };
/** A prompt the primary upstream fails with a 500, so the route falls back to the secondary. */
export const FALL_BACK = "please fall back";

export interface FallbackUpstreams {
  primary: LLMock;
  secondary: LLMock;
  /** CONFIG_FILE: providers `primary` and `secondary`, route `duo` (primary first), route `solo` (secondary only). */
  configFile: string;
  stop(): Promise<void>;
}

/**
 * Two real mock upstreams (aimock) behind CONFIG_FILE providers: the primary answers
 * 500 to FALL_BACK, the secondary answers everything, streamed in small chunks.
 */
export async function startFallbackUpstreams(): Promise<FallbackUpstreams> {
  const primary = new LLMock({ port: 0, host: "127.0.0.1" });
  const secondary = new LLMock({ port: 0, host: "127.0.0.1" });
  primary.onMessage(FALL_BACK, { error: { message: "primary broke", type: "server_error" }, status: 500 });
  primary.onMessage(/.*/, { content: "Hello from the primary" });
  secondary.onMessage(/.*/, { content: "Hello from the secondary upstream, streamed in pieces", usage: { prompt_tokens: 12, completion_tokens: 9 } }, { chunkSize: 6, latency: 30 });
  await primary.start();
  await secondary.start();
  const configFile = join(tmpdir(), `console-fixture-${process.pid}-${Date.now()}.json`);
  writeFileSync(
    configFile,
    JSON.stringify({
      providers: {
        primary: { plugin: "openai", apiKey: UPSTREAM_SECRETS[0], baseURL: `${primary.url}/v1` },
        secondary: { plugin: "openai", apiKey: UPSTREAM_SECRETS[1], baseURL: `${secondary.url}/v1` },
      },
      routes: { duo: [{ provider: "primary", model: "m" }, { provider: "secondary", model: "m" }], solo: [{ provider: "secondary", model: "m" }] },
      gateway: { cooldownFailures: 1, cooldownSeconds: 600 },
      // Prices, so requests have a cost (the spend chart, the log's cost column).
      catalog: { models: { duo: { vendor: "primary", kind: "chat", pricing: PRICES }, solo: { vendor: "secondary", kind: "chat", pricing: PRICES } } },
    }),
  );
  return {
    primary,
    secondary,
    configFile,
    async stop() {
      await primary.stop();
      await secondary.stop();
      await Bun.file(configFile).delete().catch(() => {});
    },
  };
}
