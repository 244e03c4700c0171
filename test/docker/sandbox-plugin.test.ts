// Database-independent: the example sandbox plugin of plugins/ against a real Docker engine; the PostgreSQL pass of npm test leaves it out.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startTestService, type TestService } from "../helpers/service";

/**
 * plugins/docker-sandbox.ts, loaded from the default PLUGINS_DIR (./plugins), configured in
 * CONFIG_FILE and driven through the sandbox API: each sandbox is a container of the Debian
 * base image that npm test builds (GATEWAY_BASE_IMAGE), with no network.
 */
const BASE_IMAGE = process.env.GATEWAY_BASE_IMAGE ?? "gateway-base/debian:bookworm";
let dir: string;
let svc: TestService;
let key: string;

function docker(args: string[]): { code: number; out: string } {
  const r = Bun.spawnSync(["docker", ...args], { stdout: "pipe", stderr: "pipe" });
  return { code: r.exitCode ?? -1, out: `${r.stdout}${r.stderr}` };
}

beforeAll(async () => {
  if (docker(["image", "inspect", BASE_IMAGE]).code !== 0) throw new Error(`base image ${BASE_IMAGE} is missing: npm test builds it as root (docker/build-base.sh, Debian package debootstrap)`);
  dir = mkdtempSync(join(tmpdir(), "gw-docker-plugin-"));
  const configFile = join(dir, "config.json");
  writeFileSync(configFile, JSON.stringify({ providers: { docker: { plugin: "docker-sandbox", image: BASE_IMAGE } }, sandboxes: { templates: { debian: { backend: "docker", memoryMB: 256, cpuCount: 1 } } } }));
  svc = await startTestService({ CONFIG_FILE: configFile });
  key = (await svc.key(await svc.org())).key;
}, 120_000);

afterAll(async () => {
  await svc?.close();
  // Whatever a failed test left: every container of this service's sandboxes.
  for (const name of docker(["ps", "--all", "--filter", "label=gateway.sandbox", "--format", "{{.Names}}"]).out.split("\n").filter((n) => n.startsWith("sandbox-sbx_"))) {
    docker(["rm", "--force", name]);
  }
  rmSync(dir, { recursive: true, force: true });
});

async function api(method: string, path: string, body?: unknown): Promise<{ status: number; body: any }> {
  const res = await svc.fetch(path, { method, headers: { authorization: `Bearer ${key}`, "content-type": "application/json" }, body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : undefined };
}

test("a sandbox of the docker-sandbox example plugin is a container: commands run in it as uid 1000 with no network, and delete removes it", async () => {
  const created = await api("POST", "/sandboxes", { templateID: "debian", envVars: { GREETING: "hello" } });
  expect(created.status).toBe(200);
  const id = created.body.sandboxID as string;
  expect(docker(["inspect", "--format", "{{.State.Running}} {{.HostConfig.NetworkMode}} {{.HostConfig.Memory}}", `sandbox-${id}`]).out.trim()).toBe(`true none ${256 * 1024 * 1024}`);

  const run = await api("POST", `/sandboxes/${id}/processes`, { cmd: "sh", args: ["-c", 'echo "$GREETING from $(id -u)"; ls /sys/class/net'] });
  expect(run.status).toBe(200);
  expect(run.body).toMatchObject({ exitCode: 0, stderr: "" });
  const [greeting, ...interfaces] = run.body.stdout.trim().split("\n");
  expect(greeting).toBe("hello from 1000");
  expect(interfaces).toEqual(["lo"]);

  // The timeout ends the command inside the container, not only the docker client.
  const slow = await api("POST", `/sandboxes/${id}/processes`, { cmd: "sleep", args: ["300"], timeout: 1 });
  expect(slow.body.exitCode).toBe(124);
  expect((await api("POST", `/sandboxes/${id}/processes`, { cmd: "sh", args: ["-c", "cat /proc/[0-9]*/comm | grep -c ^sleep"] })).body.stdout.trim()).toBe("1");

  expect((await api("DELETE", `/sandboxes/${id}`)).status).toBe(204);
  expect(docker(["inspect", `sandbox-${id}`]).code).not.toBe(0);
}, 120_000);
