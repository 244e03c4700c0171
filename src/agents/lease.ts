import { randomUUID } from "node:crypto";
import { hostname } from "node:os";
import { and, eq, isNull, lt, or, sql } from "drizzle-orm";
import { type NewEvent, recordEvent } from "../events/record";
import type { Services } from "../services";
import { appendInTx, busOf, eventsAfter, type NewSessionEvent } from "./log";
import { agentSessionEvents, agentSessions, type SessionEventRow, type SessionRow } from "./schema";

/** Thrown when this process no longer holds the session's lease: it must stop writing at once. */
export class LeaseLost extends Error {}

const INPUT_TYPES = new Set(["user.message", "user.tool_confirmation", "user.custom_tool_result"]);

/** SQL: has an event been written after `seen` (input the loop has not looked at yet)? */
const unseenInput = (sessionId: string, seen: number) =>
  sql`exists (select 1 from ${agentSessionEvents} where ${agentSessionEvents.sessionId} = ${sessionId} and ${agentSessionEvents.seq} > ${seen})`;

/**
 * One loop per session at a time, across processes: a lease on the session row, taken
 * by this process's `owner`, renewed while the loop runs. Every write of the loop is
 * fenced by it (the update matches only while this process holds the lease), so a
 * process that lost it - paused, partitioned - can never write after the next owner.
 */
export class SessionLease {
  readonly owner = `${hostname()}:${process.pid}:${randomUUID().slice(0, 8)}`;
  /** Sessions whose lease the last idle transition released (no separate release statement needed). */
  private readonly released = new Set<string>();

  constructor(
    private readonly s: Services,
    private readonly leaseMs: number,
  ) {}

  private until() {
    return sql`now() + (${this.leaseMs} * interval '1 millisecond')`;
  }

  /**
   * SQL for a send/create transaction that turns a session running: take the lease for
   * this process when it is free, so the loop starts without another commit.
   */
  leaseIfFree(): { leaseOwner: ReturnType<typeof sql>; leaseUntil: ReturnType<typeof sql> } {
    const free = sql`(${agentSessions.leaseOwner} is null or ${agentSessions.leaseUntil} < now())`;
    return {
      leaseOwner: sql`case when ${free} then ${this.owner} else ${agentSessions.leaseOwner} end`,
      leaseUntil: sql`case when ${free} then ${this.until()} else ${agentSessions.leaseUntil} end`,
    };
  }

  /**
   * The running session with its lease held by this process, or undefined when another
   * process drives it (or it is not running). A send or create here may already have
   * taken the lease in its own transaction (one commit less per turn; `hint` is the row
   * it committed); otherwise it is taken now.
   */
  async take(id: string, hint?: SessionRow): Promise<SessionRow | undefined> {
    this.released.delete(id);
    if (hint && hint.status === "running" && hint.leaseOwner === this.owner) return hint;
    return (await this.held(id)) ?? (await this.acquire(id));
  }

  /** The session row when this process already holds its lease (taken by a send or create here). */
  private async held(id: string): Promise<SessionRow | undefined> {
    const [row] = await this.s.db.select().from(agentSessions).where(eq(agentSessions.id, id));
    return row && row.leaseOwner === this.owner && row.leaseUntil && row.leaseUntil.getTime() > Date.now() ? row : undefined;
  }

  private async acquire(id: string): Promise<SessionRow | undefined> {
    const [row] = await this.s.db
      .update(agentSessions)
      .set({ leaseOwner: this.owner, leaseUntil: this.until() })
      .where(and(eq(agentSessions.id, id), eq(agentSessions.status, "running"), this.freeOrMine()))
      .returning();
    return row;
  }

  private freeOrMine() {
    return or(isNull(agentSessions.leaseOwner), lt(agentSessions.leaseUntil, sql`now()`), eq(agentSessions.leaseOwner, this.owner));
  }

  async renew(id: string): Promise<boolean> {
    const rows = await this.s.db
      .update(agentSessions)
      .set({ leaseUntil: this.until() })
      .where(and(eq(agentSessions.id, id), eq(agentSessions.leaseOwner, this.owner)))
      .returning({ id: agentSessions.id });
    return rows.length > 0;
  }

  /** Gives the lease up when the loop stops (unless going idle released it already). */
  async release(id: string): Promise<void> {
    if (this.released.delete(id)) return;
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
  async write(session: SessionRow, events: NewSessionEvent[], patch: Partial<SessionRow> = {}, outbox: NewEvent[] = []): Promise<SessionEventRow[]> {
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
  async goIdle(session: SessionRow, seen: number, stopReason: Record<string, unknown>, before: NewSessionEvent[] = [], patch: Partial<SessionRow> = {}): Promise<boolean> {
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
  async resumeIfInput(session: SessionRow, seen: number): Promise<boolean> {
    const late = (await eventsAfter(this.s.db, session.id, seen)).filter((e) => INPUT_TYPES.has(e.type));
    if (!late.length) return false;
    const back = await this.s.db.transaction(async (tx) => {
      const [r] = await tx
        .update(agentSessions)
        .set({ leaseOwner: this.owner, leaseUntil: this.until() })
        .where(and(eq(agentSessions.id, session.id), this.freeOrMine()))
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
}
