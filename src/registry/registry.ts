import { readdirSync } from "node:fs";
import { join } from "node:path";
import { Value } from "@sinclair/typebox/value";
import type { ConfigFile } from "../config";
import { PROTOCOLS } from "../gateway/protocols";
import type { ModelProvider } from "../gateway/provider";
import type { Logger } from "../log";
import { closestKey, sectionProblem } from "../settings/config-section";
import { CAPABILITY_METHODS, SANDBOX_CAPABILITIES, type SandboxBackend } from "../sandboxes/backend";
import { type ModelPluginDefinition, type PluginContext, type PluginDefinition, PluginDefinitionSchema, type PluginKind, type SandboxPluginDefinition } from "./plugin";

export class PluginError extends Error {}

export interface LoadedPlugin<D extends PluginDefinition = PluginDefinition> {
  definition: D;
  /** "builtin:<name>" or the file it was loaded from. */
  source: string;
}

interface InstanceBase {
  /** Instance name, used in routes and `<provider>/<model>` prefixes. */
  name: string;
}
export interface ModelInstance extends InstanceBase {
  kind: "model";
  plugin: LoadedPlugin<ModelPluginDefinition>;
  instance: ModelProvider;
}
export interface SandboxInstance extends InstanceBase {
  kind: "sandbox";
  plugin: LoadedPlugin<SandboxPluginDefinition>;
  instance: SandboxBackend;
}
/** A configured instance of a plugin; `kind` tells which contract `instance` implements. */
export type ProviderInstance = ModelInstance | SandboxInstance;
export type InstanceOf<K extends PluginKind> = Extract<ProviderInstance, { kind: K }>;

/** What a plugin module may default-export: a definition, or a function of the plugin API returning one. */
export type LoadableModule<A> = PluginDefinition | ((api: A) => PluginDefinition);

export interface RegistryOptions<A = unknown> {
  builtins: LoadableModule<A>[];
  /** Handed to plugin modules that default-export a function (src/plugin-api.ts). */
  api: A;
  pluginsDir?: string;
  providers?: ConfigFile["providers"];
  env: Record<string, string | undefined>;
  dataDir: string;
  log: Logger;
  /**
   * A service worker beside a sandbox-node process (src/workers): node-local sandbox
   * backends get no instance here; their sandboxes are the node's, reached by forwarding.
   */
  nodeLocalElsewhere?: boolean;
}

/**
 * Loads provider plugins at start-up: the built-ins from providers/, then every .ts/.js
 * module in PLUGINS_DIR, then creates the configured instances. Anything invalid stops
 * start-up with an error naming the file (or config entry) and the field.
 */
export class Registry {
  private readonly plugins = new Map<string, LoadedPlugin>();
  private readonly instances = new Map<string, ProviderInstance>();

  static async load<A>(opts: RegistryOptions<A>): Promise<Registry> {
    const registry = new Registry();
    for (const mod of opts.builtins) registry.addPlugin(mod, opts.api, `builtin:${typeof mod === "function" ? "fn" : mod.name}`);
    if (opts.pluginsDir) {
      for (const file of pluginFiles(opts.pluginsDir)) {
        let mod: { default?: unknown };
        try {
          mod = await import(file);
        } catch (e) {
          throw new PluginError(`plugin ${file} failed to load: ${e instanceof Error ? e.message : String(e)}`);
        }
        if (!mod.default) throw new PluginError(`plugin ${file} has no default export; export a plugin definition`);
        registry.addPlugin(mod.default, opts.api, file);
      }
    }
    await registry.createInstances(opts);
    return registry;
  }

  /** Threat: a module from PLUGINS_DIR may export anything; only a value matching the definition schema gets in. */
  addPlugin<A>(mod: unknown, api: A, source: string): LoadedPlugin {
    const definition: unknown = typeof mod === "function" ? mod(api) : mod;
    if (!isDefinition(definition)) {
      throw new PluginError(sectionProblem(PluginDefinitionSchema, definition, `plugin ${source}`, { strict: false }) ?? `plugin ${source}: not a plugin definition`);
    }
    const known: readonly string[] = definition.kind === "model" ? PROTOCOLS : SANDBOX_CAPABILITIES;
    const unknownServes = definition.serves.filter((s) => !known.includes(s));
    if (unknownServes.length) {
      throw new PluginError(`plugin ${source}: field "serves": unknown ${definition.kind === "model" ? "protocol" : "capability"} ${unknownServes.join(", ")} (known: ${known.join(", ")})`);
    }
    const existing = this.plugins.get(definition.name);
    if (existing) throw new PluginError(`plugin ${source}: name "${definition.name}" is already taken by ${existing.source}`);
    const loaded = { definition, source };
    this.plugins.set(definition.name, loaded);
    return loaded;
  }

  /** Instance names of node-local sandbox backends left to the node process (RegistryOptions.nodeLocalElsewhere). */
  readonly heldByNode = new Set<string>();

