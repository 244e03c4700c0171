import { expect, test } from "bun:test";
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Type } from "@sinclair/typebox";
import { buildCatalog } from "../../src/catalog";
import { parseCatalogConfig } from "../../src/catalog/config";
import { gatewayConfig } from "../../src/gateway/config";
import { GenerationPricing } from "../../src/generation/pricing";
import { loadTemplates } from "../../src/sandboxes/templates";
import { startTestService } from "../helpers/service";
import { ConfigError, loadConfig } from "../../src/config";
import { readSettings, SETTINGS, variableNames } from "../../src/settings";
import { sectionProblem } from "../../src/settings/config-section";
import { CONFIG_DOC, configurationTable, withGeneratedTable } from "../../src/settings/reference-table";
import { Variable } from "../../src/settings/variable";

const refusal = (env: Record<string, string>): string => {
  try {
    readSettings(env);
  } catch (e) {
    expect(e).toBeInstanceOf(ConfigError);
    return (e as Error).message;
  }
  throw new Error(`accepted ${JSON.stringify(env)}`);
};

test("integer settings: unset or blank means the default; anything else must be an integer in range", () => {
  expect(readSettings({}).port).toBe(8080);
  expect(readSettings({ PORT: "" }).port).toBe(8080);
  expect(readSettings({ PORT: "  " }).port).toBe(8080);
  expect(readSettings({ PORT: " 42 " }).port).toBe(42);
  expect(readSettings({ PORT: "0" }).port).toBe(0);
  expect(readSettings({ KEY_CACHE_RESYNC_MS: "12" }).keyCache.resyncMs).toBe(12);
  for (const bad of ["-1", "1.5", "ten", "1e400", "4 2", "65536"]) expect(refusal({ PORT: bad })).toStartWith("PORT must be an integer from 0 to 65535");
  expect(refusal({ KEY_CACHE_RESYNC_MS: "5" })).toBe('KEY_CACHE_RESYNC_MS must be an integer >= 10 (got "5")');
  expect(refusal({ RATE_LIMIT_RPM: "-1" })).toBe('RATE_LIMIT_RPM must be a non-negative integer (got "-1")');
});

test("yes/no settings: the usual spellings in any case, blank means the default, anything else is refused by name", () => {
  for (const yes of ["1", "true", "TRUE", " yes ", "on"]) expect(readSettings({ PGLITE_THREAD: yes }).pgliteThread).toBe(true);
  for (const no of ["0", "false", "No", "off"]) expect(readSettings({ BOOTSTRAP: no }).bootstrap).toBe(false);
  expect(readSettings({}).bootstrap).toBe(true);
  expect(readSettings({ PGLITE_THREAD: " " }).pgliteThread).toBe(false);
  expect(refusal({ KEY_CACHE_LISTEN: "ture" })).toBe('KEY_CACHE_LISTEN must be true or false (got "ture")');
  expect(() => loadConfig({ BOOTSTRAP: "nope" })).toThrow(/^BOOTSTRAP must be true or false/);
  // GATEWAY_ALLOCATOR_TUNING=off was the documented way to turn the step off; typos no longer mean "on".
  expect(readSettings({ GATEWAY_ALLOCATOR_TUNING: "off" }).allocator.tuning).toBe(false);
  expect(refusal({ GATEWAY_ALLOCATOR_TUNING: "of" })).toStartWith("GATEWAY_ALLOCATOR_TUNING must be true or false");
});

