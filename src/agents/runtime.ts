import { randomUUID } from "node:crypto";
import { hostname } from "node:os";
import { and, eq, isNotNull, isNull, lt, or, sql } from "drizzle-orm";
import { ApiError } from "../../plugins/errors";
import { egressPolicyFromEnv } from "../events/egress";
import { type NewEvent, recordEvent } from "../events/record";
import { type KeyRecord, NotFoundError } from "../keys/keys";
import { sandboxServiceOf } from "../sandboxes";
import type { Services } from "../services";
import { runToolWithSkills } from "../skills/runs";
import { installSkills, systemWithSkills } from "../skills/sandbox";
import { type AgentTool, BUILTIN_TOOLS, type CustomTool, type McpServer, type McpToolset, TOOLSET_TYPE, type Toolset } from "./agents";
import { type EnvironmentConfig, normalizeConfig } from "./environments";
import { appendInTx, busOf, eventsAfter, type NewSessionEvent } from "./log";
import { McpConnectionError, McpConnections } from "./mcp";
import { buildHistory, callModel, isToolUse, logicalOrder, ModelCallError, RESULT_REF, type ToolSpec } from "./model";
import { type AgentRow, agentEnvironments, agentSessionEvents, agentSessions, agentVersions, type SessionEventRow, type SessionRow } from "./schema";
import { BUILTIN_DEFS, ensureSandbox, SandboxSetupError, type ToolOutcome } from "./tools";

/** Thrown when this process no longer holds the session's lease: it must stop writing at once. */
class LeaseLost extends Error {}

type Policy = "always_allow" | "always_ask" | "auto";
/** How one model-visible tool name resolves for the pinned agent version. */
type Resolved =
  | { kind: "builtin"; name: string; policy: Policy }
  | { kind: "mcp"; server: McpServer; name: string; policy: Policy }
  | { kind: "custom"; name: string };

export interface RuntimeOptions {
  leaseMs: number;
  recoveryMs: number;
  maxSteps: number;
  sandboxIdleMs: number;
}

function num(v: string | undefined, dflt: number, min: number): number {
  const n = Number(v);
  return v !== undefined && Number.isFinite(n) && n >= min ? n : dflt;
}

export function runtimeOptions(env: Record<string, string | undefined>): RuntimeOptions {
  return {
    leaseMs: num(env.AGENT_LEASE_MS, 30_000, 200),
    recoveryMs: num(env.AGENT_RECOVERY_INTERVAL_MS, 1_000, 20),
    maxSteps: num(env.AGENT_MAX_STEPS, 50, 1),
    sandboxIdleMs: num(env.AGENT_SANDBOX_IDLE_MS, 300_000, 100),
  };
}

/** SQL: has an event been written after `seen` (input the loop has not looked at yet)? */
const unseenInput = (sessionId: string, seen: number) =>
  sql`exists (select 1 from ${agentSessionEvents} where ${agentSessionEvents.sessionId} = ${sessionId} and ${agentSessionEvents.seq} > ${seen})`;

const INPUT_TYPES = new Set(["user.message", "user.tool_confirmation", "user.custom_tool_result"]);
const CONVERSATION = new Set(["user.message", "agent.message", "agent.tool_use", "agent.mcp_tool_use", "agent.custom_tool_use", "agent.tool_result", "agent.mcp_tool_result", "user.custom_tool_result"]);

