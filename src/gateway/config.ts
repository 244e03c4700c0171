import { type TSchema, Type } from "@sinclair/typebox";
import { Value } from "@sinclair/typebox/value";
import type { ConfigFile } from "../config";
import { ConfigError } from "../settings";
import { sectionProblem } from "../settings/config-section";

/**
 * The gateway's sections of CONFIG_FILE:
 *
 *   "routes":  { "<public model>": [ { "provider": "groq", "model": "llama-3.1-8b-instant", "weight": 3 }, ... ] }
 *   "gateway": { "timeoutMs": 600000, "cooldownFailures": 3, "cooldownSeconds": 30, "pingIntervalMs": 15000, "interactionWaitMs": 60000 }
 *
 * Providers themselves live in the shared "providers" section (see the registry).
 */
const CandidateSchema = Type.Object(
  {
    provider: Type.String({ minLength: 1 }),
    model: Type.Optional(Type.String({ minLength: 1, description: "Upstream model id; default: the public name" })),
    weight: Type.Optional(Type.Number({ minimum: 0 })),
  },
  { additionalProperties: false },
);

const RoutesSchema = Type.Record(Type.String(), Type.Array(CandidateSchema, { minItems: 1 }));

const GatewaySchema = Type.Object(
  {
    /** Time allowed for an upstream to produce its response headers (and, for streams, the first bytes). */
    timeoutMs: Type.Integer({ minimum: 1, default: 600_000 }),
    /** Consecutive failures after which a candidate is skipped... */
    cooldownFailures: Type.Integer({ minimum: 1, default: 3 }),
    /** ...for this long. */
    cooldownSeconds: Type.Number({ minimum: 0, default: 30 }),
    /** Idle time after which a messages stream gets a `ping` event (spec: about every 15 s). */
    pingIntervalMs: Type.Integer({ minimum: 1, default: 15_000 }),
    /**
     * How long a synchronous Interactions create waits for the Interaction to finish
     * before answering 200 `in_progress` with its poll path (spec: the bounded wait).
     */
    interactionWaitMs: Type.Integer({ minimum: 1, default: 60_000 }),
  },
  { additionalProperties: false },
);

export type RouteCandidate = (typeof CandidateSchema)["static"];
export type GatewayOptions = (typeof GatewaySchema)["static"];

export interface GatewayConfig {
  routes: Record<string, RouteCandidate[]>;
  options: GatewayOptions;
}

export function gatewayConfig(file: ConfigFile): GatewayConfig {
  const routes = file.routes ?? {};
  check(RoutesSchema, routes, "routes");
  const raw = file.gateway ?? {};
  check(GatewaySchema, Value.Default(GatewaySchema, structuredClone(raw)), "gateway");
  return { routes: routes as GatewayConfig["routes"], options: Value.Default(GatewaySchema, structuredClone(raw)) as GatewayOptions };
}

function check(schema: TSchema, value: unknown, section: string) {
  const problem = sectionProblem(schema, value, `CONFIG_FILE ${section}`);
  if (problem) throw new ConfigError(problem);
}
