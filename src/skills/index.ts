import type { SessionHooks } from "../agents/hooks";
import type { RouteModule } from "../http/route-module";
import { skillRoutes, skillsSurface } from "./routes";
import { skillRunEvents } from "./runs";
import { installSkills, systemWithSkills } from "./sandbox";

/**
 * Skills: versioned instruction bundles (SKILL.md plus files) stored in the database,
 * referenced by agents, installed into sessions' sandboxes (sandbox.ts) and announced
 * to the model in the system prompt; runs of their scripts emit
 * `router.skill.completed` (runs.ts).
 */
export const skillsModule: RouteModule = {
  surfaces: [skillsSurface],
  routes: skillRoutes,
};

/** What skills add to an agent session: their files in its sandbox, their list in the system prompt, events when their scripts run. */
export const skillSessionHooks: SessionHooks = {
  systemPrompt: systemWithSkills,
  prepareSandbox: installSkills,
  afterBuiltinRun: skillRunEvents,
};