/** What the log says the loop must do next. */
interface Analysis {
  interrupted: boolean;
  /** Tool uses of the current turn that have no result yet, oldest first. */
  pending: SessionEventRow[];
  confirmations: Map<string, { result: "allow" | "deny"; deny_message?: string | null }>;
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
    else if (e.type === "user.tool_confirmation") confirmations.set(String(e.payload.tool_use_id), e.payload as any);
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

function resolveTool(agent: AgentRow, modelName: string): Resolved | undefined {
  const tools = agent.tools as unknown as AgentTool[];
  for (const t of tools) {
    if (t.type === "custom" && t.name === modelName) return { kind: "custom", name: t.name };
  }
  const toolset = tools.find((t) => t.type === TOOLSET_TYPE) as Toolset | undefined;
  if (toolset && (BUILTIN_TOOLS as readonly string[]).includes(modelName)) {
    const c = toolset.configs.find((x) => x.name === modelName);
    const enabled = c ? c.enabled : toolset.default_config.enabled;
    if (enabled) return { kind: "builtin", name: modelName, policy: (c ?? toolset.default_config).permission_policy.type };
  }
  const sep = modelName.indexOf("__");
  if (sep > 0) {
    const serverName = modelName.slice(0, sep);
    const name = modelName.slice(sep + 2);
    const ts = tools.find((t) => t.type === "mcp_toolset" && t.mcp_server_name === serverName) as McpToolset | undefined;
    const server = (agent.mcpServers as unknown as McpServer[]).find((s) => s.name === serverName);
    if (ts && server) {
      const c = ts.configs.find((x) => x.name === name);
      const enabled = c ? c.enabled : ts.default_config.enabled;
      if (enabled) return { kind: "mcp", server, name, policy: (c ?? ts.default_config).permission_policy.type };
    }
  }
  return undefined;
}

/**
 * The agent loop. Its only state is the session's event log: every step reads the log,
 * decides (analyze), acts, and persists what it did before anyone can see it. So a
 * process that dies mid-turn loses nothing: whichever process takes the lease next
 * continues from the log. One loop per session at a time, across processes, through a
 * lease on the session row (renewed while the loop runs; every write is fenced by it).
 */
/** One turn, from the loop picking up input to the session going idle. */
export interface TurnTiming {
  sessionId: string;
  totalMs: number;
  /** Model calls (through the gateway, upstream included). */
  modelMs: number;
  /** Tool runs: sandbox set-up and commands, MCP calls. */
  toolMs: number;
  /** The rest: reading the log, deciding, writing events and status (the loop's own overhead). */
  loopMs: number;
}

export class AgentRuntime {
  readonly owner = `${hostname()}:${process.pid}:${randomUUID().slice(0, 8)}`;
  private readonly runs = new Map<string, { again: boolean; abort: AbortController }>();
  private readonly drives = new Set<Promise<void>>();
  /** Sessions whose lease the last idle transition released (no separate release statement needed). */
  private readonly released = new Set<string>();
  /** Agent versions are immutable but for archived_at, which the loop does not read. */
  private readonly agentCache = new Map<string, AgentRow>();
  private timers: ReturnType<typeof setInterval>[] = [];
  /** The last turns' timings, newest last (diagnostics and the benchmark). */
  private readonly turns: TurnTiming[] = [];
  private stopped = false;
  readonly opts: RuntimeOptions;

  constructor(private readonly s: Services) {
    this.opts = runtimeOptions(s.config.env);
  }

  /** Background work: pick up running sessions without a live lease (crash recovery), pause idle sandboxes. */
  start(): void {
    const recover = async () => {
      const rows = await this.s.db
        .select({ id: agentSessions.id })
        .from(agentSessions)
        .where(and(eq(agentSessions.status, "running"), or(isNull(agentSessions.leaseOwner), lt(agentSessions.leaseUntil, sql`now()`))))
        .limit(50);
      for (const r of rows) this.kick(r.id);
    };
    let busy = false;
    this.timers.push(
      setInterval(() => {
        if (busy || this.stopped) return;
        busy = true;
        recover()
          .then(() => this.pauseIdleSandboxes())
          .catch((e) => this.s.log.error("agent session recovery failed", { err: e }))
          .finally(() => (busy = false));
      }, this.opts.recoveryMs),
    );
    void recover().catch(() => {});
  }

  /** Graceful stop: abort running loops (their leases are released, not left to expire) and wait for them. */
  async stop(): Promise<void> {
    this.stopped = true;
    for (const t of this.timers) clearInterval(t);
    for (const r of this.runs.values()) r.abort.abort("shutdown");
    await Promise.allSettled([...this.drives]);
  }

  /** Makes sure a loop runs for the session (here, or already elsewhere). */
  kick(sessionId: string, hint?: SessionRow): void {
    if (this.stopped) return;
    const run = this.runs.get(sessionId);
    if (run) {
      run.again = true;
      return;
    }
    const p = this.drive(sessionId, hint).catch((e) => this.s.log.error("agent loop failed", { sessionId, err: e }));
    this.drives.add(p);
    p.finally(() => this.drives.delete(p));
  }

  /** user.interrupt: cut the current model call short if this process runs the loop (other processes see the event between steps). */
  interrupt(sessionId: string): void {
    this.runs.get(sessionId)?.abort.abort("interrupt");
  }

