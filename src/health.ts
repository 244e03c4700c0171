import { Elysia, t } from "elysia";
import type { Services } from "./services";

/** Liveness (process up) and readiness (database answers) for orchestrators. */
export function healthRoutes(s: Services) {
  const detail = (operationId: string, summary: string) => ({ tags: ["operations"], operationId, summary });
  return new Elysia()
    .get("/healthz", () => ({ status: "ok" as const }), { response: t.Object({ status: t.Literal("ok") }), detail: detail("getHealth", "Liveness: the process is up") })
    .get(
      "/readyz",
      async ({ set }) => {
        try {
          await s.database.ping();
          return { status: "ready" as const, database: s.database.kind };
        } catch {
          set.status = 503;
          return { status: "unavailable" as const, database: s.database.kind };
        }
      },
      {
        response: {
          200: t.Object({ status: t.Literal("ready"), database: t.String() }),
          503: t.Object({ status: t.Literal("unavailable"), database: t.String() }),
        },
        detail: detail("getReadiness", "Readiness: the database answers (503 otherwise)"),
      },
    );
}
