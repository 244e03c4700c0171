/**
 * A plugin as someone outside this repository writes it, for PLUGINS_DIR: it imports
 * only types, and only from the public plugin surface (src/plugin-api.ts), so
 * `npm run typecheck` checks it against that surface while at run time it needs no
 * import at all (the compiled binary has no node_modules beside it). Its helpers arrive
 * as the argument of its default export.
 */
import type { PluginApi, UpstreamRequest } from "../../src/plugin-api";

export default ({ definePlugin, httpProvider, Type }: PluginApi) =>
  definePlugin({
    kind: "model",
    name: "acme-external",
    description: "Acme's OpenAI-compatible chat API, with a header of its own",
    serves: ["chat"],
    configSchema: Type.Object({
      baseURL: Type.String({ pattern: "^https?://" }),
      apiKey: Type.String({ minLength: 1 }),
      models: Type.Array(Type.String(), { default: [] }),
      team: Type.Optional(Type.String()),
    }),
    fromEnv: (env) => (env.ACME_EXTERNAL_KEY ? { baseURL: "https://api.acme.example/v1", apiKey: env.ACME_EXTERNAL_KEY, models: [] } : undefined),
    create: (config, ctx) =>
      httpProvider({
        vendor: ctx.instanceName,
        models: config.models,
        baseURL: config.baseURL,
        path: (req: UpstreamRequest) => (req.protocol === "chat" ? "/chat/completions" : "/unsupported"),
        headers: () => ({ "content-type": "application/json", authorization: `Bearer ${config.apiKey}`, ...(config.team ? { "acme-team": config.team } : {}) }),
      }),
  });
