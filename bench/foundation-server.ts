// Child process for bench/foundation.ts: a bare Bun.serve hello-world (MODE=bare), the
// native floor of an authenticated route (MODE=floor), or the service with one authenticated
// no-op route (MODE=service). Prints "READY <url> <key>" on stderr.
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Elysia } from "elysia";
import { requestContext } from "../src/http/core";
import { routeModules } from "../src/app";
import { loadConfig } from "../src/config";
import { startServer } from "../src/server";

if (process.env.MODE === "bare") {
  const server = Bun.serve({ port: 0, hostname: "127.0.0.1", fetch: () => new Response("ok") });
  console.error(`READY http://127.0.0.1:${server.port} -`);
} else if (process.env.MODE === "floor") {
  // The native minimum of any authenticated route that carries a request id, with no
  // routing, key lookup or logging: read the URL, read the credential header, answer with
  // one response header.
  let n = 0;
  const server = Bun.serve({
    port: 0,
    hostname: "127.0.0.1",
    fetch: (req) => {
      if (!req.url || !req.headers.get("authorization")) return new Response("unauthorized", { status: 401 });
      return new Response("ok", { headers: { "x-request-id": `req_${++n}` } });
    },
  });
  console.error(`READY http://127.0.0.1:${server.port} -`);
} else {
  const noop = {
    surfaces: [{ prefix: "/bench", family: "flat" as const, credentials: "bearer" as const }],
    routes: () => new Elysia().use(requestContext).get("/bench/noop", () => "ok"),
  };
  const config = loadConfig({ ...process.env, PORT: "0", HOST: "127.0.0.1", DATA_DIR: mkdtempSync(join(tmpdir(), "gw-bench-")), BOOTSTRAP: "false" });
  // Diagnostics: ONLY_FOUNDATION=1 serves only health+admin; KEEP=4,7 adds routeModules[4] and [7].
  const keep = process.env.KEEP ? process.env.KEEP.split(",").map(Number) : undefined;
  const modules = process.env.ONLY_FOUNDATION ? routeModules.slice(0, 2) : keep ? routeModules.filter((_, i) => i < 2 || keep.includes(i)) : routeModules;
  const server = await startServer(config, { modules: [...modules, noop] });
  const org = await server.services.keys.createOrganization("bench");
  const { key } = await server.services.keys.createKey({ organizationId: org.id, name: "bench" });
  console.error(`READY ${server.url} ${key}`);
}
// A clean exit on SIGINT, so `bun --cpu-prof` can write its profile.
process.on("SIGINT", () => process.exit(0));
