import { AwsClient } from "aws4fetch";
import { clientHeader, definePlugin, HOSTED_MODEL_ID, type ModelProvider, Type, type UpstreamRequest } from "../src/plugin-api";
import { eventStreamToSse } from "./aws/event-stream";

/**
 * AWS Bedrock: Anthropic models through InvokeModel / InvokeModelWithResponseStream. The
 * body is the Messages request itself: Bedrock takes the model in the URL and the API
 * version in the body (`anthropic_version`), so `model` and `stream` are dropped and
 * `anthropic_version` (and `anthropic_beta`, from the client's header) added; nothing
 * else changes. Requests are signed with AWS Signature Version 4.
 */
const ConfigSchema = Type.Object({
  region: Type.String({ description: "AWS region, e.g. us-east-1" }),
  accessKeyId: Type.String(),
  secretAccessKey: Type.String(),
  sessionToken: Type.Optional(Type.String()),
  baseURL: Type.Optional(Type.String({ description: "Default https://bedrock-runtime.{region}.amazonaws.com" })),
  vendor: Type.Optional(Type.String({ default: "bedrock" })),
  models: Type.Optional(Type.Array(Type.String(), { description: "Extra model ids (or inference profile ids) served under their own name" })),
  anthropicVersion: Type.Optional(Type.String({ default: "bedrock-2023-05-31" })),
});

export default definePlugin({
  kind: "model",
  name: "bedrock",
  description: "AWS Bedrock (Anthropic models over the messages protocol, SigV4)",
  serves: ["messages"],
  // Bedrock resells the vendors above under its own ids (`anthropic.claude-...-v1:0`).
  catalog: { modelsDev: "amazon-bedrock", prices: "aws", listable: HOSTED_MODEL_ID },
  enabledBy: "AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and AWS_REGION",
  configSchema: ConfigSchema,
  // The standard AWS variables; a region is required too, so AWS credentials present for
  // other tools do not switch Bedrock on by themselves.
  fromEnv(env) {
    const region = env.AWS_REGION || env.AWS_DEFAULT_REGION;
    if (!env.AWS_ACCESS_KEY_ID || !env.AWS_SECRET_ACCESS_KEY || !region) return undefined;
    return {
      region,
      accessKeyId: env.AWS_ACCESS_KEY_ID,
      secretAccessKey: env.AWS_SECRET_ACCESS_KEY,
      sessionToken: env.AWS_SESSION_TOKEN || undefined,
      baseURL: env.BEDROCK_BASE_URL || undefined,
    };
  },
  create(config, ctx): ModelProvider {
    const aws = new AwsClient({
      accessKeyId: config.accessKeyId,
      secretAccessKey: config.secretAccessKey,
      sessionToken: config.sessionToken,
      service: "bedrock",
      region: config.region,
      retries: 0,
    });
    const base = (config.baseURL ?? `https://bedrock-runtime.${config.region}.amazonaws.com`).replace(/\/+$/, "");
    return {
      vendor: config.vendor ?? "bedrock",
      models: config.models ?? [],
      serves: ["messages"],
      async send(req) {
        const action = req.stream ? "invoke-with-response-stream" : "invoke";
        const url = `${base}/model/${encodeURIComponent(req.model)}/${action}`;
        const headers: Record<string, string> = { "content-type": "application/json", accept: req.stream ? "application/vnd.amazon.eventstream" : "application/json" };
        const signed = await aws.sign(url, { method: "POST", headers, body: bedrockBody(req, config.anthropicVersion ?? "bedrock-2023-05-31") });
        // Never follow redirects: a redirect could move a signed request elsewhere.
        const res = await fetch(signed, { signal: req.signal, redirect: "manual" });
        if (!res.ok) return anthropicError(res, ctx.instanceName);
        if (!req.stream || !res.body) return res;
        return new Response(eventStreamToSse(res.body), { status: res.status, headers: { "content-type": "text/event-stream" } });
      },
    };
  },
});

/** The Messages body as Bedrock takes it (see the module comment). */
export function bedrockBody(req: UpstreamRequest, version: string): string {
  const { model: _model, stream: _stream, ...rest } = JSON.parse(req.body ?? "{}") as Record<string, unknown>;
  const betas = (clientHeader(req.clientHeaders, "anthropic-beta", "msgvendor-beta") ?? "")
    .split(",")
    .map((b) => b.trim())
    .filter(Boolean);
  return JSON.stringify({ anthropic_version: version, ...(betas.length ? { anthropic_beta: betas } : {}), ...rest });
}

/**
 * Bedrock's errors are `{"message": ...}`; the client speaks the Messages protocol, so
 * they reach it in that protocol's error shape, with Bedrock's message kept.
 */
async function anthropicError(res: Response, instance: string): Promise<Response> {
  const text = await res.text();
  let message = text;
  try {
    message = (JSON.parse(text) as { message?: string; Message?: string }).message ?? (JSON.parse(text) as { Message?: string }).Message ?? text;
  } catch {}
  const type = res.status === 429 ? "rate_limit_error" : res.status === 404 ? "not_found_error" : res.status === 401 || res.status === 403 ? "permission_error" : res.status >= 500 ? "api_error" : "invalid_request_error";
  const body = JSON.stringify({ type: "error", error: { type, message: `${instance}: ${message.slice(0, 2000)}` } });
  return new Response(body, { status: res.status, headers: { "content-type": "application/json" } });
}
