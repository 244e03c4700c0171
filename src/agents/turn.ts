import type { NewEvent } from "../events/record";
import type { KeyRecord } from "../keys/keys";
import type { Services } from "../services";
import type { SessionHooks } from "./hooks";
import { eventsAfter, type NewSessionEvent } from "./log";
import { McpConnectionError, type McpConnections } from "./mcp";
import { buildHistory, callModel, isToolUse, logicalOrder, ModelCallError, RESULT_REF, type ToolSpec } from "./model";
import type { AgentRow, SessionEventRow, SessionRow } from "./schema";
import { type Confirmation, SessionTools } from "./tool-use";
import { SandboxSetupError } from "./tools";

const CONVERSATION = new Set(["user.message", "agent.message", "agent.tool_use", "agent.mcp_tool_use", "agent.custom_tool_use", "agent.tool_result", "agent.mcp_tool_result", "user.custom_tool_result"]);

/** What the log says the loop must do next. */
export interface Analysis {
  interrupted: boolean;
  /** Tool uses of the current turn that have no result yet, oldest first. */
  pending: SessionEventRow[];
  confirmations: Map<string, Confirmation>;
  needsModel: boolean;
}

export function analyze(events: SessionEventRow[]): Analysis {
  let lastUser = -1;
  let lastInterrupt = -1;
  const resolved = new Set<string>();
  const confirmations: Analysis["confirmations"] = new Map();
  let lastConversation: SessionEventRow | undefined;
  events.forEach((e, i) => {
    if (e.type === "user.message") lastUser = i;
    else if (e.type === "user.interrupt") lastInterrupt = i;
    else if (e.type === "user.tool_confirmation") confirmations.set(String(e.payload.tool_use_id), e.payload as unknown as Confirmation);
    const ref = RESULT_REF[e.type];
    if (ref) resolved.add(String(e.payload[ref]));
    if (CONVERSATION.has(e.type)) lastConversation = e;
  });
  const start = Math.max(lastUser, lastInterrupt);
  const pending = events.filter((e, i) => i > start && isToolUse(e.type) && !resolved.has(e.id));
  return {
    interrupted: lastInterrupt > lastUser,
    pending,
    confirmations,
    needsModel: lastConversation !== undefined && lastConversation.type !== "agent.message",
  };
}

/** What one step of a turn decided; the loop (runtime.ts) carries it out. */
export type Decision =
  /** Record these events (and session update, and events of other resources) and take the next step. */
  | { kind: "append"; events: NewSessionEvent[]; patch?: Partial<SessionRow>; outbox?: NewEvent[] }
  /** The turn ends: these events and the idle status commit together, unless input arrived meanwhile. */
  | { kind: "idle"; stopReason: Record<string, unknown>; before?: NewSessionEvent[]; patch?: Partial<SessionRow> }
  /** The turn fails: a terminal session.error, then idle. */
  | { kind: "fail"; error: string; message: string };

const idle = (stopReason: Record<string, unknown>, before?: NewSessionEvent[], patch?: Partial<SessionRow>): Decision => ({ kind: "idle", stopReason, before, patch });

export interface TurnDeps {
  s: Services;
  session: SessionRow;
  /** The pinned agent version; undefined when it no longer exists. */
  agent: AgentRow | undefined;
  mcp: McpConnections;
  hooks: readonly SessionHooks[];
  signal: AbortSignal;
  maxSteps: number;
  /** The session's key (null when deleted), for the model call's authority. */
  keyOf(session: SessionRow): Promise<KeyRecord | null>;
}

/**
 * The steps of a session's turns while this process holds its lease. Its only state is
 * the event log (read incrementally): each step reads what the log says (analyze),
 * acts - one tool run or one model call - and returns what to record, so a process
 * that dies mid-turn loses nothing: the next owner continues from the log.
 */
