/**
 * Example model plugin: an OpenAI-compatible chat API with a header of its own. It is written
 * as someone outside this repository writes a plugin: it imports only types, and only from the
 * public plugin surface (src/plugin-api.ts), so `npm run typecheck` checks it against that
 * surface, while at run time it needs no import at all (the compiled binary has no
 * node_modules beside it): its helpers arrive as the argument of its default export.
 *
 * Loaded at start-up from the default PLUGINS_DIR (./plugins); it does nothing until an
 * instance is configured, in CONFIG_FILE:
 *
 *   { "providers": { "acme": { "plugin": "example-vendor", "baseURL": "https://api.acme.example/v1",
 *                               "apiKey": "sk-...", "models": ["acme-large"], "team": "blue" } } }
 *
 * or with EXAMPLE_VENDOR_API_KEY in the environment (an instance named example-vendor).
 */
import type { PluginApi, UpstreamRequest } from "../src/plugin-api";

export default ({ definePlugin, httpProvider, Type }: PluginApi) =>
  definePlugin({
    kind: "model",
    name: "example-vendor",
    description: "Example: an OpenAI-compatible chat API, with a header of its own",
    serves: ["chat"],
    configSchema: Type.Object({
      baseURL: Type.String({ pattern: "^https?://" }),
      apiKey: Type.String({ minLength: 1 }),
      models: Type.Array(Type.String(), { default: [] }),
      team: Type.Optional(Type.String()),
    }),
    enabledBy: "EXAMPLE_VENDOR_API_KEY",
    fromEnv: (env) => (env.EXAMPLE_VENDOR_API_KEY ? { baseURL: "https://api.acme.example/v1", apiKey: env.EXAMPLE_VENDOR_API_KEY, models: [] } : undefined),
    create: (config, ctx) =>
      httpProvider({
        vendor: ctx.instanceName,
        models: config.models,
        baseURL: config.baseURL,
        path: (req: UpstreamRequest) => (req.protocol === "chat" ? "/chat/completions" : "/unsupported"),
        headers: () => ({ "content-type": "application/json", authorization: `Bearer ${config.apiKey}`, ...(config.team ? { "acme-team": config.team } : {}) }),
      }),
  });