  private async createInstances(opts: Pick<RegistryOptions, "providers" | "env" | "dataDir" | "log" | "nodeLocalElsewhere">): Promise<void> {
    const configured = opts.providers ?? {};
    // `fromFile`: written by the operator, so checked strictly (an unknown key is a typo); a plugin's fromEnv answer is its own.
    const wanted: { name: string; pluginName: string; config: unknown; origin: string; fromFile: boolean }[] = [];
    for (const [name, entry] of Object.entries(configured)) {
      const { plugin = name, ...config } = entry ?? {};
      wanted.push({ name, pluginName: String(plugin), config, origin: `CONFIG_FILE providers.${name}`, fromFile: true });
    }
    // Zero configuration: a plugin enabled by its environment variables gets an instance
    // under its own name unless the config file already defines one by that name.
    for (const { definition } of this.plugins.values()) {
      if (Object.hasOwn(configured, definition.name) || !definition.fromEnv) continue;
      const config = definition.fromEnv(opts.env);
      if (config !== undefined) wanted.push({ name: definition.name, pluginName: definition.name, config, origin: `environment of plugin ${definition.name}`, fromFile: false });
    }
    for (const w of wanted) {
      const plugin = this.plugins.get(w.pluginName);
      if (!plugin) {
        const known = [...this.plugins.keys()];
        const near = closestKey(w.pluginName, known);
        throw new PluginError(`${w.origin}: unknown plugin "${w.pluginName}"${near ? ` (did you mean "${near}"?)` : ""}; known: ${known.join(", ") || "none"}`);
      }
      // Threat: a second process running a node-local backend on the same DATA_DIR would
      // sweep the node's sandboxes as leftovers (they are not its own): it never gets one.
      if (opts.nodeLocalElsewhere && plugin.definition.kind === "sandbox" && plugin.definition.nodeLocal) {
        this.heldByNode.add(w.name);
        continue;
      }
      // Defaults first, so an omitted optional setting is not reported as missing.
      const config = Value.Default(plugin.definition.configSchema, structuredClone(w.config));
      const problem = sectionProblem(plugin.definition.configSchema, config, `${w.origin} (plugin ${plugin.source})`, { strict: w.fromFile });
      if (problem) throw new PluginError(problem);
      const ctx: PluginContext = { instanceName: w.name, log: opts.log.child({ provider: w.name }), dataDir: opts.dataDir, env: opts.env };
      this.instances.set(w.name, await instantiate(w.name, plugin, config, ctx));
      opts.log.info("provider ready", { provider: w.name, plugin: plugin.definition.name, kind: plugin.definition.kind });
    }
  }

  plugin(name: string): LoadedPlugin | undefined {
    return this.plugins.get(name);
  }

  listPlugins(kind?: PluginKind): LoadedPlugin[] {
    return [...this.plugins.values()].filter((p) => !kind || p.definition.kind === kind);
  }

  instance<K extends PluginKind>(name: string, kind: K): InstanceOf<K> | undefined {
    const inst = this.instances.get(name);
    return inst && isKind(inst, kind) ? inst : undefined;
  }

  instancesOf<K extends PluginKind>(kind: K): InstanceOf<K>[] {
    const out: InstanceOf<K>[] = [];
    for (const inst of this.instances.values()) if (isKind(inst, kind)) out.push(inst);
    return out;
  }
}

function isKind<K extends PluginKind>(inst: ProviderInstance, kind: K): inst is InstanceOf<K> {
  return inst.kind === kind;
}

function isDefinition(v: unknown): v is PluginDefinition {
  return Value.Check(PluginDefinitionSchema, v);
}

/**
 * Creates one instance and checks what it returned against its kind's contract. Threat:
 * a plugin from PLUGINS_DIR returning the wrong thing would otherwise fail on the first
 * request (or the first sandbox command) instead of at start-up.
 */
async function instantiate(name: string, plugin: LoadedPlugin, config: unknown, ctx: PluginContext): Promise<ProviderInstance> {
  const def = plugin.definition;
  const where = `provider ${name} (plugin ${plugin.source})`;
  if (def.kind === "model") {
    const instance = await def.create(config, ctx);
    if (typeof instance?.send !== "function" || typeof instance.vendor !== "string" || !Array.isArray(instance.models)) {
      throw new PluginError(`${where}: create() must return a model provider with vendor, models and send()`);
    }
    return { kind: "model", name, plugin: { definition: def, source: plugin.source }, instance };
  }
  const instance = await def.create(config, ctx);
  for (const method of ["templateProblem", "create", "destroy", "liveness"]) {
    if (typeof Reflect.get(instance ?? {}, method) !== "function") throw new PluginError(`${where}: create() must return a sandbox backend; ${method}() is missing`);
  }
  for (const capability of def.serves) {
    const missing = CAPABILITY_METHODS[capability].filter((m) => typeof Reflect.get(instance, m) !== "function");
    if (missing.length) throw new PluginError(`${where}: serves "${capability}" but does not implement ${missing.map((m) => `${m}()`).join(", ")}`);
  }
  return { kind: "sandbox", name, plugin: { definition: def, source: plugin.source }, instance };
}

function pluginFiles(dir: string): string[] {
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch (e) {
    throw new PluginError(`PLUGINS_DIR ${dir} cannot be read: ${e instanceof Error ? e.message : String(e)}`);
  }
  return names
    .filter((n) => /\.(ts|js|mjs)$/.test(n) && !n.endsWith(".d.ts") && !n.startsWith("."))
    .sort()
    .map((n) => join(dir, n));
}
