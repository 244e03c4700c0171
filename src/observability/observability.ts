import type { Surface } from "../http/surfaces";
import type { Metrics } from "./metrics";
import { type ModelCallInfo, ModelCallObservation } from "./model-call";
import type { Tracing } from "./tracing";

/** What an agent turn reports (src/agents/runtime.ts TurnTiming). */
export interface TurnSample {
  sessionId: string;
  totalMs: number;
  modelMs: number;
  toolMs: number;
  loopMs: number;
}

/**
 * The one object the rest of the service calls at the points where things happen
 * (a request answered, an upstream attempt, a sandbox command, a webhook delivery...).
 * It exists only when metrics or tracing is on; callers hold it as optional, so a
 * service with both off pays one undefined check per point.
 */
export class Observability {
  constructor(
    readonly metrics: Metrics | undefined,
    readonly tracing: Tracing | undefined,
    /** Provider instance name -> its plugin's name (the GenAI system: `openai`, `anthropic`...). */
    private readonly plugins: ReadonlyMap<string, string> = new Map(),
  ) {}

  /**
   * Resources in use per sandbox, for the cgroup gauges; the sandboxes domain hands it in
   * when it builds its service (observability does not import domains that import it).
   */
  sandboxUsage?: (limit: number) => Promise<{ id: string; cpuSeconds?: number; memoryBytes?: number; networkRxBytes?: number; networkTxBytes?: number }[]>;

  /** A request arrived (tracing: its span starts and becomes the active context). */
  requestStarted(request: Request, path: string): void {
    this.tracing?.requestStarted(request, path);
  }

  /**
   * A response was decided. `route` is the route template (never the raw path: ids would
   * make the label unbounded), undefined when no route matched.
   */
  requestFinished(request: Request, surface: Surface, route: string | undefined, status: number, organization: string | undefined): void {
    const template = route || "unmatched";
    this.metrics?.request(surface.prefix || "none", template, status, organization);
    this.tracing?.requestFinished(request, template, status, organization);
  }

  modelCall(call: ModelCallInfo): ModelCallObservation {
    return new ModelCallObservation(call, this.metrics, this.tracing, this.systemOf);
  }

  private readonly systemOf = (c: { provider: string; upstream: { vendor: string } }) => this.plugins.get(c.provider) ?? c.upstream.vendor;

  cooldown(provider: string, model: string): void {
    this.metrics?.cooldown(provider, model);
  }

  /** `startedAt` from performance.now(). */
  sandboxCreated(template: string, ok: boolean, startedAt: number, sandboxId?: string): void {
    this.metrics?.sandboxCreated(template, ok, performance.now() - startedAt);
    this.tracing?.finished("sandbox.create", { "gateway.sandbox.template": template, ...(sandboxId ? { "gateway.sandbox.id": sandboxId } : {}) }, startedAt, ok);
  }

  sandboxCommand(sandboxId: string, ok: boolean, startedAt: number, exitCode?: number): void {
    this.metrics?.sandboxCommand(ok, performance.now() - startedAt);
    this.tracing?.finished("sandbox.exec", { "gateway.sandbox.id": sandboxId, ...(exitCode !== undefined ? { "process.exit.code": exitCode } : {}) }, startedAt, ok);
  }

  /** One delivery attempt ended; `eventCreatedAt` ISO time of the event it carries. */
  webhookAttempt(o: { ok: boolean; final: boolean; eventCreatedAt: string; startedAt: number; webhookId: string; eventType: string; attempt: number; status?: number }): void {
    const result = o.ok ? "succeeded" : o.final ? "exhausted" : "failed";
    this.metrics?.webhookAttempt(result, Date.now() - Date.parse(o.eventCreatedAt));
    this.tracing?.finished(
      "webhook.deliver",
      { "gateway.webhook.id": o.webhookId, "gateway.event.type": o.eventType, "gateway.delivery.attempt": o.attempt, "gateway.delivery.result": result, ...(o.status ? { "http.response.status_code": o.status } : {}) },
      o.startedAt,
      o.ok,
    );
  }

  taskFinished(type: string, state: string): void {
    this.metrics?.taskFinished(type, state);
  }

  /** An agent's tool call (built-in in the sandbox, or MCP) ended after `ms`. */
  toolCall(kind: string, name: string, ok: boolean, ms: number): void {
    this.metrics?.toolCall(kind, ok);
    this.tracing?.finished(`execute_tool ${name}`, { "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": name, "gateway.tool.kind": kind }, performance.now() - ms, ok);
  }

  agentTurn(t: TurnSample): void {
    this.metrics?.agentTurn(t);
    this.tracing?.finished(
      "agent.turn",
      { "gen_ai.operation.name": "invoke_agent", "gateway.session.id": t.sessionId, "gateway.turn.model_ms": t.modelMs, "gateway.turn.tool_ms": t.toolMs, "gateway.turn.loop_ms": t.loopMs },
      performance.now() - t.totalMs,
      true,
    );
  }
}