  private async drive(sessionId: string, hint?: SessionRow): Promise<void> {
    const ctl = { again: false, abort: new AbortController() };
    // The turn starts when the loop picks the input up (before it takes the lease).
    let startedAt = performance.now();
    this.runs.set(sessionId, ctl);
    try {
      // A send or create in this process may already have taken the lease for us in its
      // own transaction (one commit less per turn; `hint` is the row it committed);
      // otherwise take it now.
      const given = hint && hint.status === "running" && hint.leaseOwner === this.owner ? hint : undefined;
      let session = given ?? (await this.leased(sessionId)) ?? (await this.acquire(sessionId));
      if (!session) return;
      const renew = setInterval(() => {
        this.renew(sessionId).then(
          (ok) => ok || ctl.abort.abort("lease lost"),
          () => {},
        );
      }, Math.max(50, Math.floor(this.opts.leaseMs / 3)));
      try {
        while (session && session.status === "running" && !this.stopped) {
          ctl.again = false;
          if (ctl.abort.signal.aborted && ctl.abort.signal.reason === "interrupt") ctl.abort = new AbortController();
          await this.run(session, ctl, startedAt);
          if (!ctl.again) break;
          startedAt = performance.now();
          // Input arrived while the turn was ending: take the lease again (going idle released it).
          this.released.delete(sessionId);
          session = (await this.leased(sessionId)) ?? (await this.acquire(sessionId));
        }
      } finally {
        clearInterval(renew);
        if (!this.released.delete(sessionId)) await this.release(sessionId);
      }
    } finally {
      this.runs.delete(sessionId);
    }
  }

  /** The session row when this process already holds its lease (taken by a send or create here). */
  private async leased(id: string): Promise<SessionRow | undefined> {
    const [row] = await this.s.db.select().from(agentSessions).where(eq(agentSessions.id, id));
    return row && row.leaseOwner === this.owner && row.leaseUntil && row.leaseUntil.getTime() > Date.now() ? row : undefined;
  }

  /**
   * SQL for a send/create transaction that turns a session running: take the lease for
   * this process when it is free, so the loop starts without another commit.
   */
  leaseIfFree(): { leaseOwner: ReturnType<typeof sql>; leaseUntil: ReturnType<typeof sql> } {
    const free = sql`(${agentSessions.leaseOwner} is null or ${agentSessions.leaseUntil} < now())`;
    return {
      leaseOwner: sql`case when ${free} then ${this.owner} else ${agentSessions.leaseOwner} end`,
      leaseUntil: sql`case when ${free} then now() + (${this.opts.leaseMs} * interval '1 millisecond') else ${agentSessions.leaseUntil} end`,
    };
  }

  private async acquire(id: string): Promise<SessionRow | undefined> {
    const [row] = await this.s.db
      .update(agentSessions)
      .set({ leaseOwner: this.owner, leaseUntil: sql`now() + (${this.opts.leaseMs} * interval '1 millisecond')` })
      .where(
        and(
          eq(agentSessions.id, id),
          eq(agentSessions.status, "running"),
          or(isNull(agentSessions.leaseOwner), lt(agentSessions.leaseUntil, sql`now()`), eq(agentSessions.leaseOwner, this.owner)),
        ),
      )
      .returning();
    return row;
  }

  private async renew(id: string): Promise<boolean> {
    const rows = await this.s.db
      .update(agentSessions)
      .set({ leaseUntil: sql`now() + (${this.opts.leaseMs} * interval '1 millisecond')` })
      .where(and(eq(agentSessions.id, id), eq(agentSessions.leaseOwner, this.owner)))
      .returning({ id: agentSessions.id });
    return rows.length > 0;
  }

  private async release(id: string): Promise<void> {
    await this.s.db
      .update(agentSessions)
      .set({ leaseOwner: null, leaseUntil: null })
      .where(and(eq(agentSessions.id, id), eq(agentSessions.leaseOwner, this.owner)))
      .catch((e) => this.s.log.warn("agent lease release failed", { sessionId: id, err: e }));
  }

