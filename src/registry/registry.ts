import { readdirSync } from "node:fs";
import { join } from "node:path";
import { Type } from "@sinclair/typebox";
import { Value } from "@sinclair/typebox/value";
import type { ConfigFile } from "../config";
import type { Logger } from "../log";
import { sectionProblem } from "../settings/config-section";
import { type PluginContext, type PluginDefinition, PluginDefinitionSchema, type PluginKind, type PluginModule } from "./plugin";

export class PluginError extends Error {}

export interface LoadedPlugin {
  definition: PluginDefinition;
  /** "builtin:<name>" or the file it was loaded from. */
  source: string;
}

export interface ProviderInstance<I = unknown> {
  /** Instance name, used in routes and `<provider>/<model>` prefixes. */
  name: string;
  plugin: LoadedPlugin;
  instance: I;
}

export interface RegistryOptions {
  builtins: PluginModule[];
  pluginsDir?: string;
  providers?: ConfigFile["providers"];
  env: Record<string, string | undefined>;
  dataDir: string;
  log: Logger;
}

/**
 * Loads provider plugins at start-up: the built-ins from providers/, then every .ts/.js
 * module in PLUGINS_DIR, then creates the configured instances. Anything invalid stops
 * start-up with an error naming the file (or config entry) and the field.
 */
export class Registry {
  private readonly plugins = new Map<string, LoadedPlugin>();
  private readonly instances = new Map<string, ProviderInstance>();

  static async load(opts: RegistryOptions): Promise<Registry> {
    const registry = new Registry();
    for (const mod of opts.builtins) registry.addPlugin(mod, `builtin:${typeof mod === "function" ? "fn" : mod.name}`);
    if (opts.pluginsDir) {
      for (const file of pluginFiles(opts.pluginsDir)) {
        let mod: { default?: PluginModule };
        try {
          mod = await import(file);
        } catch (e) {
          throw new PluginError(`plugin ${file} failed to load: ${(e as Error).message}`);
        }
        if (!mod.default) throw new PluginError(`plugin ${file} has no default export; export a plugin definition`);
        registry.addPlugin(mod.default, file);
      }
    }
    await registry.createInstances(opts);
    return registry;
  }

  addPlugin(mod: PluginModule, source: string): LoadedPlugin {
    const definition = typeof mod === "function" ? mod({ Type }) : mod;
    const problem = sectionProblem(PluginDefinitionSchema, definition, `plugin ${source}`);
    if (problem) throw new PluginError(problem);
    const existing = this.plugins.get(definition.name);
    if (existing) throw new PluginError(`plugin ${source}: name "${definition.name}" is already taken by ${existing.source}`);
    const loaded = { definition, source };
    this.plugins.set(definition.name, loaded);
    return loaded;
  }

  private async createInstances(opts: RegistryOptions): Promise<void> {
    const configured = opts.providers ?? {};
    const wanted: { name: string; pluginName: string; config: unknown; origin: string }[] = [];
    for (const [name, entry] of Object.entries(configured)) {
      const { plugin = name, ...config } = entry ?? {};
      wanted.push({ name, pluginName: String(plugin), config, origin: `config file providers.${name}` });
    }
    // Zero configuration: a plugin enabled by its environment variables gets an instance
    // under its own name unless the config file already defines one by that name.
    for (const { definition } of this.plugins.values()) {
      if (configured[definition.name] || !definition.fromEnv) continue;
      const config = definition.fromEnv(opts.env);
      if (config !== undefined) wanted.push({ name: definition.name, pluginName: definition.name, config, origin: `environment of plugin ${definition.name}` });
    }
    for (const w of wanted) {
      const plugin = this.plugins.get(w.pluginName);
      if (!plugin) throw new PluginError(`${w.origin}: unknown plugin "${w.pluginName}" (known: ${[...this.plugins.keys()].join(", ") || "none"})`);
      // Defaults first, so an omitted optional setting is not reported as missing.
      const config = Value.Default(plugin.definition.configSchema, structuredClone(w.config));
      const problem = sectionProblem(plugin.definition.configSchema, config, `${w.origin} (plugin ${plugin.source})`);
      if (problem) throw new PluginError(problem);
      const ctx: PluginContext = { instanceName: w.name, log: opts.log.child({ provider: w.name }), dataDir: opts.dataDir, env: opts.env };
      const instance = await plugin.definition.create(config as never, ctx);
      this.instances.set(w.name, { name: w.name, plugin, instance });
      opts.log.info("provider ready", { provider: w.name, plugin: plugin.definition.name, kind: plugin.definition.kind });
    }
  }

  plugin(name: string): LoadedPlugin | undefined {
    return this.plugins.get(name);
  }

  listPlugins(kind?: PluginKind): LoadedPlugin[] {
    return [...this.plugins.values()].filter((p) => !kind || p.definition.kind === kind);
  }

  instance<I>(name: string): ProviderInstance<I> | undefined {
    return this.instances.get(name) as ProviderInstance<I> | undefined;
  }

  instancesOf<I>(kind: PluginKind): ProviderInstance<I>[] {
    return [...this.instances.values()].filter((i) => i.plugin.definition.kind === kind) as ProviderInstance<I>[];
  }
}

function pluginFiles(dir: string): string[] {
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch (e) {
    throw new PluginError(`PLUGINS_DIR ${dir} cannot be read: ${(e as Error).message}`);
  }
  return names
    .filter((n) => /\.(ts|js|mjs)$/.test(n) && !n.endsWith(".d.ts") && !n.startsWith("."))
    .sort()
    .map((n) => join(dir, n));
}
