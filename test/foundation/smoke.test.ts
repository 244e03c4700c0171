import { afterAll, beforeAll, expect, test } from "bun:test";
import { startTestService, type TestService } from "../helpers/service";

let svc: TestService;
beforeAll(async () => {
  svc = await startTestService();
}, 60_000);
afterAll(() => svc.close());

test("healthz and readyz answer", async () => {
  expect((await svc.fetch("/healthz")).status).toBe(200);
  const ready = await svc.fetch("/readyz");
  expect(ready.status).toBe(200);
  expect((await ready.json()).status).toBe("ready");
});

test("a second service on a port already in use stops with a clear error instead of sharing the port", async () => {
  const err = await startTestService({ PORT: String(svc.server.port) }).then(
    (second) => second.close().then(() => undefined),
    (e: Error) => e,
  );
  expect(err?.message).toBe(`port ${svc.server.port} on 127.0.0.1 is already in use (another service running?): stop that process or set PORT to a free port`);
  // The first one is untouched.
  expect((await svc.fetch("/healthz")).status).toBe(200);
});
