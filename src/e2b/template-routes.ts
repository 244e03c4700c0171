/**
 * E2B's template endpoints, as the `e2b` package's Template SDK calls them (E2B's
 * spec/openapi.yml, tag `templates`): request a build (`POST /v3/templates`), get an upload
 * link for a COPY step's files by hash, start the build with its steps, poll its status and
 * logs, list, get, delete, check an alias, and tags. They sit on the one template service,
 * so a template built here is the same template on `/templates`, and
 * `Sandbox.create(name)` starts it on either surface.
 */
import { Elysia, t } from "elysia";
import { requestContext } from "../http/core";
import { ApiError } from "../http/errors";
import type { BuildSpec } from "../templates/build-spec";
import type { TemplateBuildRow } from "../templates/schema";
import type { TemplateInfo, TemplateService } from "../templates/service";
import type { LogEntry } from "../templates/store";
import { ENVD_VERSION } from "./control-routes";

const hide = { hide: true };
const MAX_LOGS = 100;
const LEVELS = ["debug", "info", "warn", "error"];

export function e2bTemplateRoutes(templates: TemplateService, publicUrl: string | undefined) {
  const template = (i: TemplateInfo) => ({
    templateID: i.id,
    buildID: i.buildId ?? "",
    cpuCount: Math.max(1, Math.ceil(i.cpuCount)),
    memoryMB: i.memoryMB,
    diskSizeMB: i.diskSizeMB,
    public: i.shared,
    aliases: [i.name],
    names: [i.name],
    createdAt: (i.createdAt ?? new Date(0)).toISOString(),
    updatedAt: (i.updatedAt ?? i.createdAt ?? new Date(0)).toISOString(),
    createdBy: null,
    lastSpawnedAt: i.lastSpawnedAt ? i.lastSpawnedAt.toISOString() : null,
    spawnCount: i.spawnCount,
    buildCount: i.buildCount,
    envdVersion: ENVD_VERSION,
    buildStatus: i.buildStatus,
  });
  const build = (b: TemplateBuildRow) => ({
    buildID: b.id,
    status: b.status,
    createdAt: b.createdAt.toISOString(),
    updatedAt: b.updatedAt.toISOString(),
    ...(b.finishedAt ? { finishedAt: b.finishedAt.toISOString() } : {}),
    cpuCount: Math.max(1, Math.ceil(b.cpuCount ?? 1)),
    memoryMB: b.memoryMB ?? 2048,
    envdVersion: ENVD_VERSION,
  });
  const levelFilter = (level: string | undefined) => {
    if (level === undefined) return () => true;
    const min = LEVELS.indexOf(level);
    if (min < 0) throw new ApiError(400, `level must be one of ${LEVELS.join(", ")}`);
    return (e: LogEntry) => LEVELS.indexOf(e.level) >= min;
  };
  const count = (v: string | undefined, name: string, dflt: number, max: number) => {
    if (v === undefined) return dflt;
    const n = Number(v);
    if (!/^[0-9]{1,9}$/.test(v) || n > max) throw new ApiError(400, `${name} must be an integer from 0 to ${max}`);
    return n;
  };
  const requestBody = t.Object(
    { name: t.Optional(t.String({ maxLength: 140 })), alias: t.Optional(t.String({ maxLength: 140 })), tags: t.Optional(t.Array(t.String({ maxLength: 140 }), { maxItems: 64 })), cpuCount: t.Optional(t.Number()), memoryMB: t.Optional(t.Integer()) },
    { additionalProperties: true },
  );
  const request = async (org: string, body: { name?: string; alias?: string; tags?: string[]; cpuCount?: number; memoryMB?: number }) => {
    const ref = body.name ?? body.alias;
    if (!ref) throw new ApiError(400, "name is required");
    return templates.requestBuild(org, ref, body.tags ?? [], { cpuCount: body.cpuCount, memoryMB: body.memoryMB });
  };

  return new Elysia({ prefix: "/e2b" })
    .use(requestContext)
    .post(
      "/v3/templates",
      async ({ auth, body, set }) => {
        const r = await request(auth.organizationId, body);
        set.status = 202;
        return { templateID: r.template.id, buildID: r.build.id, public: false, names: [r.template.name], aliases: [r.template.name], tags: r.tags };
      },
      { body: requestBody, detail: hide },
    )
    .post(
      "/v2/templates",
      async ({ auth, body, set }) => {
        const r = await request(auth.organizationId, body);
        set.status = 202;
        return { ...template(await templates.info(r.template)), buildID: r.build.id };
      },
      { body: requestBody, detail: hide },
    )
    .get("/templates", async ({ auth }) => (await templates.list(auth.organizationId)).map(template), { query: t.Object({ teamID: t.Optional(t.String()) }), detail: hide })
    .get("/v2/templates", async ({ auth }) => (await templates.list(auth.organizationId)).map(template), {
      query: t.Object({ teamID: t.Optional(t.String()), nextToken: t.Optional(t.String()), limit: t.Optional(t.String()) }),
      detail: hide,
    })
    .get(
      "/templates/:templateID",
      async ({ auth, params }) => {
        const { info, builds } = await templates.get(auth.organizationId, params.templateID);
        const { templateID, public: pub, aliases, names, createdAt, updatedAt, lastSpawnedAt, spawnCount } = template(info);
        return { templateID, public: pub, aliases, names, createdAt, updatedAt, lastSpawnedAt, spawnCount, builds: builds.map(build) };
      },
      { detail: hide },
    )
    .delete(
      "/templates/:templateID",
      async ({ auth, params, set }) => {
        // E2B deletes a snapshot as the template it is: a snapshot of that id or name goes first.
        if (!(await templates.d.sandboxes.deleteSnapshot(auth.organizationId, params.templateID))) await templates.delete(auth.organizationId, params.templateID);
        set.status = 204;
        return null;
      },
      { detail: hide },
    )
    .get(
      "/templates/:templateID/files/:hash",
      async ({ auth, params, request, set }) => {
        await templates.d.store.get(auth.organizationId, params.templateID);
        set.status = 201;
        if (await templates.d.uploads.present(auth.organizationId, params.hash)) return { present: true };
        const origin = publicUrl ?? new URL(request.url).origin;
        return { present: false, url: origin + templates.d.uploads.link(auth.organizationId, params.hash) };
      },
      { detail: hide },
    )
    .post(
      "/v2/templates/:templateID/builds/:buildID",
      async ({ auth, params, body, set }) => {
        await templates.startBuild(auth.organizationId, params.templateID, params.buildID, body as BuildSpec);
        set.status = 202;
        return null;
      },
      { body: t.Unknown(), detail: hide },
    )
    .get(
      "/templates/:templateID/builds/:buildID/status",
      async ({ auth, params, query }) => {
        const offset = count(query.logsOffset, "logsOffset", 0, 2 ** 31 - 1);
        const limit = count(query.limit, "limit", MAX_LOGS, MAX_LOGS);
        const { template: tpl, build: b, logs } = await templates.status(auth.organizationId, params.templateID, params.buildID, offset, limit);
        const entries = logs.filter(levelFilter(query.level));
        return {
          templateID: tpl.id,
          buildID: b.id,
          status: b.status,
          logs: entries.map((e) => `[${e.timestamp}] ${e.message}`),
          logEntries: entries,
          ...(b.status === "error" && b.reason ? { reason: { message: b.reason.message, ...(b.reason.step ? { step: b.reason.step } : {}), logEntries: [] } } : {}),
        };
      },
      { query: t.Object({ logsOffset: t.Optional(t.String()), limit: t.Optional(t.String()), level: t.Optional(t.String()) }), detail: hide },
    )
    .get(
      "/templates/:templateID/builds/:buildID/logs",
      async ({ auth, params, query }) => {
        const limit = count(query.limit, "limit", MAX_LOGS, MAX_LOGS);
        const { logs } = await templates.status(auth.organizationId, params.templateID, params.buildID, 0, 100_000);
        const cursor = query.cursor === undefined ? undefined : count(query.cursor, "cursor", 0, Number.MAX_SAFE_INTEGER);
        let entries = logs.filter(levelFilter(query.level));
        if (query.direction === "backward") {
          if (cursor !== undefined) entries = entries.filter((e) => Date.parse(e.timestamp) <= cursor);
          entries = entries.slice(-limit);
        } else {
          if (cursor !== undefined) entries = entries.filter((e) => Date.parse(e.timestamp) >= cursor);
          entries = entries.slice(0, limit);
        }
        return { logs: entries };
      },
      { query: t.Object({ cursor: t.Optional(t.String()), limit: t.Optional(t.String()), direction: t.Optional(t.String()), level: t.Optional(t.String()), source: t.Optional(t.String()) }), detail: hide },
    )
    .get(
      "/templates/aliases/:alias",
      async ({ auth, params }) => {
        const own = await templates.d.store.find(auth.organizationId, params.alias);
        if (own) return { templateID: own.id, public: false };
        if (templates.d.sandboxes.templates.has(params.alias)) return { templateID: params.alias, public: true };
        throw new ApiError(404, `template '${params.alias}' not found`);
      },
      { detail: hide },
    )
    .post(
      "/templates/tags",
      async ({ auth, body, set }) => {
        const r = await templates.d.store.assignTags(auth.organizationId, body.target, body.tags);
        set.status = 201;
        return { tags: r.tags, buildID: r.buildId };
      },
      { body: t.Object({ target: t.String({ minLength: 1, maxLength: 300 }), tags: t.Array(t.String({ maxLength: 140 }), { minItems: 1, maxItems: 64 }) }), detail: hide },
    )
    .delete(
      "/templates/tags",
      async ({ auth, body, set }) => {
        await templates.d.store.removeTags(auth.organizationId, body.name, body.tags);
        set.status = 204;
        return null;
      },
      { body: t.Object({ name: t.String({ minLength: 1, maxLength: 300 }), tags: t.Array(t.String({ maxLength: 140 }), { minItems: 1, maxItems: 64 }) }), detail: hide },
    )
    .get(
      "/templates/:templateID/tags",
      async ({ auth, params }) => {
        const tpl = await templates.d.store.get(auth.organizationId, params.templateID);
        return (await templates.d.store.tags(tpl.id)).map((x) => ({ tag: x.tag, buildID: x.buildId, createdAt: x.createdAt.toISOString() }));
      },
      { detail: hide },
    );
}
