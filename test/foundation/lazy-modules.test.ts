// Database-independent: which packages a service loads at start; the PostgreSQL pass of npm test leaves it out.
import { expect, test } from "bun:test";
import { join } from "node:path";

/**
 * Packages that most services never use are loaded on first use, not at start (their memory
 * is in docs/benchmarks.md: Start-up, memory and install). A static import of one of them
 * anywhere in the service's module graph loads it in every process again: this names it.
 */
const LOADED_ON_FIRST_USE = [
  "@modelcontextprotocol/sdk", // the first MCP use: /mcp, an upstream MCP server, an agent's MCP server (src/mcp/sdk.ts)
  "prom-client", // metrics configured (src/observability/wiring.ts)
  "@opentelemetry/", // tracing configured (src/observability/wiring.ts)
  "@connectrpc/", // envd's RPC, the first E2B SDK call (src/e2b/envd-rpc.ts)
  "@bufbuild/protobuf",
  "postgres/", // DATABASE_URL (src/db/client.ts)
  "jose/", // Vertex AI service accounts (providers/google/service-account-token.ts)
];

test("starting the service loads none of the packages it loads on first use", () => {
  const root = join(import.meta.dir, "../..");
  // A process of its own: this test runner's module registry holds whatever other files loaded.
  const script = `await import("./src/server.ts"); console.log(JSON.stringify(Object.keys(require.cache)));`;
  const run = Bun.spawnSync([process.execPath, "-e", script], { cwd: root, stdout: "pipe", stderr: "pipe" });
  expect(run.exitCode).toBe(0);
  const loaded = (JSON.parse(run.stdout.toString()) as string[]).filter((f) => f.includes("/node_modules/"));
  expect(loaded.length).toBeGreaterThan(0); // the probe sees packages at all
  const unexpected = loaded.filter((f) => LOADED_ON_FIRST_USE.some((p) => f.includes(`/node_modules/${p}`)));
  expect(unexpected).toEqual([]);
});
