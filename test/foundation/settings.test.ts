import { expect, test } from "bun:test";
import { readdirSync } from "node:fs";
import { tmpdir } from "node:os";
import { startTestService } from "../helpers/service";
import { boolSetting, ConfigError, intSetting, loadConfig } from "../../src/config";
import { schedulerOptions } from "../../src/deployments/scheduler";
import { deliverySettingsFromEnv } from "../../src/events/delivery";
import { generationSettings } from "../../src/generation/config";
import { globalLimitFrom } from "../../src/limits";

test("integer settings: unset or blank means the default; anything else must be an integer in range", () => {
  expect(intSetting({}, "X", 7)).toBe(7);
  expect(intSetting({ X: "" }, "X", 7)).toBe(7);
  expect(intSetting({ X: "  " }, "X", 7)).toBe(7);
  expect(intSetting({ X: " 42 " }, "X", 7)).toBe(42);
  expect(intSetting({ X: "0" }, "X", 7)).toBe(0);
  expect(intSetting({ X: "12" }, "X", 7, 10)).toBe(12);
  for (const bad of ["-1", "1.5", "ten", "1e400", "4 2"]) expect(() => intSetting({ X: bad }, "X", 7)).toThrow(ConfigError);
  expect(() => intSetting({ X: "5" }, "X", 7, 10)).toThrow('X must be an integer >= 10 (got "5")');
});

test("yes/no settings: the usual spellings in any case, blank means the default, anything else is refused by name", () => {
  for (const yes of ["1", "true", "TRUE", " yes ", "on"]) expect(boolSetting({ X: yes }, "X", false)).toBe(true);
  for (const no of ["0", "false", "No", "off"]) expect(boolSetting({ X: no }, "X", true)).toBe(false);
  expect(boolSetting({}, "X", true)).toBe(true);
  expect(boolSetting({ X: " " }, "X", false)).toBe(false);
  expect(() => boolSetting({ X: "ture" }, "X", false)).toThrow('X must be true or false (got "ture")');
  expect(loadConfig({}).pgliteThread).toBe(false);
  expect(loadConfig({ PGLITE_THREAD: "true" }).pgliteThread).toBe(true);
  expect(() => loadConfig({ BOOTSTRAP: "nope" })).toThrow(/^BOOTSTRAP must be true or false/);
  // A URL is not a directory: refused by name rather than made into a directory "memory:".
  for (const url of ["memory://", "file:///var/lib/gateway"]) expect(() => loadConfig({ DATA_DIR: url })).toThrow(/^DATA_DIR must be a directory path/);
  expect(loadConfig({ DATA_DIR: "/tmp/gw-data" }).dataDir).toBe("/tmp/gw-data");
});

test("every module's integer settings refuse bad values by name instead of falling back silently", () => {
  const cases: [string, () => unknown][] = [
    ["PORT", () => loadConfig({ PORT: "eighty" })],
    ["RATE_LIMIT_RPM", () => globalLimitFrom({ RATE_LIMIT_RPM: "-1" })],
    ["EVENTS_RECEIVER_CONCURRENCY", () => deliverySettingsFromEnv({ EVENTS_RECEIVER_CONCURRENCY: "0" })],
    ["GENERATION_WORKERS", () => generationSettings({ GENERATION_WORKERS: "many" })],
    ["DEPLOYMENT_SCHEDULER_POLL_MS", () => schedulerOptions({ DEPLOYMENT_SCHEDULER_POLL_MS: "5" })],
    ["DEPLOYMENT_PAUSE_AFTER_FAILURES", () => schedulerOptions({ DEPLOYMENT_PAUSE_AFTER_FAILURES: "0" })],
  ];
  for (const [name, f] of cases) {
    expect(f).toThrow(ConfigError);
    expect(f).toThrow(new RegExp(`^${name} must be`));
  }
  expect(schedulerOptions({})).toEqual({ pollMs: 1000, pauseAfter: 1 });
  expect(deliverySettingsFromEnv({ EVENTS_RECEIVER_CONCURRENCY: "4" }).perReceiver).toBe(4);
});

test("a test service that fails to start leaves no data directory or database behind", async () => {
  const ours = () => readdirSync(tmpdir()).filter((d) => d.startsWith("gw-test-")).sort();
  const before = ours();
  await expect(startTestService({ PORT: "eighty" })).rejects.toThrow(/^PORT must be/);
  expect(ours()).toEqual(before);
}, 60_000);