  /**
   * Appends events (and a session update) only while this process holds the lease.
   * `outbox`: events of other resources caused by the same step (router.skill.completed),
   * committed with it.
   */
  private async write(session: SessionRow, events: NewSessionEvent[], patch: Partial<SessionRow> = {}, outbox: NewEvent[] = []): Promise<SessionEventRow[]> {
    const rows = await this.s.db.transaction(async (tx) => {
      const held = await tx
        .update(agentSessions)
        .set({ ...patch, updatedAt: new Date() })
        .where(and(eq(agentSessions.id, session.id), eq(agentSessions.leaseOwner, this.owner)))
        .returning({ id: agentSessions.id });
      if (!held.length) throw new LeaseLost("session lease lost");
      for (const e of outbox) await recordEvent(tx, e);
      return appendInTx(tx, session, events);
    });
    busOf(this.s).publish(session.id);
    return rows;
  }

  /**
   * running -> idle, releasing the lease in the same commit, unless input was written
   * after the events the loop has seen (then false: the loop continues). `before` are
   * events to write first in the same transaction (a final answer and its idle status
   * commit together). The fenced update comes first and locks the session row, so a
   * concurrent send either committed before (and is seen by the check) or waits and
   * then finds the session idle.
   */
  private async goIdle(session: SessionRow, seen: number, stopReason: Record<string, unknown>, before: NewSessionEvent[] = [], patch: Partial<SessionRow> = {}): Promise<boolean> {
    const idle = await this.s.db.transaction(async (tx) => {
      // One statement locks the row, checks for unseen input and flips the status.
      const [r] = await tx
        .update(agentSessions)
        .set({
          ...patch,
          updatedAt: new Date(),
          status: sql`case when ${unseenInput(session.id, seen)} then ${agentSessions.status} else 'idle' end`,
          idleSince: sql`case when ${unseenInput(session.id, seen)} then ${agentSessions.idleSince} else now() end`,
          leaseOwner: sql`case when ${unseenInput(session.id, seen)} then ${agentSessions.leaseOwner} else null end`,
          leaseUntil: sql`case when ${unseenInput(session.id, seen)} then ${agentSessions.leaseUntil} else null end`,
        })
        .where(and(eq(agentSessions.id, session.id), eq(agentSessions.leaseOwner, this.owner), eq(agentSessions.status, "running")))
        .returning({ status: agentSessions.status });
      if (!r) throw new LeaseLost("session lease lost");
      const idle = r.status === "idle";
      await appendInTx(tx, session, idle ? [...before, { type: "session.status_idle", payload: { stop_reason: stopReason, stop_details: null } }] : before);
      return idle;
    });
    if (idle) this.released.add(session.id);
    busOf(this.s).publish(session.id);
    return idle;
  }

  /**
   * After going idle: input that slipped in meanwhile. Takes the lease back when it is
   * free (or was handed to this process by a send here) and continues; false when there
   * is nothing to do or another process drives the session now.
   */
  private async resumeIfInput(session: SessionRow, seen: number): Promise<boolean> {
    const late = (await eventsAfter(this.s.db, session.id, seen)).filter((e) => INPUT_TYPES.has(e.type));
    if (!late.length) return false;
    const back = await this.s.db.transaction(async (tx) => {
      const [r] = await tx
        .update(agentSessions)
        .set({ leaseOwner: this.owner, leaseUntil: sql`now() + (${this.opts.leaseMs} * interval '1 millisecond')` })
        .where(and(eq(agentSessions.id, session.id), or(isNull(agentSessions.leaseOwner), lt(agentSessions.leaseUntil, sql`now()`), eq(agentSessions.leaseOwner, this.owner))))
        .returning({ status: agentSessions.status });
      if (!r) return false;
      this.released.delete(session.id);
      if (r.status === "idle") {
        await tx.update(agentSessions).set({ status: "running", idleSince: null, updatedAt: new Date() }).where(eq(agentSessions.id, session.id));
        await appendInTx(tx, session, [{ type: "session.status_running", payload: {} }]);
      }
      return true;
    });
    busOf(this.s).publish(session.id);
    return back;
  }

  /**
   * Session keys, re-read at most once a second: `spent` is updated by the batching
   * usage meter anyway (every 250 ms by default), so a fresher read would not make the
   * spending limit exact, and a turn saves a round trip.
   */
  private readonly keyCache = new Map<string, { key: KeyRecord | null; at: number }>();

