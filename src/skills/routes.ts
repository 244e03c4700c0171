import { Elysia, t } from "elysia";
import { requestContext } from "../http/core";
import { ApiError } from "../http/errors";
import type { Surface } from "../http/surfaces";
import { idCursor, limitOf, DEFAULT_LIMIT, MAX_LIMIT } from "../agents/page";
import type { Services } from "../services";
import { bundleFromUploads, MAX_BUNDLE_BYTES, MAX_FILES, uploadsFromForm } from "./bundle";
import { SKILL_PREFIX, SkillRepository, skillJson, VERSION_PREFIX, versionJson } from "./store";
import { writeZip } from "./zip";
import { binary, named, responds } from "../openapi/declare";

/**
 * `/v1/skills`: the SDK's `client.beta.skills` and `client.beta.skills.versions`. A
 * resource API like the agents (Bearer, agent error family, scope `agents`), whose two
 * create routes take multipart uploads, under the same 10 MB body limit.
 */
export const skillsSurface: Surface = { prefix: "/v1/skills", family: "agent", credentials: "bearer", scope: "agents", multipart: true };

const tags = ["skills"];
const ErrorSchema = t.Object({ error: t.Object({ type: t.String(), message: t.String() }) });
const errors = { 400: ErrorSchema, 401: ErrorSchema, 404: ErrorSchema };

const SkillSchema = named("Skill", t.Object({
  id: t.String({ description: "`skill_...`" }),
  type: t.Literal("skill"),
  display_name: t.String({ description: "Human-readable label; the SKILL.md `name` unless given at creation" }),
  latest_version_id: t.String({ description: "The newest version (`skillver_...`); a skill always has one" }),
  source: t.Object({ type: t.Literal("custom") }, { description: "Always `custom`: uploaded by the organization" }),
  created_at: t.String({ format: "date-time" }),
  updated_at: t.String({ format: "date-time" }),
}));
const VersionSchema = named("SkillVersion", t.Object({
  id: t.String({ description: "`skillver_...`; addresses the version in paths and pins it in agents" }),
  type: t.Literal("skill_version"),
  skill_id: t.String(),
  name: t.String({ description: "The skill's kebab-case name (SKILL.md front matter); its directory in sandboxes and archives" }),
  description: t.String({ description: "From the SKILL.md front matter" }),
  created_at: t.String({ format: "date-time" }),
}));
const pageOf = <T extends ReturnType<typeof t.Object>>(name: string, item: T) => named(name, t.Object({ data: t.Array(item), next_page: t.Union([t.String(), t.Null()], { description: "Cursor for `page`; null on the last page" }) }));

const UploadSchema = t.Object({
  "files[]": t.Array(t.String({ format: "binary" }), {
    description:
      "The bundle's files, each part's file name being its relative path (`my-skill/SKILL.md`, `my-skill/scripts/run.py`); all in one top-level directory with SKILL.md at its root, or SKILL.md at the root. Or a single zip archive of the same layout. `files` is accepted as the field name too.",
  }),
  display_name: t.Optional(t.String({ maxLength: 255, description: "Single-line label; default: the SKILL.md `name`" })),
});
const uploadBody = (what: string) => ({
  required: true,
  description: `${what} Limits: ${MAX_FILES} files, ${MAX_BUNDLE_BYTES} bytes uncompressed, relative paths only (no absolute paths, no \`..\`), no symbolic links in archives.`,
  content: { "multipart/form-data": { schema: UploadSchema } },
});

const Limit = t.Optional(t.Integer({ minimum: 1, maximum: MAX_LIMIT, default: DEFAULT_LIMIT, error: `limit must be an integer from 1 to ${MAX_LIMIT}` }));
const SkillParams = t.Object({ skill_id: t.String() });
const VersionParams = t.Object({ skill_id: t.String(), version: t.String({ description: "A version id, or `latest`" }) });
const SOURCES = ["custom", "anthropic", "anthropic_example", "plugin"];

