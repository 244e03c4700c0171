import type { NewEvent } from "../events/record";
import type { Services } from "../services";
import type { AgentRow, SessionRow } from "./schema";
import type { ToolOutcome } from "./tools";

/** A built-in tool that ran in the session's sandbox, as observers see it. */
export interface BuiltinRun {
  session: SessionRow;
  agent: AgentRow;
  sandboxId: string;
  name: string;
  input: Record<string, any>;
  out: ToolOutcome;
  durationMs: number;
}

/**
 * What other domains add to a session without the loop knowing them (skills: files in
 * the sandbox, a section of the system prompt, events when their scripts run).
 */
export interface SessionHooks {
  /** The system prompt the model gets, from the one so far (the agent's own first). */
  systemPrompt?(s: Services, agent: AgentRow, system: string | null): Promise<string | null>;
  /** Runs once on each new sandbox of a session, after its packages are installed. */
  prepareSandbox?(s: Services, agent: AgentRow, sandboxId: string): Promise<void>;
  /**
   * Sees a finished built-in tool run; returns events of other resources it caused,
   * which commit in the same transaction as the tool's result (so exactly once).
   */
  afterBuiltinRun?(s: Services, run: BuiltinRun): Promise<NewEvent[]>;
}
