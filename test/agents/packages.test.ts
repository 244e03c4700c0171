import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { createHash } from "node:crypto";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type Anthropic from "@anthropic-ai/sdk";
import type { LLMock } from "@copilotkit/aimock";
import { makePypiIndex } from "../helpers/pypi-index";
import { startTestService, type TestService } from "../helpers/service";
import { startTestHosts, type TestHosts } from "../helpers/test-hosts";
import { destroyAll } from "../sandboxes/helpers";
import { modelEnv, requireBubblewrap, sdk, startModel, types, waitIdle } from "./helpers";

// Managed Agents environments with a network: packages install at the session sandbox's
// start from registries the test serves itself (a PyPI simple index and an npm registry,
// static files on a test host named registry.test), under the environment's networking;
// a limited environment reaches its allowed hosts and nothing else.
let th: TestHosts;
let mock: LLMock;
let svc: TestService;
let client: Anthropic;
let files: string;

const IMPORT_BOTH = `python3 -c "import gwtestpkg; print(gwtestpkg.VALUE)" && node -e "console.log(require('gwtestnpm').value)"`;

/** A wheel, a PEP 503 simple index, an npm tarball and its packument, under `dir`. */
function makeRegistries(dir: string): void {
  makePypiIndex(dir);

  const js = join(dir, "build-npm", "package");
  mkdirSync(js, { recursive: true });
  writeFileSync(join(js, "package.json"), JSON.stringify({ name: "gwtestnpm", version: "1.0.0", main: "index.js" }));
  writeFileSync(join(js, "index.js"), 'module.exports = { value: "npm package from the test registry" };\n');
  mkdirSync(join(dir, "npm", "-"), { recursive: true });
  const tgz = join(dir, "npm", "-", "gwtestnpm-1.0.0.tgz");
  const tar = Bun.spawnSync(["tar", "czf", tgz, "-C", join(dir, "build-npm"), "package"], { stderr: "pipe" });
  if (tar.exitCode !== 0) throw new Error(`making the npm tarball: ${tar.stderr}`);
  const bytes = readFileSync(tgz);
  const packument = {
    name: "gwtestnpm",
    "dist-tags": { latest: "1.0.0" },
    versions: {
      "1.0.0": {
        name: "gwtestnpm",
        version: "1.0.0",
        main: "index.js",
        dist: { tarball: "http://registry.test/npm/-/gwtestnpm-1.0.0.tgz", shasum: createHash("sha1").update(bytes).digest("hex"), integrity: `sha512-${createHash("sha512").update(bytes).digest("base64")}` },
      },
    },
  };
  writeFileSync(join(dir, "npm", "gwtestnpm"), JSON.stringify(packument));
}

beforeAll(async () => {
  requireBubblewrap();
  files = mkdtempSync(join(tmpdir(), "gw-registries-"));
  makeRegistries(files);
  th = await startTestHosts({ "registry.test": 0, "allowed.test": 1, "elsewhere.test": 2 }, files);
  mock = await startModel();
  mock.on({ userMessage: "use the packages", hasToolResult: false }, { toolCalls: [{ name: "bash", arguments: JSON.stringify({ command: IMPORT_BOTH }) }] } as never);
  mock.on({ userMessage: "use the packages", hasToolResult: true }, { content: "both imported" } as never);
  const probe = `curl -s -m 5 http://allowed.test/; echo; curl -s -m 5 http://${th.hosts[2]}/ || echo "address refused"; curl -s -m 5 http://elsewhere.test/ || echo "name refused"`;
  mock.on({ userMessage: "probe the network", hasToolResult: false }, { toolCalls: [{ name: "bash", arguments: JSON.stringify({ command: probe }) }] } as never);
  mock.on({ userMessage: "probe the network", hasToolResult: true }, { content: "probed" } as never);
  mock.on({ userMessage: "touch marker", hasToolResult: false }, { toolCalls: [{ name: "bash", arguments: JSON.stringify({ command: "true" }) }] } as never);
  svc = await startTestService({
    ...modelEnv(mock),
    EGRESS_ALLOW_CIDRS: `127.0.0.0/8,${th.block}`,
    SANDBOX_DNS_SERVERS: th.dns.server,
    AGENT_PACKAGE_REGISTRIES: "pip=http://registry.test/simple/,npm=http://registry.test/npm/",
    AGENT_RECOVERY_INTERVAL_MS: "100",
  });
  client = sdk(svc, (await svc.key(await svc.org())).key);
}, 240_000);

