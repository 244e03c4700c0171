import type { PluginModule } from "../src/registry/plugin";

/**
 * Built-in provider plugins, one module per upstream model vendor or sandbox backend.
 * Adding a vendor: write providers/<vendor>.ts and add one line here.
 */
export const builtinPlugins: PluginModule[] = [];