export class Turn {
  readonly events: SessionEventRow[] = [];
  /** The last seq read from the log. */
  seen = 0;
  /** Where this turn's time goes: model calls, tools, and the rest (the loop's own work). */
  timing: { start: number; modelMs: number; toolMs: number };
  private steps = 0;
  private readonly tools: SessionTools;

  constructor(
    private readonly d: TurnDeps,
    startedAt: number,
  ) {
    this.timing = { start: startedAt, modelMs: 0, toolMs: 0 };
    this.tools = new SessionTools(d.s, d.session, d.agent, d.mcp, d.hooks, d.signal);
  }

  /** The turn ended; input arriving later starts the next one. */
  restart(): void {
    this.timing = { start: performance.now(), modelMs: 0, toolMs: 0 };
    this.steps = 0;
  }

  /** Reads the events written since the last read. */
  async refresh(): Promise<void> {
    for (;;) {
      const rows = await eventsAfter(this.d.s.db, this.d.session.id, this.seen);
      for (const r of rows) this.events.push(r);
      if (rows.length) this.seen = rows[rows.length - 1].seq;
      if (rows.length < 1000) break;
    }
  }

  /** One step: an interrupt ends the turn; else a pending tool use runs (or waits for the user); else the model is asked. */
  async next(): Promise<Decision> {
    const a = analyze(logicalOrder(this.events));
    if (a.interrupted) return idle({ type: "end_turn" });
    const waiting: string[] = [];
    for (const use of a.pending) {
      const step = await this.tools.step(use, a.confirmations.get(use.id));
      if (step.wait) {
        waiting.push(use.id);
        continue;
      }
      this.timing.toolMs += step.toolMs;
      return { kind: "append", events: [...(step.before ?? []), step.result], outbox: step.outbox };
    }
    if (waiting.length) return idle({ type: "requires_action", event_ids: waiting });
    if (!a.needsModel) return idle({ type: "end_turn" });
    return this.askModel();
  }

  private async askModel(): Promise<Decision> {
    const { s, session, agent } = this.d;
    if (!agent) throw new ModelCallError("model_request_failed_error", "the session's agent version no longer exists");
    if (++this.steps > this.d.maxSteps) return { kind: "fail", error: "tool_use_limit_reached_error", message: `the turn reached ${this.d.maxSteps} model calls (AGENT_MAX_STEPS)` };
    const key = await this.d.keyOf(session);
    let tools: ToolSpec[];
    try {
      tools = await this.tools.specs();
    } catch (e) {
      if (e instanceof McpConnectionError) return { kind: "fail", error: "mcp_connection_failed_error", message: e.message };
      throw e;
    }
    let system = agent.system;
    for (const h of this.d.hooks) if (h.systemPrompt) system = await h.systemPrompt(s, agent, system);
    const modelSeen = this.seen;
    const started = performance.now();
    const reply = await callModel(s, key, String(agent.model.id), system, buildHistory(logicalOrder(this.events)), tools, this.d.signal);
    this.timing.modelMs += performance.now() - started;
    const usage = { input_tokens: session.usage.input_tokens + reply.usage.input, output_tokens: session.usage.output_tokens + reply.usage.output };
    let events = this.tools.replyEvents(reply.text, reply.toolCalls, modelSeen);
    // A reply with neither text nor tool calls still ends the turn visibly.
    if (!events.length) events = [{ type: "agent.message", payload: { content: [], _seen: modelSeen } }];
    // Without tool calls the turn ends here: the answer and the idle status commit together.
    if (!reply.toolCalls.length) return idle({ type: "end_turn" }, events, { usage });
    return { kind: "append", events, patch: { usage } };
  }
}

/** The session error a step's failure ends the turn with; undefined for failures that are ours (logged, reported as unknown_error). */
export function knownFailure(e: unknown): { error: string; message: string } | undefined {
  if (e instanceof ModelCallError) return { error: e.kind, message: e.message };
  if (e instanceof SandboxSetupError) return { error: "unknown_error", message: e.message };
  return undefined;
}
