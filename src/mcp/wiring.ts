import { secretBoxFor } from "../events/secrets";
import type { Services } from "../services";
import { McpGateway } from "./gateway";
import { McpServerRepository } from "./servers";
import { UpstreamPool } from "./upstream";

const gateways = new WeakMap<Services, McpGateway>();

/** The service's MCP gateway (its servers, upstream pool), created on first use; the pool closes at shutdown. */
export function mcpGatewayOf(s: Services): McpGateway {
  let g = gateways.get(s);
  if (!g) {
    const pool = new UpstreamPool(s.config.egress, s.log);
    g = new McpGateway(s, new McpServerRepository(s.db, s.config.egress, secretBoxFor(s)), pool);
    gateways.set(s, g);
    s.onShutdown.push(() => pool.close());
  }
  return g;
}