afterAll(async () => {
  if (svc) {
    await destroyAll(svc);
    await svc.close();
  }
  await mock?.stop();
  await th?.close();
  if (files) rmSync(files, { recursive: true, force: true });
});

async function runSession(config: Record<string, unknown>, text: string) {
  const env = await client.beta.environments.create({ name: "net", config: config as never });
  const agent = await client.beta.agents.create({ name: "installer", model: "claude-sonnet-4-5", tools: [{ type: "agent_toolset_20260401" }] });
  const session = await client.beta.sessions.create({ agent: agent.id, environment_id: env.id, initial_events: [{ type: "user.message", content: [{ type: "text", text }] }] });
  return waitIdle(client, session.id, 180_000);
}

describe("environment packages from the operator's registries", () => {
  test("a pip and an npm package install at the sandbox's start (the log in the session's events); the agent then imports both", async () => {
    const events = await runSession({ type: "cloud", networking: { type: "limited", allowed_hosts: [], allow_package_managers: true }, packages: { pip: ["gwtestpkg"], npm: ["gwtestnpm"] } }, "use the packages");
    expect(types(events)).toEqual(["user.message", "session.status_running", "agent.tool_use", "session.packages_installed", "agent.tool_result", "agent.message", "session.status_idle"]);
    const installed = events[3];
    expect(installed.log.map((l: { manager: string; package: string; exit_code: number }) => [l.manager, l.package, l.exit_code])).toEqual([
      ["pip", "gwtestpkg", 0],
      ["npm", "gwtestnpm", 0],
    ]);
    expect(installed.log[0].output).toContain("Successfully installed gwtestpkg-1.0.0");
    expect(events[4]).toMatchObject({ is_error: false, content: [{ type: "text", text: "pip package from the test registry\nnpm package from the test registry\n" }] });
  });

  test("without allow_package_managers the registry is out of reach: a session.error names the package and why", async () => {
    const events = await runSession({ type: "cloud", networking: { type: "limited", allowed_hosts: [] }, packages: { pip: ["gwtestpkg"] } }, "touch marker");
    expect(types(events)).toEqual(["user.message", "session.status_running", "agent.tool_use", "session.error", "session.status_idle"]);
    expect(events[3].error.message).toStartWith("installing environment packages failed: pip package 'gwtestpkg' failed to install");
  });

  test("apt packages on a template of the host's /usr: a clear session.error", async () => {
    const events = await runSession({ type: "cloud", networking: { type: "unrestricted" }, packages: { apt: ["cowsay"] } }, "touch marker");
    expect(events[3].type).toBe("session.error");
    expect(events[3].error.message).toContain("apt packages (cowsay) need an image template");
  });
});

test("a limited environment reaches its allowed hosts and nothing else", async () => {
  const events = await runSession({ type: "cloud", networking: { type: "limited", allowed_hosts: ["allowed.test"] } }, "probe the network");
  const result = events.find((e) => e.type === "agent.tool_result");
  const text = result.content[0].text as string;
  expect(text).toContain("hello from allowed.test:80");
  expect(text).toContain("address refused");
  expect(text).toContain("name refused");
  expect(th.dns.asked).not.toContain("elsewhere.test");
});

test("allowed_hosts entries are checked when the environment is saved", async () => {
  const err = await client.beta.environments.create({ name: "bad", config: { type: "cloud", networking: { type: "limited", allowed_hosts: ["not a host"] } } as never }).catch((e) => e);
  expect(err.status).toBe(400);
  expect(err.error.error.message).toContain("config.networking.allowed_hosts: 'not a host' is not an IP address, a CIDR block or a domain name");
});