export function skillRoutes(s: Services) {
  const repo = new SkillRepository(s.db);
  return new Elysia()
    .use(requestContext)
    .post(
      "/v1/skills",
      async ({ auth, body }) => {
        const { uploads, displayName } = await uploadsFromForm(body);
        return skillJson(await repo.create(auth.organizationId, bundleFromUploads(uploads), displayName));
      },
      {
        response: { 200: SkillSchema, ...errors, 413: ErrorSchema },
        detail: {
          tags,
          operationId: "createSkill", summary: "Create a skill from an uploaded bundle (its first version)",
          description: "The SKILL.md front matter gives the skill's `name` (kebab-case, at most 64 characters) and `description` (at most 1024 characters); both are required.",
          requestBody: uploadBody("The skill bundle."),
        },
      },
    )
    .get(
      "/v1/skills",
      async ({ auth, query }) => {
        if (query.source != null && query.source !== "" && !SOURCES.includes(query.source)) throw new ApiError(400, `source must be one of ${SOURCES.join(", ")}`);
        // Every skill here is uploaded by the organization: other sources are empty.
        if (query.source && query.source !== "custom") return { data: [], next_page: null };
        return repo.list(auth.organizationId, { limit: limitOf(query.limit), after: idCursor(query.page, SKILL_PREFIX) });
      },
      {
        query: t.Object({ limit: Limit, page: t.Optional(t.String()), source: t.Optional(t.String()) }, { additionalProperties: true }),
        response: { 200: pageOf("SkillPage", SkillSchema), ...errors },
        detail: { tags, operationId: "listSkills", summary: "List skills, newest first", description: "`source=custom` (or none) lists the organization's skills; other sources are empty." },
      },
    )
    .get("/v1/skills/:skill_id", async ({ auth, params }) => skillJson(await repo.get(auth.organizationId, params.skill_id)), {
      params: SkillParams,
      response: { 200: SkillSchema, ...errors },
      detail: { tags, operationId: "getSkill", summary: "Get a skill" },
    })
    .delete(
      "/v1/skills/:skill_id",
      async ({ auth, params }) => {
        await repo.delete(auth.organizationId, params.skill_id);
        return { id: params.skill_id, type: "skill_deleted" as const };
      },
      {
        params: SkillParams,
        response: { 200: t.Object({ id: t.String(), type: t.Literal("skill_deleted") }), ...errors, 409: ErrorSchema },
        detail: { tags, operationId: "deleteSkill", summary: "Delete a skill with all its versions", description: "409 while the current version of an agent that is not archived uses it." },
      },
    )
    .post(
      "/v1/skills/:skill_id/versions",
      async ({ auth, params, body }) => {
        const { uploads, displayName } = await uploadsFromForm(body);
        if (displayName !== undefined) throw new ApiError(400, "display_name belongs to the skill, not to a version; it cannot be set here");
        return versionJson(await repo.createVersion(auth.organizationId, params.skill_id, bundleFromUploads(uploads)));
      },
      {
        params: SkillParams,
        response: { 200: VersionSchema, ...errors, 413: ErrorSchema },
        detail: {
          tags,
          operationId: "createSkillVersion", summary: "Upload a new version of a skill",
          description: "The new version becomes `latest_version_id`. Its SKILL.md must keep the skill's `name`.",
          requestBody: uploadBody("The new version's bundle (display_name is not accepted here)."),
        },
      },
    )
    .get(
      "/v1/skills/:skill_id/versions",
      async ({ auth, params, query }) => repo.listVersions(auth.organizationId, params.skill_id, { limit: limitOf(query.limit), after: idCursor(query.page, VERSION_PREFIX) }),
      {
        params: SkillParams,
        query: t.Object({ limit: Limit, page: t.Optional(t.String()) }, { additionalProperties: true }),
        response: { 200: pageOf("SkillVersionPage", VersionSchema), ...errors },
        detail: { tags, operationId: "listSkillVersions", summary: "List a skill's versions, newest first" },
      },
    )
    .get("/v1/skills/:skill_id/versions/:version", async ({ auth, params }) => versionJson(await repo.getVersion(auth.organizationId, params.skill_id, params.version)), {
      params: VersionParams,
      response: { 200: VersionSchema, ...errors },
      detail: { tags, operationId: "getSkillVersion", summary: "Get a skill version" },
    })
    .delete(
      "/v1/skills/:skill_id/versions/:version",
      async ({ auth, params }) => {
        const v = await repo.deleteVersion(auth.organizationId, params.skill_id, params.version);
        return { id: v.id, type: "skill_version_deleted" as const };
      },
      {
        params: VersionParams,
        response: { 200: t.Object({ id: t.String(), type: t.Literal("skill_version_deleted") }), ...errors, 409: ErrorSchema },
        detail: {
          tags,
          operationId: "deleteSkillVersion", summary: "Delete a skill version",
          description: "409 for the skill's only version (delete the skill instead) and for a version the current version of an active agent is pinned to.",
        },
      },
    )
    .get(
      "/v1/skills/:skill_id/versions/:version/content",
      async ({ auth, params }) => {
        const v = await repo.getVersion(auth.organizationId, params.skill_id, params.version);
        const files = await repo.files(v.id);
        const zip = writeZip(
          files.map((f) => ({ name: `${v.name}/${f.path}`, data: f.data, executable: f.executable })),
          v.createdAt,
        );
        return new Response(zip, {
          headers: { "content-type": "application/zip", "content-disposition": `attachment; filename="${v.name}.zip"`, "content-length": String(zip.length) },
        });
      },
      {
        params: VersionParams,
        detail: {
          tags,
          operationId: "downloadSkillVersion", summary: "Download a skill version as a zip archive",
          description: "Entries are `<name>/<path>`; files marked executable keep mode 0755.",
          ...responds({ 200: binary("The version's files", "application/zip") }, [404]),
        },
      },
    );
}
