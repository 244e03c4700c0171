import { and, eq, isNotNull, isNull, lt, or, sql } from "drizzle-orm";
import { ApiError } from "../http/errors";
import { type KeyRecord, NotFoundError } from "../keys/keys";
import { sandboxServiceOf } from "../sandboxes";
import { observabilityFor } from "../observability/wiring";
import type { Services } from "../services";
import type { Settings } from "../settings";
import type { SessionHooks } from "./hooks";
import { LeaseLost, SessionLease } from "./lease";
import type { NewSessionEvent } from "./log";
import { gatewayMcpFor } from "./gateway-mcp";
import { McpConnections } from "./mcp";
import { type AgentRow, agentSessions, agentVersions, type SessionRow } from "./schema";
import { type Decision, knownFailure, Turn } from "./turn";


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

/**
 * The agent loop of this process: which sessions it drives (one loop per session at a
 * time, across processes, through a lease: lease.ts), and the one loop that carries out
 * what each step of a turn decides (turn.ts): record events, go idle - or continue when
 * input arrived meanwhile - or fail the turn. Background work: crash recovery of
 * sessions left running, pausing idle sandboxes.
 */
export class AgentRuntime {
  private readonly runs = new Map<string, { again: boolean; abort: AbortController }>();
  private readonly drives = new Set<Promise<void>>();
  private readonly lease: SessionLease;
  private readonly hooks: SessionHooks[] = [];
  /** Agent versions are immutable but for archived_at, which the loop does not read. */
  private readonly agentCache = new Map<string, AgentRow>();
  /**
   * Session keys, re-read at most once a second: `spent` is updated by the batching
   * usage meter anyway (every 250 ms by default), so a fresher read would not make the
   * spending limit exact, and a turn saves a round trip.
   */
  private readonly keyCache = new Map<string, { key: KeyRecord | null; at: number }>();
  private timers: ReturnType<typeof setInterval>[] = [];
  /** The last turns' timings, newest last (diagnostics and the benchmark). */
  private readonly turns: TurnTiming[] = [];
  private stopped = false;
  readonly opts: Settings["agents"];

  constructor(private readonly s: Services) {
    this.opts = s.config.agents;
    this.lease = new SessionLease(s, this.opts.leaseMs);
  }

  /** Adds what another domain contributes to sessions (see SessionHooks). */
  use(hooks: SessionHooks): void {
    this.hooks.push(hooks);
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

  /** SQL for a send/create transaction that turns a session running (see SessionLease.leaseIfFree). */
  leaseIfFree() {
    return this.lease.leaseIfFree();
  }

  /** Timings of the most recent turns (at most 1,000), oldest first. */
  recentTurns(): readonly TurnTiming[] {
    return this.turns;
  }

  private async drive(sessionId: string, hint?: SessionRow): Promise<void> {
    const ctl = { again: false, abort: new AbortController() };
    // The turn starts when the loop picks the input up (before it takes the lease).
    let startedAt = performance.now();
    this.runs.set(sessionId, ctl);
    try {
      let session = await this.lease.take(sessionId, hint);
      if (!session) return;
      const renew = setInterval(() => {
        this.lease.renew(sessionId).then(
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
          // Input arrived while the turn was ending: take the lease again (going idle released it).
          startedAt = performance.now();
          session = await this.lease.take(sessionId);
        }
      } finally {
        clearInterval(renew);
        await this.lease.release(sessionId);
      }
    } finally {
      this.runs.delete(sessionId);
    }
  }

  /** Runs the session's turns while this process holds the lease: each step decides, this loop records. */
  private async run(session: SessionRow, ctl: { again: boolean; abort: AbortController }, startedAt: number): Promise<void> {
    const mcp = new McpConnections(this.s.config.egress, gatewayMcpFor(this.s, session, (x) => this.keyOf(x)));
    const signal = ctl.abort.signal;
    const turn = new Turn(
      { s: this.s, session, agent: await this.agentOf(session), mcp, hooks: this.hooks, signal, maxSteps: this.opts.maxSteps, keyOf: (x) => this.keyOf(x) },
      startedAt,
    );
    try {
      for (;;) {
        await turn.refresh();
        if (this.stopped) return;
        const d: Decision = await turn.next();
        if (d.kind === "fail") return await this.fail(session, turn.seen, d.error, d.message);
        if (d.patch) Object.assign(session, d.patch);
        if (d.kind === "append") {
          await this.lease.write(session, d.events, d.patch, d.outbox);
          continue;
        }
        // Input written after what this step saw keeps the session running: the turn goes on.
        if (!(await this.lease.goIdle(session, turn.seen, d.stopReason, d.before, d.patch))) continue;
        this.recordTurn(session.id, turn.timing);
        turn.restart();
        if (!(await this.lease.resumeIfInput(session, turn.seen))) return;
      }
    } catch (e) {
      if (e instanceof LeaseLost || this.stopped) return;
      if (signal.aborted) {
        if (signal.reason === "interrupt") ctl.again = true;
        return;
      }
      const known = knownFailure(e);
      if (!known) this.s.log.error("agent loop step failed", { sessionId: session.id, err: e });
      await this.fail(session, turn.seen, known?.error ?? "unknown_error", known?.message ?? (e instanceof ApiError ? e.message : "internal error in the agent loop"));
    } finally {
      await mcp.close();
    }
  }

  /** session.error and idle in one commit: a failed turn never leaves the session running. */
  private async fail(session: SessionRow, seen: number, kind: string, message: string): Promise<void> {
    try {
      const error: NewSessionEvent = { type: "session.error", payload: { error: { type: kind, message, retry_status: { type: "terminal" } } } };
      // If input arrived meanwhile, the session stays running and the recovery worker picks it up once the lease is released.
      await this.lease.goIdle(session, seen, { type: "retries_exhausted" }, [error]);
    } catch (e) {
      if (!(e instanceof LeaseLost)) this.s.log.error("agent session error not recorded", { sessionId: session.id, err: e });
    }
  }

  private recordTurn(sessionId: string, t: { start: number; modelMs: number; toolMs: number }): void {
    const totalMs = performance.now() - t.start;
    const timing = { sessionId, totalMs, modelMs: t.modelMs, toolMs: t.toolMs, loopMs: Math.max(0, totalMs - t.modelMs - t.toolMs) };
    if (this.turns.push(timing) > 1000) this.turns.shift();
    this.s.log.debug("agent turn finished", timing);
    observabilityFor(this.s)?.agentTurn(timing);
  }

  private async agentOf(session: SessionRow): Promise<AgentRow | undefined> {
    const cacheKey = `${session.agentId}@${session.agentVersion}`;
    const hit = this.agentCache.get(cacheKey);
    if (hit) return hit;
    const [agent] = await this.s.db
      .select()
      .from(agentVersions)
      .where(and(eq(agentVersions.id, session.agentId), eq(agentVersions.version, session.agentVersion)));
    if (agent) {
      if (this.agentCache.size >= 1000) this.agentCache.delete(this.agentCache.keys().next().value!);
      this.agentCache.set(cacheKey, agent);
    }
    return agent;
  }

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