  /** The key that created the session (null once deleted); the gateway checks it like a client's. */
  private async keyOf(session: SessionRow): Promise<KeyRecord | null> {
    const hit = this.keyCache.get(session.keyId);
    if (hit && performance.now() - hit.at < 1000) return hit.key;
    let key: KeyRecord | null;
    try {
      key = await this.s.keys.getKey(session.keyId);
    } catch (e) {
      if (!(e instanceof NotFoundError)) throw e;
      key = null;
    }
    if (this.keyCache.size >= 10_000) this.keyCache.clear();
    this.keyCache.set(session.keyId, { key, at: performance.now() });
    return key;
  }

  private async environment(session: SessionRow): Promise<EnvironmentConfig> {
    const [env] = await this.s.db.select().from(agentEnvironments).where(eq(agentEnvironments.id, session.environmentId));
    const templates = new Set(sandboxServiceOf(this.s).templates.keys());
    return env ? (env.config as unknown as EnvironmentConfig) : normalizeConfig(null, templates);
  }

  private async toolSpecs(agent: AgentRow, mcp: McpConnections): Promise<ToolSpec[]> {
    const out: ToolSpec[] = [];
    for (const t of agent.tools as unknown as AgentTool[]) {
      if (t.type === TOOLSET_TYPE) {
        for (const name of BUILTIN_TOOLS) if (resolveTool(agent, name)) out.push({ name, ...BUILTIN_DEFS[name] });
      } else if (t.type === "custom") {
        const c = t as CustomTool;
        out.push({ name: c.name, description: c.description, input_schema: c.input_schema });
      } else if (t.type === "mcp_toolset") {
        const server = (agent.mcpServers as unknown as McpServer[]).find((s) => s.name === t.mcp_server_name)!;
        for (const tool of await mcp.tools(server)) {
          const name = `${server.name}__${tool.name}`;
          if (resolveTool(agent, name)) out.push({ name, description: tool.description ?? "", input_schema: tool.inputSchema });
        }
      }
    }
    return out;
  }

  /** The events a model reply becomes: its text, then one tool-use event per call. */
  private replyEvents(agent: AgentRow, text: string, calls: { name: string; input: Record<string, unknown> }[], seen: number): NewSessionEvent[] {
    const out: NewSessionEvent[] = [];
    const mark = (e: NewSessionEvent) => ({ type: e.type, payload: { ...e.payload, _seen: seen } });
    if (text) out.push({ type: "agent.message", payload: { content: [{ type: "text", text }] } });
    for (const c of calls) {
      const r = resolveTool(agent, c.name);
      if (r?.kind === "custom") out.push({ type: "agent.custom_tool_use", payload: { name: c.name, input: c.input } });
      else if (r?.kind === "mcp")
        out.push({
          type: "agent.mcp_tool_use",
          payload: { name: r.name, mcp_server_name: r.server.name, input: c.input, evaluated_permission: r.policy === "always_ask" ? "ask" : "allow", evaluation: { type: r.policy } },
        });
      else
        out.push({
          type: "agent.tool_use",
          payload: { name: c.name, input: c.input, ...(r ? { evaluated_permission: r.policy === "always_ask" ? "ask" : "allow", evaluation: { type: r.policy } } : {}) },
        });
    }
    return out.map(mark);
  }

  /** Timings of the most recent turns (at most 1,000), oldest first. */
  recentTurns(): readonly TurnTiming[] {
    return this.turns;
  }

  private recordTurn(sessionId: string, t: { start: number; modelMs: number; toolMs: number }): void {
    const totalMs = performance.now() - t.start;
    const timing = { sessionId, totalMs, modelMs: t.modelMs, toolMs: t.toolMs, loopMs: Math.max(0, totalMs - t.modelMs - t.toolMs) };
    if (this.turns.push(timing) > 1000) this.turns.shift();
    this.s.log.debug("agent turn finished", timing);
  }

