import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { LLMock } from "@copilotkit/aimock";
import OpenAI from "openai";
import { otlpSettings, parseHeaders } from "../../src/observability/otlp-config";
import { readSettings } from "../../src/settings";
import { startUpstream } from "../gateway/helpers";
import { startTestService, type TestService } from "../helpers/service";
import { apiFor, requireBubblewrap } from "../sandboxes/helpers";
import { type OtlpReceiver, type ReceivedSpan, startOtlpReceiver } from "./otlp-receiver";

let primary: LLMock;
let secondary: LLMock;
let collector: OtlpReceiver;
let svc: TestService;
let key: string;
let configDir: string;

const SERVER = 2;
const CLIENT = 3;

beforeAll(async () => {
  requireBubblewrap();
  primary = await startUpstream();
  secondary = await startUpstream();
  primary.onMessage("trace me", { error: { message: "primary broke", type: "server_error" }, status: 500 });
  secondary.onMessage("trace me", { content: "answered by the second upstream", usage: { prompt_tokens: 7, completion_tokens: 4 } } as never);
  collector = startOtlpReceiver();
  configDir = mkdtempSync(join(tmpdir(), "otel-cfg-"));
  const configFile = join(configDir, "config.json");
  writeFileSync(
    configFile,
    JSON.stringify({
      providers: {
        primary: { plugin: "openai", apiKey: "k1", baseURL: `${primary.url}/v1` },
        secondary: { plugin: "openai", apiKey: "k2", baseURL: `${secondary.url}/v1` },
      },
      routes: { "traced-model": [{ provider: "primary", model: "gpt-4o-mini" }, { provider: "secondary", model: "gpt-4o-mini" }] },
    }),
  );
  svc = await startTestService({ CONFIG_FILE: configFile, OTEL_EXPORTER_OTLP_ENDPOINT: collector.url, OTEL_SERVICE_NAME: "gateway-under-test" });
  ({ key } = await svc.key(await svc.org()));
}, 120_000);

afterAll(async () => {
  await svc?.close();
  await primary?.stop();
  await secondary?.stop();
  collector?.stop();
  rmSync(configDir, { recursive: true, force: true });
});

const childrenOf = (spans: ReceivedSpan[], parent: ReceivedSpan) => spans.filter((s) => s.traceId === parent.traceId && s.parentSpanId === parent.spanId);

