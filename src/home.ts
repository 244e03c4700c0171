import { Elysia, t } from "elysia";
import { SERVICE_VERSION } from "./version";

/** GET /: what this service is and where to go next (its reference, health, model list). */
export function homeRoutes() {
  const index = {
    name: "gateway",
    description: "Model gateway, sandbox and agents API",
    version: SERVICE_VERSION,
    docs: "/docs",
    openapi: "/openapi.json",
    health: "/healthz",
    ready: "/readyz",
    models: "/v1/models",
  };
  return new Elysia().get("/", () => index, {
    response: t.Object({
      name: t.String(),
      description: t.String(),
      version: t.String(),
      docs: t.String({ description: "API reference page (no credentials)" }),
      openapi: t.String({ description: "OpenAPI 3.1 document (no credentials)" }),
      health: t.String(),
      ready: t.String(),
      models: t.String({ description: "Model list (needs an API key)" }),
    }),
    detail: { tags: ["operations"], operationId: "getServiceIndex", summary: "Service index", description: "Name, version and links to the API reference, the OpenAPI document and the health checks. No credentials." },
  });
}