test("paths, URLs, durations and lists: parsed once, refused by name with what would be accepted", () => {
  // A URL is not a directory: refused by name rather than made into a directory "memory:".
  for (const url of ["memory://", "file:///var/lib/gateway"]) expect(() => loadConfig({ DATA_DIR: url })).toThrow(/^DATA_DIR must be a directory path/);
  expect(loadConfig({ DATA_DIR: "/tmp/gw-data" }).dataDir).toBe("/tmp/gw-data");
  expect(refusal({ LOG_LEVEL: "verbose" })).toBe('LOG_LEVEL must be one of debug, info, warn, error, silent (got "verbose")');
  expect(readSettings({ LOG_LEVEL: "WARN" }).logLevel).toBe("warn");
  // The password of a mistyped URL stays out of the message.
  expect(refusal({ DATABASE_URL: "mysql://root:hunter2@db:3306/x" })).toBe('DATABASE_URL must be a postgres:// URL; unset it to use the embedded database (got "db:3306/x")');
  expect(refusal({ REDIS_URL: "127.0.0.1:6379" })).toStartWith("REDIS_URL must be a redis:// or rediss:// URL");
  expect(refusal({ OPENAI_BASE_URL: "api.openai.com/v1" })).toStartWith("OPENAI_BASE_URL must be an http:// or https:// URL");
  expect(refusal({ SANDBOX_LOCAL: "no" })).toStartWith("SANDBOX_LOCAL must be one of on, off, without-cgroups");
  expect(refusal({ SANDBOX_LOCAL: "OFF" })).toStartWith("SANDBOX_LOCAL must be one of");
  for (const url of ["redis://127.0.0.1:6379", "rediss://u:p@cache:6380/1", "valkey://cache", "redis+unix:///run/redis.sock"]) expect(readSettings({ REDIS_URL: url }).redisUrl).toBe(url);
  expect(refusal({ GENERATION_TIMEOUT: "soon" })).toStartWith("GENERATION_TIMEOUT must be a positive duration such as 500ms, 5s, 5m or 2h");
  expect(refusal({ GENERATION_LEASE: "1s" })).toStartWith("GENERATION_LEASE must be a duration of at least 2s");
  expect(refusal({ EVENTS_RETRY_SCHEDULE: "5s,often" })).toBe('EVENTS_RETRY_SCHEDULE must be a comma-separated list of durations such as 5s,5m,2h (got "5s,often"; "often" is not a duration)');
  expect(refusal({ EGRESS_ALLOW_CIDRS: "10.0.0.0/33" })).toMatch(/^EGRESS_ALLOW_CIDRS must be a comma-separated list of address blocks .*invalid CIDR "10.0.0.0\/33"/);
  expect(refusal({ PUBLIC_URL: "https://gw.example.com/base" })).toStartWith("PUBLIC_URL must be an origin like https://gateway.example.com");
  expect(readSettings({ PUBLIC_URL: "https://gw.example.com/" }).publicUrl).toBe("https://gw.example.com");
  expect(readSettings({ EGRESS_ALLOW_CIDRS: "10.0.0.0/8, fd00::/8" }).egress.allow.map((c) => c.text)).toEqual(["10.0.0.0/8", "fd00::/8"]);
  // The sync wait stays under the HTTP server's idle timeout whatever is asked.
  expect(readSettings({ GENERATION_SYNC_WAIT: "1h" }).generation.syncWaitMs).toBe(250_000);
});

test("the defaults", () => {
  const s = readSettings({});
  expect([s.generation.timeoutMs, s.generation.workers, s.generation.leaseMs, s.generation.retentionMs, s.generation.syncWaitMs]).toEqual([900_000, 8, 300_000, 720 * 3_600_000, 240_000]);
  expect(s.generation.callbackRetryMs).toEqual([5_000, 300_000, 1_800_000, 7_200_000, 18_000_000, 36_000_000, 36_000_000]);
  expect(s.events.retryScheduleMs).toEqual(s.generation.callbackRetryMs);
  expect(s.deployments).toEqual({ pollMs: 1000, pauseAfterFailures: 1 });
  expect(s.agents).toEqual({ leaseMs: 30_000, recoveryMs: 1_000, maxSteps: 50, sandboxIdleMs: 300_000, sandboxTimeoutSec: 3600, streamRecheckMs: 30_000, streamsPerKey: 100, streamsPerOrg: 500, packageRegistries: {}, packageHosts: [] });
  expect([s.sandboxes.network, s.sandboxes.domain]).toEqual(["none", undefined]);
  expect([s.corsOrigins, s.egress.allow, s.events.secretsKey, s.databaseUrl, s.allocator.purgeDelay]).toEqual(["*", [], undefined, undefined, undefined]);
  expect([s.limits, s.metering.flushMs, s.sandboxes.reaperIntervalMs]).toEqual([{ globalRpm: 0, redisKeyPrefix: "gateway:" }, 1000, 1000]);
});

test("every checked variable refuses a value it cannot use, naming itself and what it accepts; secrets are never echoed", () => {
  const vars: Variable<unknown>[] = [];
  const walk = (tree: object) => Object.values(tree).forEach((n) => (n instanceof Variable ? vars.push(n) : walk(n)));
  walk(SETTINGS);
  const free = new Set(["a text", "a path"]);
  const checked = vars.filter((v) => !free.has(v.accepts));
  // Free-form ones: a host name, a token, a key prefix, a path.
  expect(vars.filter((v) => free.has(v.accepts)).map((v) => v.name).sort()).toEqual(
    [
      ...["ADMIN_TOKEN", "ANTHROPIC_API_KEY", "CLAUDE_CODE_BIN", "CONFIG_FILE", "E2B_API_KEY", "E2B_DOMAIN", "GEMINI_API_KEY", "HOST", "MEDIA_DIR", "OPENAI_API_KEY", "PLUGINS_DIR", "REDIS_KEY_PREFIX"],
      ...["METRICS_HOST", "METRICS_TOKEN", "OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_TRACES_HEADERS", "OTEL_SERVICE_NAME", "OTEL_TRACES_EXPORTER"],
      ...["MISTRAL", "DEEPSEEK", "XAI", "GROQ", "CEREBRAS", "PERPLEXITY", "TOGETHER", "FIREWORKS", "OPENROUTER"].map((vendor) => `${vendor}_API_KEY`),
      ...["AZURE_OPENAI_API_KEY", "AZURE_OPENAI_AD_TOKEN", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "GOOGLE_APPLICATION_CREDENTIALS", "VERTEX_ACCESS_TOKEN"],
    ].sort(),
  );
  const bad = "memory://x y";
  for (const v of checked) {
    const message = refusal({ [v.name]: bad });
    expect(message).toStartWith(`${v.name} must be ${v.accepts}`);
    if (v.name === "SECRETS_KEY") expect(message).not.toContain("memory");
    else expect(message).toContain(`(got "${bad}`);
  }
  expect(refusal({ SECRETS_KEY: "ab".repeat(31) })).toBe("SECRETS_KEY must be 32 bytes as 64 hex characters or base64 (e.g. `openssl rand -hex 32`)");
});

