import { afterAll, beforeAll, expect, test } from "bun:test";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { eq } from "drizzle-orm";
import { Sandbox, Template } from "e2b";
import { templateServiceOf } from "../../src/templates";
import { templateBuilds, templates, templateStepCache } from "../../src/templates/schema";
import { debianOciLayout } from "../helpers/debian-image";
import { startTestService, type TestService } from "../helpers/service";
import { destroyAll, requireBubblewrap } from "../sandboxes/helpers";
import { sdkOptions } from "../e2b/helpers";

/**
 * Garbage collection of the layer store: deleting a template removes the layers only its
 * builds had (and their step cache entries), while the layers it shares with another
 * template (the base image, a step both made) stay, and so does every layer a running
 * sandbox has mounted, until that sandbox is gone.
 */
let svc: TestService;
let opts: ReturnType<typeof sdkOptions>;
let base: string;

beforeAll(async () => {
  requireBubblewrap();
  base = debianOciLayout();
  // No grace: the layers these builds store are seconds old when their template goes.
  svc = await startTestService({ TEMPLATE_LAYER_GRACE_MS: "0" });
  opts = sdkOptions(svc, (await svc.key(await svc.org())).key);
}, 600_000);

afterAll(async () => {
  if (svc) {
    await destroyAll(svc);
    await svc.close();
  }
});

const layerDir = (digest: string) => join(svc.dataDir, "templates", "layers", digest);

async function layersOf(name: string): Promise<string[]> {
  const [row] = await svc.server.services.db.select({ layers: templateBuilds.layers }).from(templateBuilds).innerJoin(templates, eq(templates.id, templateBuilds.templateId)).where(eq(templates.name, name));
  return row?.layers ?? [];
}

function twoStep(last: string) {
  return Template().fromImage(base).runCmd("echo shared > /shared.txt", { user: "root" }).runCmd(`echo ${last} > /${last}.txt`, { user: "root" });
}

test("deleting a template removes its exclusive layers and their cache entries; shared ones stay", async () => {
  await Template.build(twoStep("a"), "gc-a", opts);
  await Template.build(twoStep("b"), "gc-b", opts);
  const a = await layersOf("gc-a");
  const b = await layersOf("gc-b");
  const exclusive = a.filter((l) => !b.includes(l));
  const shared = a.filter((l) => b.includes(l));
  // The base image, E2B's user, the shared step; then each template's own step.
  expect(exclusive).toHaveLength(1);
  expect(shared.length).toBeGreaterThanOrEqual(3);
  for (const l of a) expect(existsSync(layerDir(l))).toBe(true);

  const r = await svc.fetch("/templates/gc-a", { method: "DELETE", headers: { authorization: `Bearer ${opts.apiKey}` } });
  expect(r.status).toBe(204);
  // The delete's collection runs in the background; this one runs after it.
  await templateServiceOf(svc.server.services).collectLayers();
  expect(existsSync(layerDir(exclusive[0]!))).toBe(false);
  for (const l of b) expect(existsSync(layerDir(l))).toBe(true);
  const cached = (await svc.server.services.db.select({ layer: templateStepCache.layer }).from(templateStepCache)).map((c) => c.layer);
  expect(cached).not.toContain(exclusive[0]);
  expect(cached).toContain(b[b.length - 1]);

  // The survivor still runs, with the shared layers.
  const sbx = await Sandbox.create("gc-b", opts);
  try {
    expect((await sbx.commands.run("cat /shared.txt /b.txt")).stdout).toBe("shared\nb\n");
    // Its info has the built template's resources (the defaults: the build asked for none).
    const info = await Sandbox.getInfo(sbx.sandboxId, opts);
    expect({ templateId: info.templateId.split("@")[0], cpuCount: info.cpuCount, memoryMB: info.memoryMB }).toEqual({ templateId: "gc-b", cpuCount: 1, memoryMB: 2048 });
    // Paused to disk, it comes back on its build (found among built templates) with root's writes, which the collection keeps meanwhile.
    await sbx.commands.run("echo paused > /etc/paused.txt", { user: "root" });
    await sbx.pause({ keepMemory: false });
    await templateServiceOf(svc.server.services).collectLayers();
    const back = await Sandbox.connect(sbx.sandboxId, opts);
    expect((await back.commands.run("cat /b.txt /etc/paused.txt")).stdout).toBe("b\npaused\n");
  } finally {
    await sbx.kill();
  }
  // And a rebuild of the deleted one runs its own step again, reusing the shared ones.
  const logs: string[] = [];
  await Template.build(twoStep("a"), "gc-a", { ...opts, onBuildLogs: (l) => logs.push(l.message) });
  expect(logs.some((l) => l.startsWith("CACHED [1] RUN echo shared"))).toBe(true);
  expect(logs.some((l) => l.startsWith("[2] RUN echo a"))).toBe(true);
}, 600_000);

test("a running sandbox's layers stay when its template is deleted, and go once it is killed", async () => {
  await Template.build(twoStep("c"), "gc-c", opts);
  const own = (await layersOf("gc-c")).at(-1)!;
  const sbx = await Sandbox.create("gc-c", opts);
  try {
    expect((await svc.fetch("/templates/gc-c", { method: "DELETE", headers: { authorization: `Bearer ${opts.apiKey}` } })).status).toBe(204);
    await templateServiceOf(svc.server.services).collectLayers();
    expect(existsSync(layerDir(own))).toBe(true);
    expect((await sbx.commands.run("cat /c.txt")).stdout).toBe("c\n");
  } finally {
    await sbx.kill();
  }
  await templateServiceOf(svc.server.services).collectLayers();
  expect(existsSync(layerDir(own))).toBe(false);
}, 600_000);
