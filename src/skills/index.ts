import type { RouteModule } from "../app";
import { skillRoutes, skillsSurface } from "./routes";

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
