import { EventStreamCodec } from "@smithy/eventstream-codec";
import { fromUtf8, toUtf8 } from "@smithy/util-utf8";
import { AwsV4Signer } from "aws4fetch";
import { exportPKCS8, exportSPKI, generateKeyPair, importSPKI, jwtVerify } from "jose";

/**
 * Test upstreams that check credentials the way the cloud vendor does, in front of a
 * model upstream (aimock): a SigV4 check recomputing the signature (Bedrock), an OAuth
 * token endpoint verifying a service account's JWT assertion, and a Vertex front that
 * accepts only the tokens that endpoint issued. All on loopback.
 */
export interface Upstream {
  url: string;
  /** Requests as the gateway sent them: path, headers, body text. */
  seen: { path: string; headers: Headers; body: string }[];
  /** Answer the next requests with this status (a failing vendor) until reset to undefined. */
  failWith?: number;
  stop(): void;
}

export const AWS = { accessKeyId: "AKIDTESTGATEWAY", secretAccessKey: "test-secret-key-for-sigv4", region: "us-east-1" };

function serve(handler: (req: Request, body: string, up: Upstream) => Promise<Response>): Upstream {
  const up: Upstream = { url: "", seen: [], stop: () => server.stop(true) };
  const server = Bun.serve({
    port: 0,
    hostname: "127.0.0.1",
    async fetch(req) {
      const body = await req.text();
      const url = new URL(req.url);
      up.seen.push({ path: url.pathname + url.search, headers: req.headers, body });
      if (up.failWith) return Response.json({ message: "vendor outage (test)" }, { status: up.failWith });
      return handler(req, body, up);
    },
  });
  up.url = `http://127.0.0.1:${server.port}`;
  return up;
}

/** Recomputes the request's SigV4 signature with the shared secret; 403 as AWS answers when it differs. */
async function sigv4Valid(req: Request, body: string): Promise<string | undefined> {
  const auth = req.headers.get("authorization") ?? "";
  const m = /^AWS4-HMAC-SHA256 Credential=([^/]+)\/(\d{8})\/([^/]+)\/([^/]+)\/aws4_request, SignedHeaders=([^,]+), Signature=([0-9a-f]{64})$/.exec(auth);
  if (!m) return "missing or malformed SigV4 Authorization header";
  const [, keyId, , region, service, signedHeaders, signature] = m;
  if (keyId !== AWS.accessKeyId) return `unknown access key ${keyId}`;
  if (region !== AWS.region || service !== "bedrock") return `wrong credential scope ${region}/${service}`;
  const headers = new Headers();
  for (const name of signedHeaders.split(";")) if (name !== "host") headers.set(name, req.headers.get(name) ?? "");
  const datetime = req.headers.get("x-amz-date") ?? "";
  const expected = await new AwsV4Signer({ method: req.method, url: req.url, headers, body, accessKeyId: AWS.accessKeyId, secretAccessKey: AWS.secretAccessKey, service, region, datetime }).authHeader();
  if (!expected.endsWith(`Signature=${signature}`)) return "The request signature we calculated does not match the signature you provided";
  return undefined;
}

const codec = new EventStreamCodec(toUtf8, fromUtf8);

/**
 * Bedrock: SigV4 checked, then InvokeModel(WithResponseStream) served by the model
 * upstream. Real Bedrock wraps each streamed Anthropic event as a PayloadPart,
 * `{"bytes": "<base64 event>"}`; aimock frames the event JSON bare, so frames are
 * rewrapped here into the real shape.
 */
export function bedrockUpstream(model: string): Upstream {
  return serve(async (req, body) => {
    const bad = await sigv4Valid(req, body);
    if (bad) return Response.json({ message: bad }, { status: 403 });
    const url = new URL(req.url);
    const res = await fetch(model + url.pathname, { method: "POST", headers: { "content-type": "application/json" }, body });
    if (!url.pathname.endsWith("/invoke-with-response-stream") || !res.ok) return res;
    const bytes = new Uint8Array(await res.arrayBuffer());
    const frames: Uint8Array[] = [];
    for (let at = 0; at < bytes.length; ) {
      const total = new DataView(bytes.buffer, bytes.byteOffset + at, 4).getUint32(0);
      const msg = codec.decode(bytes.subarray(at, at + total));
      const wrapped = JSON.stringify({ bytes: Buffer.from(msg.body).toString("base64") });
      frames.push(codec.encode({ headers: msg.headers, body: fromUtf8(wrapped) }));
      at += total;
    }
    return new Response(new Blob(frames), { headers: { "content-type": "application/vnd.amazon.eventstream" } });
  });
}

