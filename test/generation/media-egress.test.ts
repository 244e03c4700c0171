import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { LLMock } from "@copilotkit/aimock";
import { startTestService, type TestService } from "../helpers/service";
import { configFile, PNG, pollUntilDone, post, startUpstream, upstreamEnv } from "./helpers";

// A provider (aimock on 127.0.0.1, configured by the operator, so trusted) answers image
// requests with media URLs. 127.0.0.2 stands for an internal service the upstream must not
// make us fetch; 127.0.0.3 for an outside storage host (allowed by EGRESS_ALLOW_CIDRS).
const INTERNAL = "127.0.0.2";
const STORAGE = "127.0.0.3";

let mock: LLMock;
let internal: ReturnType<typeof Bun.serve>;
let storage: ReturnType<typeof Bun.serve>;
const internalHits: string[] = [];
let svc: TestService;
let key: string;

beforeAll(async () => {
  // What an internal service would hand out to anyone who asks from inside.
  internal = Bun.serve({
    hostname: INTERNAL,
    port: 0,
    fetch(req) {
      internalHits.push(new URL(req.url).pathname);
      return new Response(Buffer.concat([PNG, Buffer.from("internal secret")]), { headers: { "content-type": "image/png" } });
    },
  });
  storage = Bun.serve({
    hostname: STORAGE,
    port: 0,
    fetch(req) {
      const path = new URL(req.url).pathname;
      if (path === "/bounce") return Response.redirect(`http://${INTERNAL}:${internal.port}/secret-via-redirect`, 302);
      if (path === "/hop") return Response.redirect(`http://${STORAGE}:${storage.port}/image.png`, 302);
      return new Response(PNG, { headers: { "content-type": "image/png" } });
    },
  });
  mock = await startUpstream();
  mock.onImage("point inside", { image: { url: `http://${INTERNAL}:${internal.port}/secret` } });
  mock.onImage("bounce inside", { image: { url: `http://${STORAGE}:${storage.port}/bounce` } });
  mock.onImage("from storage", { image: { url: `http://${STORAGE}:${storage.port}/hop` } });
  svc = await startTestService({
    ...upstreamEnv(mock),
    // Only the storage host is exempt; the upstream itself needs no exemption (operator-configured).
    EGRESS_ALLOW_CIDRS: `${STORAGE}/32`,
    GENERATION_POLL: "100ms",
    GENERATION_RETRY_BACKOFF: "100ms",
    CONFIG_FILE: configFile({ gateway: { cooldownFailures: 1000 } }),
  });
  ({ key } = await svc.key(await svc.org()));
}, 60_000);

afterAll(async () => {
  await svc?.close();
  await mock?.stop();
  internal?.stop(true);
  storage?.stop(true);
});

async function generate(prompt: string) {
  const created = await post(svc, key, "/v1/generations", { model: "gpt-image-1", prompt });
  expect(created.status).toBe(201);
  return pollUntilDone(created.json.urls.get, key, 20_000);
}

describe("media URLs returned by a provider go through the egress rules", () => {
  test("a media URL on a denied address: the task fails, nothing is fetched or served", async () => {
    const done = await generate("point inside");
    expect(done.status).toBe("failed");
    expect(done.error.category).toBe("upstream_error");
    expect(done.error.message).toContain(`media download refused: url host ${INTERNAL} is not a public address`);
    expect(done.outputs ?? []).toEqual([]);
    expect(internalHits).toEqual([]);
  });

  test("a media URL that redirects to a denied address: the hop is refused, nothing is served", async () => {
    const done = await generate("bounce inside");
    expect(done.status).toBe("failed");
    expect(done.error.message).toContain(`media download refused: url host ${INTERNAL} is not a public address`);
    expect(done.outputs ?? []).toEqual([]);
    expect(internalHits).toEqual([]);
  });

  test("an allowed storage host (redirecting within itself) still serves the file", async () => {
    const done = await generate("from storage");
    expect(done.status).toBe("completed");
    expect(done.outputs).toHaveLength(1);
    const media = await fetch(done.outputs[0]);
    expect(media.status).toBe(200);
    expect(Buffer.from(await media.arrayBuffer()).equals(PNG)).toBe(true);
  });
});