describe("traces over OTLP/HTTP", () => {
  test("a streamed chat completion with a fallback: request span, one client span per attempt, GenAI attributes, traceparent upstream", async () => {
    const openai = new OpenAI({ baseURL: `${svc.url}/v1`, apiKey: key, maxRetries: 0 });
    const stream = await openai.chat.completions.create({ model: "traced-model", messages: [{ role: "user", content: "trace me" }], stream: true });
    let text = "";
    for await (const chunk of stream) text += chunk.choices[0]?.delta?.content ?? "";
    expect(text).toBe("answered by the second upstream");

    const isRequest = (s: ReceivedSpan) => s.kind === SERVER && s.attributes["http.route"] === "/v1/chat/completions" && s.attributes["gen_ai.request.model"] === "traced-model";
    await collector.waitFor((spans) => spans.some((s) => isRequest(s) && childrenOf(spans, s).length === 2));
    const root = collector.spans.find(isRequest)!;
    expect(root.name).toBe("POST /v1/chat/completions");
    expect(root.serviceName).toBe("gateway-under-test");
    expect(root.parentSpanId).toBeUndefined();
    expect(root.attributes).toMatchObject({
      "http.response.status_code": 200,
      "gen_ai.operation.name": "chat",
      "gen_ai.system": "openai",
      "gen_ai.response.model": "gpt-4o-mini",
      "gen_ai.usage.input_tokens": 7,
      "gen_ai.usage.output_tokens": 4,
      "gateway.provider": "secondary",
    });

    const attempts = childrenOf(collector.spans, root).sort((a, b) => Number(a.attributes["gateway.attempt"]) - Number(b.attributes["gateway.attempt"]));
    expect(attempts.map((a) => [a.kind, a.name, a.attributes["gateway.provider"], a.attributes["http.response.status_code"]])).toEqual([
      [CLIENT, "chat gpt-4o-mini", "primary", 500],
      [CLIENT, "chat gpt-4o-mini", "secondary", 200],
    ]);
    expect(attempts[0].attributes["error.type"]).toBe("server_error");
    expect(attempts[0].status?.code).toBe(2);
    for (const a of attempts) expect(a.attributes).toMatchObject({ "gen_ai.system": "openai", "gen_ai.request.model": "gpt-4o-mini", "gen_ai.operation.name": "chat" });

    // Each upstream received the W3C traceparent of its own attempt span.
    const sent = (mock: LLMock) => mock.getRequests().filter((r) => JSON.stringify(r.body ?? "").includes("trace me")).at(-1)!.headers as Record<string, string>;
    expect(sent(primary).traceparent).toBe(`00-${root.traceId}-${attempts[0].spanId}-01`);
    expect(sent(secondary).traceparent).toBe(`00-${root.traceId}-${attempts[1].spanId}-01`);
  });

  test("a caller's traceparent is continued; a sandbox command is a child span of its request", async () => {
    const traceId = "4bf92f3577b34da6a3ce929d0e0e4736";
    const callerSpan = "00f067aa0ba902b7";
    const api = apiFor(svc, key);
    const created = await api("POST", "/sandboxes", { templateID: "base" });
    expect(created.status).toBe(200);
    const id = created.body.sandboxID as string;
    try {
      const ran = await api("POST", `/sandboxes/${id}/processes`, { cmd: "true" }, { traceparent: `00-${traceId}-${callerSpan}-01` });
      expect(ran.status).toBe(200);
      await collector.waitFor((spans) => spans.some((s) => s.traceId === traceId && s.name === "sandbox.exec"));
      const request = collector.spans.find((s) => s.traceId === traceId && s.kind === SERVER)!;
      expect(request.parentSpanId).toBe(callerSpan);
      expect(request.name).toBe("POST /sandboxes/:id/processes");
      const exec = collector.spans.find((s) => s.traceId === traceId && s.name === "sandbox.exec")!;
      expect(exec.parentSpanId).toBe(request.spanId);
      expect(exec.attributes).toMatchObject({ "gateway.sandbox.id": id, "process.exit.code": 0 });
    } finally {
      await api("DELETE", `/sandboxes/${id}`);
    }
  });
});

describe("settings", () => {
  test("metrics stay off with tracing alone: /metrics is 404 and says how to turn it on", async () => {
    const res = await svc.fetch("/metrics");
    expect(res.status).toBe(404);
    expect(((await res.json()) as { error: string }).error).toContain("METRICS_TOKEN");
  });

  test("off unless an endpoint is set; the traces endpoint is used as given, the general one gets /v1/traces", () => {
    expect(otlpSettings(readSettings({}).observability)).toBeUndefined();
    expect(otlpSettings(readSettings({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://collector:4318/" }).observability)?.url).toBe("http://collector:4318/v1/traces");
    expect(otlpSettings(readSettings({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://a:4318", OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: "http://b:9999/custom" }).observability)?.url).toBe("http://b:9999/custom");
    expect(otlpSettings(readSettings({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://a:4318", OTEL_SDK_DISABLED: "true" }).observability)).toBeUndefined();
    expect(otlpSettings(readSettings({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://a:4318" }).observability)?.serviceName).toBe("gateway");
  });

  test("bad values stop start-up with a message naming the variable", async () => {
    expect(() => otlpSettings(readSettings({ OTEL_EXPORTER_OTLP_ENDPOINT: "collector:4318" }).observability)).toThrow("OTEL_EXPORTER_OTLP_ENDPOINT");
    expect(() => parseHeaders("novalue", "OTEL_EXPORTER_OTLP_HEADERS")).toThrow("OTEL_EXPORTER_OTLP_HEADERS");
    expect(parseHeaders("api-key=a%20b,X-Tenant=t1", "H")).toEqual({ "api-key": "a b", "x-tenant": "t1" });
    await expect(startTestService({ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: "ftp://x" })).rejects.toThrow("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT");
  });
});
