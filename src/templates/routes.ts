/**
 * Templates on our own surface, `/templates`, in the spec's sandbox family (`{code, message}`
 * errors, Bearer or X-API-Key, the `sandboxes` scope): list, get, delete, and builds from a Dockerfile or from E2B's step
 * list, with their status and log. `gateway templates build` (src/templates/cli.ts) is a
 * client of these routes.
 */
import { Elysia, t } from "elysia";
import { requestContext } from "../http/core";
import { ApiError } from "../http/errors";
import { named, responds } from "../openapi/declare";
import type { BuildSpec } from "./build-spec";
import { DockerfileError, parseDockerfile } from "./dockerfile";
import type { TemplateBuildRow } from "./schema";
import type { TemplateInfo, TemplateService } from "./service";

const tags = ["templates"];
const ErrorSchema = t.Object({ code: t.Integer(), message: t.String() });

const TemplateSchema = named(
  "Template",
  t.Object({
    templateID: t.String({ description: "`tpl_...` for an organization's own; the name for a shared one" }),
    name: t.String({ description: "What a create's `templateID` names (with `:tag` for another tag than `default`)" }),
    shared: t.Boolean({ description: "A configured template every organization sees, read-only" }),
    description: t.Optional(t.String()),
    buildStatus: t.String({ enum: ["waiting", "building", "ready", "error"], description: "The latest build's" }),
    buildID: t.Optional(t.String({ description: "The build the `default` tag points at" })),
    tags: t.Array(t.String()),
    buildCount: t.Integer(),
    spawnCount: t.Integer(),
    createdAt: t.Optional(t.String({ format: "date-time" })),
    updatedAt: t.Optional(t.String({ format: "date-time" })),
  }),
);
const LogEntrySchema = t.Object({ timestamp: t.String({ format: "date-time" }), level: t.String({ enum: ["debug", "info", "warn", "error"] }), message: t.String(), step: t.Optional(t.String()) });
const BuildSchema = named(
  "TemplateBuild",
  t.Object({
    templateID: t.String(),
    buildID: t.String(),
    status: t.String({ enum: ["waiting", "building", "ready", "error"] }),
    logs: t.Array(LogEntrySchema, { description: "From `logsOffset`, at most `limit`" }),
    reason: t.Optional(t.Object({ message: t.String(), step: t.Optional(t.String({ description: "`base`, or the step's number from 1" })) })),
  }),
);
const BuildStartedSchema = named("TemplateBuildStarted", t.Object({ templateID: t.String(), buildID: t.String(), name: t.String(), tags: t.Array(t.String()) }));

export function templateJson(i: TemplateInfo) {
  return {
    templateID: i.id,
    name: i.name,
    shared: i.shared,
    ...(i.description ? { description: i.description } : {}),
    buildStatus: i.buildStatus,
    ...(i.buildId ? { buildID: i.buildId } : {}),
    tags: i.tags,
    buildCount: i.buildCount,
    spawnCount: i.spawnCount,
    ...(i.createdAt ? { createdAt: i.createdAt.toISOString() } : {}),
    ...(i.updatedAt ? { updatedAt: i.updatedAt.toISOString() } : {}),
  };
}

const nameParams = t.Object({ name: t.String({ maxLength: 300 }) });