  private async run(session: SessionRow, ctl: { again: boolean; abort: AbortController }, startedAt = performance.now()): Promise<void> {
    const cacheKey = `${session.agentId}@${session.agentVersion}`;
    let agent = this.agentCache.get(cacheKey);
    if (!agent) {
      [agent] = await this.s.db
        .select()
        .from(agentVersions)
        .where(and(eq(agentVersions.id, session.agentId), eq(agentVersions.version, session.agentVersion)));
      if (agent) {
        if (this.agentCache.size >= 1000) this.agentCache.delete(this.agentCache.keys().next().value!);
        this.agentCache.set(cacheKey, agent);
      }
    }
    const mcp = new McpConnections(egressPolicyFromEnv(this.s.config.env));
    const events: SessionEventRow[] = [];
    let seen = 0;
    const refresh = async () => {
      for (;;) {
        const rows = await eventsAfter(this.s.db, session.id, seen);
        for (const r of rows) events.push(r);
        if (rows.length) seen = rows[rows.length - 1].seq;
        if (rows.length < 1000) break;
      }
    };
    // Where this turn's time goes: model calls, tools, and the rest (the loop's own work).
    let turn = { start: startedAt, modelMs: 0, toolMs: 0 };
    /** goIdle; a turn that ends is timed, and input arriving later starts a new one. */
    const idle = async (stopReason: Record<string, unknown>, before?: NewSessionEvent[], patch?: Partial<SessionRow>) => {
      const ended = await this.goIdle(session, seen, stopReason, before, patch);
      if (ended) {
        this.recordTurn(session.id, turn);
        turn = { start: performance.now(), modelMs: 0, toolMs: 0 };
      }
      return ended;
    };
    const resultEvent = (use: SessionEventRow, out: ToolOutcome): NewSessionEvent =>
      use.type === "agent.mcp_tool_use"
        ? { type: "agent.mcp_tool_result", payload: { mcp_tool_use_id: use.id, content: [{ type: "text", text: out.text }], is_error: out.isError } }
        : { type: "agent.tool_result", payload: { tool_use_id: use.id, content: [{ type: "text", text: out.text }], is_error: out.isError } };
    let steps = 0;
    try {
      for (;;) {
        await refresh();
        if (this.stopped) return;
        const a = analyze(logicalOrder(events));
        if (a.interrupted) {
          if (await idle({ type: "end_turn" })) {
            if (await this.resumeIfInput(session, seen)) continue;
            return;
          }
          continue;
        }
        const needsAction: string[] = [];
        let acted = false;
        for (const use of a.pending) {
          if (use.type === "agent.custom_tool_use") {
            needsAction.push(use.id);
            continue;
          }
          const r = agent ? resolveTool(agent, use.type === "agent.mcp_tool_use" ? `${use.payload.mcp_server_name}__${use.payload.name}` : String(use.payload.name)) : undefined;
          let out: ToolOutcome;
          let outbox: NewEvent[] = [];
          if (!r || r.kind === "custom") {
            out = { text: `tool '${String(use.payload.name)}' is not available to this agent`, isError: true };
          } else {
            const confirmation = a.confirmations.get(use.id);
            if (r.policy === "always_ask" && !confirmation) {
              needsAction.push(use.id);
              continue;
            }
            if (confirmation?.result === "deny") {
              out = { text: confirmation.deny_message || "the user denied this tool call", isError: true };
            } else if (r.kind === "builtin") {
              const toolStart = performance.now();
              const env = await this.environment(session);
              const sandboxId = await ensureSandbox(this.s, session, env, (id) => installSkills(this.s, agent!, id));
              // An interrupt kills a command still running; as with an aborted model or MCP
              // call, no result is recorded (the history closes the tool use as interrupted).
              // On shutdown or a lost lease the tool use stays open for the next owner.
              ({ out, events: outbox } = await runToolWithSkills(this.s, session, agent!, sandboxId, r.name, (use.payload.input ?? {}) as Record<string, any>, ctl.abort.signal));
              turn.toolMs += performance.now() - toolStart;
              ctl.abort.signal.throwIfAborted();
            } else {
              const toolStart = performance.now();
              try {
                out = await mcp.call(r.server, r.name, (use.payload.input ?? {}) as Record<string, unknown>, ctl.abort.signal);
              } catch (e) {
                if (ctl.abort.signal.aborted) throw e;
                out = { text: `MCP tool call failed: ${(e as Error).message}`, isError: true };
              }
              turn.toolMs += performance.now() - toolStart;
            }
          }
          await this.write(session, [resultEvent(use, out)], {}, outbox);
          acted = true;
          // A user.interrupt written meanwhile stops the turn before the next tool.
          await refresh();
          if (analyze(logicalOrder(events)).interrupted) break;
        }
        if (acted) continue;
        if (needsAction.length) {
          if (await idle({ type: "requires_action", event_ids: needsAction })) {
            if (await this.resumeIfInput(session, seen)) continue;
            return;
          }
          continue;
        }
        if (!a.needsModel) {
          if (await idle({ type: "end_turn" })) {
            if (await this.resumeIfInput(session, seen)) continue;
            return;
          }
          continue;
        }
        if (!agent) throw new ModelCallError("model_request_failed_error", "the session's agent version no longer exists");
        if (++steps > this.opts.maxSteps) {
          await this.fail(session, seen, "tool_use_limit_reached_error", `the turn reached ${this.opts.maxSteps} model calls (AGENT_MAX_STEPS)`);
          return;
        }
        const key = await this.keyOf(session);
        let tools: ToolSpec[];
        try {
          tools = await this.toolSpecs(agent, mcp);
        } catch (e) {
          if (e instanceof McpConnectionError) {
            await this.fail(session, seen, "mcp_connection_failed_error", e.message);
            return;
          }
          throw e;
        }
        const modelSeen = seen;
        const modelStart = performance.now();
        const reply = await callModel(this.s, key, String(agent.model.id), await systemWithSkills(this.s, agent), buildHistory(logicalOrder(events)), tools, ctl.abort.signal);
        turn.modelMs += performance.now() - modelStart;
        const usage = { input_tokens: session.usage.input_tokens + reply.usage.input, output_tokens: session.usage.output_tokens + reply.usage.output };
        session.usage = usage;
        let evs = this.replyEvents(agent, reply.text, reply.toolCalls, modelSeen);
        // A reply with neither text nor tool calls still ends the turn visibly.
        if (!evs.length) evs = [{ type: "agent.message", payload: { content: [], _seen: modelSeen } }];
        if (!reply.toolCalls.length) {
          // The turn ends here: the answer and the idle status commit together.
          if (await idle({ type: "end_turn" }, evs, { usage })) {
            if (await this.resumeIfInput(session, seen)) continue;
            return;
          }
          continue;
        }
        await this.write(session, evs, { usage });
      }
    } catch (e) {
      if (e instanceof LeaseLost || this.stopped) return;
      if (ctl.abort.signal.aborted) {
        if (ctl.abort.signal.reason === "interrupt") {
          ctl.again = true;
          return;
        }
        return;
      }
      if (e instanceof ModelCallError) {
        await this.fail(session, seen, e.kind, e.message);
        return;
      }
      if (e instanceof SandboxSetupError) {
        await this.fail(session, seen, "unknown_error", e.message);
        return;
      }
      this.s.log.error("agent loop step failed", { sessionId: session.id, err: e });
      await this.fail(session, seen, "unknown_error", e instanceof ApiError ? e.message : "internal error in the agent loop");
    } finally {
      await mcp.close();
    }
  }

