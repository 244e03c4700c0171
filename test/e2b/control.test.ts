import { afterAll, beforeAll, expect, test } from "bun:test";
import { Sandbox } from "e2b";
import { eventsOf } from "../sandboxes/helpers";
import { type E2BContext, startE2B, stopE2B } from "./helpers";

let c: E2BContext;

beforeAll(async () => {
  c = await startE2B();
}, 120_000);

afterAll(() => stopE2B(c));

test("create, getInfo, list, commands.run, kill through the SDK", async () => {
  const sbx = await Sandbox.create("base", { ...c.opts, metadata: { team: "a" }, timeoutMs: 120_000 });
  const info = await sbx.getInfo();
  expect(info).toMatchObject({ sandboxId: sbx.sandboxId, templateId: "base", metadata: { team: "a" }, state: "running" });
  const r = await sbx.commands.run("echo hi");
  expect(r).toMatchObject({ exitCode: 0, stdout: "hi\n" });
  await sbx.kill();
  expect(await Sandbox.kill(sbx.sandboxId, c.opts)).toBe(false);
  const types = (await eventsOf(c.svc, sbx.sandboxId)).map((e) => e.type);
  expect(types).toEqual(["sandbox.lifecycle.created", "sandbox.lifecycle.killed"]);
}, 60_000);
