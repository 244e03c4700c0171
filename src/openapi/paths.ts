/**
 * Router paths that cannot be published as they are: a wildcard (`/v1/models/*`, whose
 * model names contain slashes) or one parameter that carries a model and an action
 * (`/v1beta/models/{call}` for `{model}:generateContent`). Each is published as the
 * paths a client calls, with their parameters; routing is unchanged.
 */
import type { TSchema } from "@sinclair/typebox";
import { DECLARED, type Declared } from "./declare";

export interface DocumentPath {
  path: string;
  /** Only these methods of the router path (default: all). */
  methods?: string[];
  operationId?: string;
  summary?: string;
  /** The path parameters of `path`, name -> description. */
  params?: Record<string, string>;
  /** The JSON request body of this path, when the router path takes several. */
  body?: TSchema;
  /** The answers of this path (`responds(...)`), when they differ from the router path's. */
  declared?: { [DECLARED]: Declared };
}

export function publishPaths(paths: Record<string, Record<string, any>>, rewrites: Record<string, DocumentPath[]>): Record<string, Record<string, any>> {
  const out: Record<string, Record<string, any>> = {};
  for (const [path, item] of Object.entries(paths)) {
    const targets = rewrites[path];
    if (!targets) {
      out[path] = { ...out[path], ...item };
      continue;
    }
    for (const target of targets) {
      for (const [method, op] of Object.entries(item)) {
        if (target.methods && !target.methods.includes(method)) continue;
        const copy = JSON.parse(JSON.stringify(op));
        if (target.operationId) copy.operationId = target.operationId;
        if (target.summary) copy.summary = target.summary;
        if (target.params) {
          const others = (copy.parameters ?? []).filter((p: { in: string }) => p.in !== "path");
          const own = Object.entries(target.params).map(([name, description]) => ({ name, in: "path", required: true, description, schema: { type: "string" } }));
          copy.parameters = [...own, ...others];
        }
        if (target.body && copy.requestBody?.content?.["application/json"]) copy.requestBody.content["application/json"].schema = JSON.parse(JSON.stringify(target.body));
        if (target.declared) copy[DECLARED] = JSON.parse(JSON.stringify(target.declared[DECLARED]));
        out[target.path] = { ...out[target.path], [method]: copy };
      }
    }
  }
  return out;
}