export function templateRoutes(templates: TemplateService, publicUrl: string | undefined) {
  return new Elysia({ prefix: "/templates" })
    .use(requestContext)
    .get("", async ({ auth }) => (await templates.list(auth.organizationId)).map(templateJson), {
      response: { 200: t.Array(TemplateSchema) },
      detail: { tags, operationId: "listTemplates", summary: "List templates", description: "The organization's own templates, newest first, then the shared (configured) ones." },
    })
    .get("/:name", async ({ auth, params }) => templateJson((await templates.get(auth.organizationId, params.name)).info), {
      params: nameParams,
      response: { 200: TemplateSchema, 404: ErrorSchema },
      detail: { tags, operationId: "getTemplate", summary: "Get a template", description: "An organization's own template by name or id." },
    })
    .delete(
      "/:name",
      async ({ auth, params, set }) => {
        await templates.delete(auth.organizationId, params.name);
        set.status = 204;
        return null;
      },
      {
        params: nameParams,
        detail: { tags, operationId: "deleteTemplate", ...responds({ 204: null }, [403, 404]), summary: "Delete a template", description: "Its builds, tags and logs go; running sandboxes of it keep running. Shared templates give 403. Layers no template or cached step uses any more are garbage for the layer store's collection." },
      },
    )
    .get(
      "/files/:hash",
      async ({ auth, params, request }) => {
        if (await templates.d.uploads.present(auth.organizationId, params.hash)) return { present: true };
        return { present: false, url: (publicUrl ?? new URL(request.url).origin) + templates.d.uploads.link(auth.organizationId, params.hash) };
      },
      {
        params: t.Object({ hash: t.String({ maxLength: 64 }) }),
        response: { 200: t.Object({ present: t.Boolean(), url: t.Optional(t.String({ description: "PUT the tar (gzip or not) of the files here; valid for an hour" })) }), 400: ErrorSchema },
        detail: { tags, operationId: "templateFilesUploadLink", summary: "Upload link for a COPY step's files", description: "`hash`: sha256 hex of the files (the e2b SDK's filesHash: `COPY <src> <dest>`, then each file's relative path, mode, size and content). `present: true` when this organization uploaded them before." },
      },
    )
    .post(
      "/builds",
      async ({ auth, body, set }) => {
        let spec: BuildSpec;
        let notes: string[] = [];
        if (body.dockerfile !== undefined) {
          if (body.spec !== undefined) throw new ApiError(400, "give dockerfile or spec, not both");
          try {
            const parsed = parseDockerfile(body.dockerfile, body.buildArgs ?? {});
            spec = parsed.spec;
            notes = parsed.notes;
            const files: Record<string, string> = body.files ?? {};
            for (const c of parsed.copies) {
              const hash = Object.hasOwn(files, c.src) ? files[c.src] : undefined;
              if (!hash) throw new ApiError(400, `COPY ${c.src}: its files are not named in 'files' (source -> files hash); upload them first`);
              spec.steps[c.step].filesHash = hash;
            }
          } catch (e) {
            if (e instanceof DockerfileError) throw new ApiError(400, `Dockerfile ${e.message}`);
            throw e;
          }
          if (body.startCmd) spec.startCmd = body.startCmd;
          if (body.readyCmd) spec.readyCmd = body.readyCmd;
        } else if (body.spec !== undefined) {
          spec = body.spec as BuildSpec;
        } else throw new ApiError(400, "give dockerfile (its text) or spec (E2B's build steps)");
        const r = await templates.requestBuild(auth.organizationId, body.name, body.tags ?? [], { cpuCount: body.cpuCount, memoryMB: body.memoryMB });
        await templates.startBuild(auth.organizationId, r.template.id, r.build.id, { ...spec, ...(body.force ? { force: true } : {}) }, notes);
        set.status = 202;
        return { templateID: r.template.id, buildID: r.build.id, name: r.template.name, tags: r.tags };
      },
      {
        body: t.Object({
          name: t.String({ minLength: 1, maxLength: 140, description: "Template name, optionally `name:tag`" }),
          tags: t.Optional(t.Array(t.String({ maxLength: 140 }), { maxItems: 64 })),
          dockerfile: t.Optional(t.String({ maxLength: 1024 * 1024, description: "Dockerfile text" })),
          buildArgs: t.Optional(t.Record(t.String(), t.String(), { description: "ARG values" })),
          files: t.Optional(t.Record(t.String(), t.String({ pattern: "^[0-9a-f]{64}$" }), { description: "Each COPY/ADD source as written -> the hash its files were uploaded under" })),
          spec: t.Optional(t.Unknown({ description: "E2B's build body instead of a Dockerfile: fromImage or fromTemplate, steps, startCmd, readyCmd" })),
          startCmd: t.Optional(t.String()),
          readyCmd: t.Optional(t.String({ description: "Polled until it succeeds before a create of the template returns" })),
          force: t.Optional(t.Boolean({ description: "Run every step, cached or not" })),
          cpuCount: t.Optional(t.Number()),
          memoryMB: t.Optional(t.Integer()),
        }),
        response: { 202: BuildStartedSchema, 400: ErrorSchema, 409: ErrorSchema },
        detail: {
          tags,
          operationId: "buildTemplate",
          summary: "Build a template",
          description:
            "Starts a build from a Dockerfile (FROM a template or an image; RUN, COPY, ADD of local files, ENV, ARG, WORKDIR, USER, CMD/ENTRYPOINT as the start command) or from E2B's step list, and answers 202 at once; poll the build for its status and log. Unchanged steps take their cached layers. Events `sandbox.template.build.started`, then `completed` or `failed`.",
        },
      },
    )
    .get(
      "/:name/builds/:buildID",
      async ({ auth, params, query }) => {
        const offset = query.logsOffset ?? 0;
        const { template, build, logs } = await templates.status(auth.organizationId, params.name, params.buildID, offset, query.limit ?? 1000);
        return buildJson(template.id, build, logs);
      },
      {
        params: t.Object({ name: t.String({ maxLength: 300 }), buildID: t.String({ maxLength: 64 }) }),
        query: t.Object({ logsOffset: t.Optional(t.Integer({ minimum: 0 })), limit: t.Optional(t.Integer({ minimum: 0, maximum: 1000 })) }),
        response: { 200: BuildSchema, 404: ErrorSchema },
        detail: { tags, operationId: "getTemplateBuild", summary: "A build's status and log", description: "Log entries from `logsOffset` (default 0), at most `limit` (default and most 1000); poll with the offset moved past what you have." },
      },
    );
}

export function buildJson(templateId: string, b: TemplateBuildRow, logs: Awaited<ReturnType<TemplateService["status"]>>["logs"]) {
  return {
    templateID: templateId,
    buildID: b.id,
    status: b.status as "waiting" | "building" | "ready" | "error",
    logs,
    ...(b.status === "error" && b.reason ? { reason: b.reason } : {}),
  };
}