test("docs/configuration.md's table is exactly the one generated from the settings module", () => {
  const doc = readFileSync(join(import.meta.dir, "../..", CONFIG_DOC), "utf8");
  // Every variable the settings module reads has a row, and only those (configurationTable throws otherwise).
  const listed = [...configurationTable().matchAll(/^\| `([A-Z][A-Z0-9_]+)`/gm)].map((m) => m[1]);
  expect(listed.sort()).toEqual(variableNames().sort());
  // The file is what `npm run docs:config` writes: a hand edit of the table, or a setting added without regenerating it, fails here.
  expect(doc).toBe(withGeneratedTable(doc));
});

test("one wording for every structured section: where, the field, and what would be accepted", () => {
  const schema = Type.Object({ mode: Type.Union([Type.Literal("a"), Type.Literal("b")]), n: Type.Optional(Type.Integer({ minimum: 1 })) }, { additionalProperties: false });
  expect(sectionProblem(schema, { mode: "a" }, "CONFIG_FILE x")).toBeUndefined();
  expect(sectionProblem(schema, { mode: "c" }, "CONFIG_FILE x")).toBe('CONFIG_FILE x: field "mode": must be one of "a", "b"');
  expect(sectionProblem(schema, { mode: "a", n: 0 }, "CONFIG_FILE x")).toBe('CONFIG_FILE x: field "n": Expected integer to be greater or equal to 1');
  // Unknown keys are refused with what is known there, and the closest key when one is near.
  expect(sectionProblem(schema, { mode: "a", extra: 1 }, "CONFIG_FILE x")).toBe('CONFIG_FILE x: field "extra": unknown setting; known here: mode, n');
  expect(sectionProblem(schema, { Mode: "a" }, "CONFIG_FILE x")).toBe('CONFIG_FILE x: field "Mode": unknown setting (did you mean "mode"?); known here: mode, n');
  // Also where the schema leaves additionalProperties unsaid (plugin settings); not for values that are not configuration.
  const open = Type.Object({ baseURL: Type.String() });
  expect(sectionProblem(open, { baseURL: "x", baseUrl: "y" }, "p")).toBe('p: field "baseUrl": unknown setting (did you mean "baseURL"?); known here: baseURL');
  expect(sectionProblem(open, { baseURL: "x", baseUrl: "y" }, "p", { strict: false })).toBeUndefined();
  expect(sectionProblem(schema, 5, "CONFIG_FILE x")).toBe('CONFIG_FILE x: field "(root)": Expected object');
});

test("a bad CONFIG_FILE section is refused with the same wording in every domain", () => {
  const cases: [() => unknown, string][] = [
    [() => gatewayConfig({ gateway: { timeoutMs: "soon" } }), 'CONFIG_FILE gateway: field "timeoutMs": Expected integer'],
    [() => gatewayConfig({ routes: { m: [{ model: "x" }] } }), 'CONFIG_FILE routes: field "m.0.provider": Expected required property'],
    [() => parseCatalogConfig({ models: { m: { kind: "robot" } } }), 'CONFIG_FILE catalog: field "models.m.kind": must be one of'],
    [() => loadTemplates({ sandboxes: { templates: { t: { backend: "local", memoryMB: 1 } } } }), 'CONFIG_FILE sandboxes.templates.t: field "memoryMB": Expected integer to be greater or equal to'],
    [() => new GenerationPricing(buildCatalog({}, []), { prices: { m: { type: "text" } } }), 'CONFIG_FILE generation: field "prices.m.type": must be one of "image", "audio", "video"'],
  ];
  for (const [f, message] of cases) {
    expect(f).toThrow(ConfigError);
    expect(f).toThrow(message);
  }
});

test("a test service that fails to start leaves no data directory or database behind", async () => {
  // A temporary directory of this test's own: other suites on the machine create and remove
  // theirs in the shared one at the same time.
  const own = mkdtempSync(join(tmpdir(), "gw-settings-"));
  const saved = process.env.TMPDIR;
  process.env.TMPDIR = own;
  try {
    await expect(startTestService({ PORT: "eighty" })).rejects.toThrow(/^PORT must be/);
    expect(readdirSync(own)).toEqual([]);
  } finally {
    if (saved === undefined) delete process.env.TMPDIR;
    else process.env.TMPDIR = saved;
    rmSync(own, { recursive: true, force: true });
  }
}, 120_000);