  /** session.error and idle in one commit: a failed turn never leaves the session running. */
  private async fail(session: SessionRow, seen: number, kind: string, message: string): Promise<void> {
    try {
      const error: NewSessionEvent = { type: "session.error", payload: { error: { type: kind, message, retry_status: { type: "terminal" } } } };
      // If input arrived meanwhile, the session stays running and the recovery worker picks it up once the lease is released.
      await this.goIdle(session, seen, { type: "retries_exhausted" }, [error]);
    } catch (e) {
      if (!(e instanceof LeaseLost)) this.s.log.error("agent session error not recorded", { sessionId: session.id, err: e });
    }
  }

  /** Sandboxes of sessions idle longer than AGENT_SANDBOX_IDLE_MS are paused (resumed on the next tool call). */
  private async pauseIdleSandboxes(): Promise<void> {
    const due = await this.s.db
      .select()
      .from(agentSessions)
      .where(and(eq(agentSessions.status, "idle"), isNotNull(agentSessions.sandboxId), lt(agentSessions.idleSince, sql`now() - (${this.opts.sandboxIdleMs} * interval '1 millisecond')`)))
      .limit(20);
    for (const row of due) {
      try {
        await sandboxServiceOf(this.s).pause(row.organizationId, row.sandboxId!);
      } catch (e) {
        if (!(e instanceof ApiError)) this.s.log.warn("pausing an idle session sandbox failed", { sessionId: row.id, err: e });
      }
      await this.s.db.update(agentSessions).set({ idleSince: null }).where(and(eq(agentSessions.id, row.id), eq(agentSessions.status, "idle")));
    }
  }
}

const runtimes = new WeakMap<Services, AgentRuntime>();
export function runtimeOf(s: Services): AgentRuntime {
  let r = runtimes.get(s);
  if (!r) runtimes.set(s, (r = new AgentRuntime(s)));
  return r;
}
