import { Elysia, t } from "elysia";
import { UNREACHABLE_RETRY_AFTER_S } from "./db/faults";
import type { Services } from "./services";

/** Liveness (process up) and readiness (database answers) for orchestrators. */
export function healthRoutes(s: Services) {
  const detail = (operationId: string, summary: string) => ({ tags: ["operations"], operationId, summary });
  return new Elysia()
    // The process that answered (a multi-worker service spreads requests over several).
    .get("/healthz", ({ set }) => ((set.headers["x-served-by-pid"] = String(process.pid)), { status: "ok" as const }), { response: t.Object({ status: t.Literal("ok") }), detail: detail("getHealth", "Liveness: the process is up") })
    .get(
      "/readyz",
      async ({ set }) => {
        // Not ready while the database fails to answer or a fault (unreachable, disk full) is in force.
        if (await s.availability.ready()) return { status: "ready" as const, database: s.database.kind };
        set.status = 503;
        set.headers["retry-after"] = String(s.availability.fault?.retryAfter ?? UNREACHABLE_RETRY_AFTER_S);
        return { status: "unavailable" as const, database: s.database.kind };
      },
      {
        response: {
          200: t.Object({ status: t.Literal("ready"), database: t.String() }),
          503: t.Object({ status: t.Literal("unavailable"), database: t.String() }),
        },
        detail: detail("getReadiness", "Readiness: the database answers and has space to write (503 otherwise)"),
      },
    );
}
