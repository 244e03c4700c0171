import { existsSync, readFileSync } from "node:fs";
import { Type } from "@sinclair/typebox";
import { ConfigError, readSettings, type Settings } from "./settings";
import { sectionProblem } from "./settings/config-section";

export { ConfigError, type LogLevel } from "./settings";

/**
 * Everything a deployment can set. Environment variables are the source of truth
 * (src/settings); an optional JSON config file (CONFIG_FILE) describes providers and model
 * routes, which are too structured for environment variables.
 */
export interface Config extends Settings {
  /** Parsed CONFIG_FILE contents ({} when none). Sections are owned by the modules that read them. */
  file: ConfigFile;
  /**
   * The raw environment, handed to provider plugins only: a plugin reads its own variables
   * (OPENAI_API_KEY, ...) through its `fromEnv`. The service's modules use the typed settings.
   */
  env: Record<string, string | undefined>;
}

export interface ConfigFile {
  /** Provider instances: name -> { plugin, ...plugin config }. */
  providers?: Record<string, { plugin?: string } & Record<string, unknown>>;
  [section: string]: unknown;
}

/**
 * The sections of CONFIG_FILE, each checked by the module that owns it. A key that is not
 * one of them (`"provders"`) stops start-up naming the closest: otherwise the service
 * would start as if that part of the file were not there.
 */
const CONFIG_SECTIONS = ["providers", "routes", "gateway", "catalog", "generation", "sandboxes"] as const;
const TopLevel = Type.Object(Object.fromEntries(CONFIG_SECTIONS.map((s) => [s, Type.Optional(Type.Unknown())])), { additionalProperties: false });

export function loadConfig(env: Record<string, string | undefined> = process.env): Config {
  const settings = readSettings(env);
  return { ...settings, file: settings.configFilePath ? readConfigFile(settings.configFilePath) : {}, env };
}

function readConfigFile(path: string): ConfigFile {
  if (!existsSync(path)) throw new ConfigError(`CONFIG_FILE ${path} does not exist`);
  let file: ConfigFile;
  try {
    const parsed = JSON.parse(readFileSync(path, "utf8"));
    if (!parsed || typeof parsed !== "object" || Array.isArray(parsed)) throw new Error("top level must be an object");
    file = parsed;
  } catch (e) {
    throw new ConfigError(`CONFIG_FILE ${path} is not valid JSON: ${(e as Error).message}`);
  }
  const problem = sectionProblem(TopLevel, file, `CONFIG_FILE ${path}`);
  if (problem) throw new ConfigError(problem);
  return file;
}
