import { afterAll, beforeAll, expect, test } from "bun:test";
import { Elysia, t } from "elysia";
import { routeModules } from "../../src/app";
import { requestContext } from "../../src/http/core";
import type { RouteModule } from "../../src/http/route-module";
import { named, responds, sse } from "../../src/openapi/declare";
import { takeMismatches } from "../helpers/contract";
import { startTestService, type TestService } from "../helpers/service";

// A route whose answers disagree with what it declares, on a surface of its own: the
// suite-wide check (test/helpers/contract.ts) must report each disagreement precisely.
const Probe = named("ContractProbe", t.Object({ count: t.Integer(), items: t.Array(t.Object({ name: t.String() })) }));
const probeModule: RouteModule = {
  surfaces: [{ prefix: "/contract-probe", family: "flat", credentials: "none" }],
  routes: () =>
    new Elysia()
      .use(requestContext)
      .get("/contract-probe/:case", ({ params, set }) => {
        switch (params.case) {
          case "good":
            return { count: 1, items: [{ name: "a" }] };
          case "wrong-type":
            return { count: 1, items: [{ name: 7 }] };
          case "undeclared-status":
            set.status = 418;
            return { count: 1, items: [] };
          case "missing":
            set.status = 404;
            return { error: "no such case" };
          case "wrong-error":
            set.status = 404;
            return { message: "no such case" };
          case "stream":
            return new Response("data: {}\n\n", { headers: { "content-type": "text/event-stream" } });
          default:
            return new Response("plain", { headers: { "content-type": "text/plain" } });
        }
      }, { detail: { operationId: "probeContract", summary: "Contract probe", ...responds({ 200: sse("probe events", Probe) }) } }),
};

let svc: TestService;
beforeAll(async () => {
  svc = await startTestService({}, { modules: [...routeModules, probeModule] });
}, 120_000);
afterAll(() => svc.close());

async function mismatchesOf(path: string): Promise<string[]> {
  const res = await svc.fetch(path);
  await res.arrayBuffer();
  return takeMismatches().map((m) => `${m.operation} ${m.status}: ${m.problem}`);
}

test("an answer that matches its declaration passes, JSON and event stream alike", async () => {
  expect(await mismatchesOf("/contract-probe/good")).toEqual([]);
  expect(await mismatchesOf("/contract-probe/stream")).toEqual([]);
});

test("a JSON body that breaks the schema is reported with operation, status, JSON pointer and expectation", async () => {
  const found = await mismatchesOf("/contract-probe/wrong-type");
  expect(found).toHaveLength(1);
  expect(found[0]).toContain("GET /contract-probe/{case} (probeContract) 200");
  expect(found[0]).toContain("at /items/0/name: must be string");
  expect(found[0]).toContain("got 7");
});

test("an undeclared status and an undeclared media type are reported", async () => {
  expect((await mismatchesOf("/contract-probe/undeclared-status"))[0]).toContain("status 418 is not declared");
  expect((await mismatchesOf("/contract-probe/text"))[0]).toContain("content-type 'text/plain' is not declared");
});

test("an error answer is checked against the shared error response its operation refers to", async () => {
  expect(await mismatchesOf("/contract-probe/missing")).toEqual([]);
  const found = await mismatchesOf("/contract-probe/wrong-error");
  expect(found).toHaveLength(1);
  expect(found[0]).toContain("GET /contract-probe/{case} (probeContract) 404");
  expect(found[0]).toContain("must have required property 'error'");
  expect(found[0]).toContain("openapi#/components/responses/FlatError404/content/application~1json/schema");
});

test("routes left out of the document are not checked", async () => {
  expect(await mismatchesOf("/docs")).toEqual([]);
});