export interface TestServiceAccount {
  /** The service-account key JSON, pointing at the test token endpoint. */
  json: string;
  tokens: Upstream & { issued: Set<string> };
}

/** A service account with a fresh RSA key pair, and a token endpoint that verifies its assertions with the public key. */
export async function serviceAccount(): Promise<TestServiceAccount> {
  const { privateKey, publicKey } = await generateKeyPair("RS256", { extractable: true });
  const verifyKey = await importSPKI(await exportSPKI(publicKey), "RS256");
  const email = "gateway-test@test-project.iam.gserviceaccount.com";
  const issued = new Set<string>();
  const tokens = serve(async (req, body) => {
    const form = new URLSearchParams(body);
    if (form.get("grant_type") !== "urn:ietf:params:oauth:grant-type:jwt-bearer") return Response.json({ error: "unsupported_grant_type" }, { status: 400 });
    try {
      const { payload } = await jwtVerify(form.get("assertion") ?? "", verifyKey, { issuer: email, audience: `${tokens.url}/token`, algorithms: ["RS256"] });
      if (payload.scope !== "https://www.googleapis.com/auth/cloud-platform") return Response.json({ error: "invalid_scope" }, { status: 400 });
    } catch (e) {
      return Response.json({ error: "invalid_grant", error_description: (e as Error).message }, { status: 400 });
    }
    const token = `ya29.test-${crypto.randomUUID()}`;
    issued.add(token);
    return Response.json({ access_token: token, expires_in: 3600, token_type: "Bearer" });
  }) as Upstream & { issued: Set<string> };
  tokens.issued = issued;
  const json = JSON.stringify({
    type: "service_account",
    project_id: "test-project",
    private_key_id: "test-key-1",
    private_key: await exportPKCS8(privateKey),
    client_email: email,
    token_uri: `${tokens.url}/token`,
  });
  return { json, tokens };
}

/**
 * Vertex AI: only bearer tokens the token endpoint issued; Gemini generateContent served
 * by the model upstream as is, Anthropic rawPredict / streamRawPredict (model in the path,
 * `anthropic_version` in the body) served by its messages endpoint.
 */
export function vertexUpstream(model: string, issued: Set<string>): Upstream {
  return serve(async (req, body) => {
    const token = (req.headers.get("authorization") ?? "").replace(/^Bearer /, "");
    if (!issued.has(token)) return Response.json({ error: { code: 401, message: "Request had invalid authentication credentials.", status: "UNAUTHENTICATED" } }, { status: 401 });
    const url = new URL(req.url);
    const raw = /\/publishers\/anthropic\/models\/([^/:]+):(rawPredict|streamRawPredict)$/.exec(url.pathname);
    if (!raw) return fetch(model + url.pathname + url.search, { method: "POST", headers: { "content-type": "application/json" }, body });
    const { anthropic_version, ...rest } = JSON.parse(body);
    if (anthropic_version !== "vertex-2023-10-16") return Response.json({ error: { code: 400, message: "anthropic_version is required" } }, { status: 400 });
    const messages = JSON.stringify({ ...rest, model: decodeURIComponent(raw[1]) });
    return fetch(`${model}/v1/messages`, { method: "POST", headers: { "content-type": "application/json", "x-api-key": "vertex", "anthropic-version": "2023-06-01" }, body: messages });
  });
}

/** A vendor's own API in front of the model upstream, unchanged; `failWith` simulates its outage. */
export function passThrough(model: string): Upstream {
  return serve(async (req, body) => {
    const url = new URL(req.url);
    const headers = new Headers(req.headers);
    headers.delete("host");
    headers.delete("content-length");
    return fetch(model + url.pathname + url.search, { method: req.method, headers, body });
  });
}
