import { type Static, type TSchema, Type } from "@sinclair/typebox";
import type { Logger } from "../log";

/**
 * The contract between the service and a provider plugin: one module per upstream
 * model vendor or sandbox backend. A module default-exports either a definition or a
 * function that receives `PluginApi` and returns one. The function form lets plugins
 * loaded from PLUGINS_DIR build TypeBox schemas without importing anything, which
 * matters for the compiled binary (there is no node_modules beside it).
 */
export type PluginKind = "model" | "sandbox";

export interface PluginContext {
  /** Name of this configured instance (e.g. "openai", "groq"). */
  instanceName: string;
  log: Logger;
  dataDir: string;
  env: Record<string, string | undefined>;
}

export interface PluginDefinition<S extends TSchema = TSchema, I = unknown> {
  kind: PluginKind;
  /** Unique plugin name; also the default instance name. Lowercase letters, digits, '-' and '_'. */
  name: string;
  description?: string;
  /**
   * What the plugin serves. Model vendors: the wire protocols they speak natively
   * ("chat", "messages", "responses", "generateContent", "interactions", ...).
   * Sandbox backends: the capabilities they offer.
   */
  serves: string[];
  /** Validates the plugin's configuration (config file entry or `fromEnv` result). */
  configSchema: S;
  /** Zero-configuration instance from environment variables, or undefined when not enabled. */
  fromEnv?(env: Record<string, string | undefined>): Static<S> | undefined;
  create(config: Static<S>, ctx: PluginContext): I | Promise<I>;
}

export interface PluginApi {
  Type: typeof Type;
}

export type PluginModule = PluginDefinition | ((api: PluginApi) => PluginDefinition);

/** Identity helper that gives plugin authors type checking. */
export function definePlugin<S extends TSchema, I>(def: PluginDefinition<S, I>): PluginDefinition<S, I> {
  return def;
}

/** The shape every definition must have; checked at load time so a broken plugin names its field. */
export const PluginDefinitionSchema = Type.Object({
  kind: Type.Union([Type.Literal("model"), Type.Literal("sandbox")]),
  name: Type.String({ pattern: "^[a-z0-9][a-z0-9_-]{0,62}$" }),
  description: Type.Optional(Type.String()),
  serves: Type.Array(Type.String()),
  configSchema: Type.Object({}, { additionalProperties: true }),
  fromEnv: Type.Optional(Type.Function([], Type.Any())),
  create: Type.Function([], Type.Any()),
});
