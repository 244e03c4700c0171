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
