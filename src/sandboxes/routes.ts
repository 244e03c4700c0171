import { Elysia, t } from "elysia";
import { requestContext } from "../http/core";
import { ApiError } from "../http/errors";
import type { Surface } from "../http/surfaces";
import { named, responds } from "../openapi/declare";
import type { Services } from "../services";
import { type SandboxService, sandboxJson, STATUSES } from "./service";

/** `/sandboxes/*`: `{code, message}` errors; Bearer, then X-API-Key (as the E2B SDK sends it). */
export const sandboxSurface: Surface = { prefix: "/sandboxes", family: "sandbox", credentials: "sandbox", scope: "sandboxes" };

const MAX_TIMEOUT_SEC = 86_400;
const tags = ["sandboxes"];

const ErrorSchema = t.Object({ code: t.Integer(), message: t.String() });
export const SandboxSchema = named("Sandbox", t.Object({
  sandboxID: t.String({ description: "`sbx_...`" }),
  templateID: t.String(),
  clientID: t.String({ description: "Always the same constant" }),
  metadata: t.Record(t.String(), t.String()),
  startedAt: t.String({ format: "date-time" }),
  endAt: t.String({ format: "date-time", description: "When the TTL reaper stops the sandbox (running sandboxes only)" }),
  status: t.String({ enum: [...STATUSES] }),
}));
const EntrySchema = named("SandboxEntry", t.Object({
  name: t.String(),
  type: t.String({ enum: ["file", "dir"] }),
  path: t.String({ description: "Absolute path inside the sandbox" }),
  size: t.Optional(t.Integer({ description: "Bytes; files only" })),
}));
const ProcessResultSchema = named("ProcessResult", t.Object({ stdout: t.String(), stderr: t.String(), exitCode: t.Integer() }));

const timeoutField = (what: string, dflt?: number) =>
  t.Integer({ minimum: 1, maximum: MAX_TIMEOUT_SEC, ...(dflt ? { default: dflt } : {}), error: `timeout must be an integer number of seconds from 1 to ${MAX_TIMEOUT_SEC}`, description: what });
// Declared loosely and checked by `stringMap` below: Elysia coerces a string or an
// array into an object for Record schemas instead of rejecting it.
const stringMapSchema = (what: string) => t.Unknown({ description: `${what}: object of string values (at most 256 keys, keys up to 256 and values up to 16384 characters)` });

function stringMap(name: string, value: unknown): Record<string, string> | undefined {
  if (value === undefined) return undefined;
  const bad = () => new ApiError(400, `${name} must be an object of at most 256 string values`);
  if (typeof value !== "object" || value === null || Array.isArray(value)) throw bad();
  const entries = Object.entries(value);
  if (entries.length > 256) throw bad();
  for (const [k, v] of entries) if (typeof v !== "string" || k.length > 256 || v.length > 16_384) throw bad();
  return value as Record<string, string>;
}
const pathQuery = t.Object({ path: t.String({ minLength: 1, maxLength: 4096, error: "query parameter 'path' is required", description: "Absolute, or relative to /home/user" }) });
const idParams = t.Object({ id: t.String() });

export function sandboxRoutes(s: Services, sandboxes: SandboxService) {
  return new Elysia({ prefix: "/sandboxes" })
    .use(requestContext)
    .post(
      "",
      async ({ auth, body }) =>
        sandboxJson(
          await sandboxes.create(auth.organizationId, {
            templateID: body.templateID,
            timeout: body.timeout,
            metadata: stringMap("metadata", body.metadata),
            envVars: stringMap("envVars", body.envVars),
            resources: { memoryMB: body.memoryMB, cpuCount: body.cpuCount, diskSizeMB: body.diskSizeMB },
          }),
        ),
      {
        body: t.Object({
          templateID: t.String({ minLength: 1, error: "templateID is required (a string)" }),
          timeout: t.Optional(timeoutField("Lifetime in seconds from now", 300)),
          metadata: t.Optional(stringMapSchema("Key-value metadata, default {}")),
          envVars: t.Optional(stringMapSchema("Environment of every command, default {}")),
          memoryMB: t.Optional(t.Integer({ minimum: 1, error: "memoryMB must be an integer number of MiB", description: "Memory of the sandbox in MiB (processes plus files in /home/user, /tmp, /dev/shm); default and maximum from the template (2048, up to 8192)" })),
          cpuCount: t.Optional(t.Number({ exclusiveMinimum: 0, error: "cpuCount must be a positive number of cores", description: "CPU time in cores; default and maximum from the template (1, up to 2)" })),
          diskSizeMB: t.Optional(t.Integer({ minimum: 1, error: "diskSizeMB must be an integer number of MiB", description: "Size of each writable file system (/home/user, /tmp, /dev/shm) in MiB; default and maximum from the template (1024, up to 4096)" })),
        }),
        response: { 200: SandboxSchema, 400: ErrorSchema, 429: ErrorSchema, 502: ErrorSchema, 503: ErrorSchema },
        detail: {
          tags,
          operationId: "createSandbox", summary: "Create a sandbox",
          description:
            "Starts a sandbox from a template (`base`, `code_interpreter`, or configured ones) and returns it `running`. `unknown template: <name>` gives 400; a template whose host requirements are missing (e.g. bubblewrap, python3) gives 503 naming what to install; a create past the organization's sandbox quota (concurrent sandboxes, total memory, total CPUs) gives 429 naming the limit; one that would commit more memory than the host's configured share gives 503.",
        },
      },
    )
    .get("", async ({ auth, query }) => (await sandboxes.list(auth.organizationId, query.status)).map(sandboxJson), {
      query: t.Object({ status: t.Optional(t.Union(STATUSES.map((v) => t.Literal(v)), { error: `status must be one of ${STATUSES.join(", ")}` })) }),
      response: { 200: t.Array(SandboxSchema), 400: ErrorSchema },
      detail: { tags, operationId: "listSandboxes", summary: "List the organization's sandboxes", description: "Newest first, including stopped ones; filter with `status`." },
    })
    .get("/:id", async ({ auth, params }) => sandboxJson(await sandboxes.get(auth.organizationId, params.id)), {
      params: idParams,
      response: { 200: SandboxSchema, 400: ErrorSchema, 404: ErrorSchema },
      detail: { tags, operationId: "getSandbox", summary: "Get a sandbox", description: "Destroyed sandboxes stay readable with status `stopped`." },
    })
    .delete(
      "/:id",
      async ({ auth, params, set }) => {
        await sandboxes.kill(auth.organizationId, params.id);
        set.status = 204;
        return null;
      },
      {
        params: idParams,
        detail: { tags, operationId: "deleteSandbox", ...responds({ 204: null }, [404]), summary: "Destroy a sandbox", description: "204, empty body. Event `sandbox.lifecycle.killed` with `reason: deleted`. 404 when already stopped (the E2B SDK's `kill()` then returns false)." },
      },
    )
    .post(
      "/:id/pause",
      async ({ auth, params }) => sandboxJson(await sandboxes.pause(auth.organizationId, params.id)),
      {
        params: idParams,
        response: { 200: SandboxSchema, 404: ErrorSchema, 409: ErrorSchema, 501: ErrorSchema, 502: ErrorSchema },
        detail: {
          tags,
          operationId: "pauseSandbox", summary: "Pause a sandbox",
          description: "Freezes every process; memory and files are kept. 409 when already paused or stopped; 502 `failed to pause sandbox in provider`.",
        },
      },
    )
    .post(
      "/:id/connect",
      async ({ auth, params, body }) => sandboxJson(await sandboxes.connect(auth.organizationId, params.id, body?.timeout)),
      {
        params: idParams,
        body: t.Optional(t.Object({ timeout: t.Optional(timeoutField("Seconds from now; a resumed sandbox without it gets the lifetime it had left when paused (300 when its timeout paused it)")) })),
        response: { 200: SandboxSchema, 400: ErrorSchema, 404: ErrorSchema, 409: ErrorSchema, 501: ErrorSchema },
        detail: {
          tags,
          operationId: "connectSandbox", summary: "Connect to (and resume) a sandbox",
          description: "Resumes a paused sandbox (event `resumed`); on a running one only applies `timeout`. 409 when stopped.",
        },
      },
    )
    .post(
      "/:id/timeout",
      async ({ auth, params, body, set }) => {
        await sandboxes.setTimeout(auth.organizationId, params.id, body.timeout);
        set.status = 204;
        return null;
      },
      {
        params: idParams,
        body: t.Object({ timeout: timeoutField("Seconds from now; overwrites the previous TTL") }),
        detail: { tags, operationId: "setSandboxTimeout", ...responds({ 204: null }, [404, 409]), summary: "Set a sandbox's TTL", description: "204. endAt becomes now + timeout (event `updated`). 409 when stopped." },
      },
    )
    .post(
      "/:id/processes",
      async ({ auth, params, body }) => sandboxes.exec(auth.organizationId, params.id, body),
      {
        params: idParams,
        body: t.Object({
          cmd: t.String({ minLength: 1, error: "cmd is required (a string)" }),
          args: t.Optional(t.Array(t.String(), { maxItems: 4096, error: "args must be an array of strings" })),
          timeout: t.Optional(t.Integer({ minimum: 1, maximum: 3600, error: "timeout must be an integer number of seconds from 1 to 3600" })),
        }),
        response: { 200: ProcessResultSchema, 400: ErrorSchema, 404: ErrorSchema, 409: ErrorSchema, 501: ErrorSchema },
        detail: {
          tags,
          operationId: "runSandboxProcess", summary: "Run a process",
          description:
            "Runs `cmd` with `args` (no shell; use `sh -c` for one) in /home/user with the sandbox's envVars, and waits for it. stdout and stderr are capped (1 MiB each by default) with a `[stdout truncated: ...]` marker. At `timeout` (default 60 s) the command's whole process tree is killed and exitCode is 124. Processes it leaves in the background keep running until the sandbox is destroyed. 409 when the sandbox is paused or stopped.",
        },
      },
    )
    .get("/:id/filesystem/list", async ({ auth, params, query }) => sandboxes.listDir(auth.organizationId, params.id, query.path), {
      params: idParams,
      query: pathQuery,
      response: { 200: t.Array(EntrySchema), 400: ErrorSchema, 404: ErrorSchema, 409: ErrorSchema, 501: ErrorSchema },
      detail: { tags, operationId: "listSandboxDirectory", summary: "List a directory", description: "Entries sorted by name; symlinks are reported as what they point to." },
    })
    .get("/:id/filesystem", async ({ auth, params, query }) => sandboxes.readFile(auth.organizationId, params.id, query.path), {
      params: idParams,
      query: pathQuery,
      response: { 200: t.Object({ content: t.String({ description: "base64" }), path: t.String() }), 400: ErrorSchema, 404: ErrorSchema, 409: ErrorSchema, 501: ErrorSchema },
      detail: { tags, operationId: "readSandboxFile", summary: "Read a file", description: "Files over 1 MB give 400; a missing file 404." },
    })
    .post(
      "/:id/filesystem",
      async ({ auth, params, body }) => {
        const data = decodeBase64(body.content);
        return sandboxes.writeFile(auth.organizationId, params.id, body.path, data);
      },
      {
        params: idParams,
        body: t.Object({
          path: t.String({ minLength: 1, maxLength: 4096, error: "path is required (a string)" }),
          content: t.String({ error: "content is required (base64)", description: "File content, base64" }),
        }),
        response: { 200: EntrySchema, 400: ErrorSchema, 404: ErrorSchema, 409: ErrorSchema, 501: ErrorSchema },
        detail: {
          tags,
          operationId: "writeSandboxFile", summary: "Write a file",
          description: "Body `{path, content}` with base64 content; creates parent directories and replaces an existing file. Returns the Directory entry written.",
        },
      },
    )
    .delete(
      "/:id/filesystem",
      async ({ auth, params, query, set }) => {
        await sandboxes.removeFile(auth.organizationId, params.id, query.path);
        set.status = 204;
        return null;
      },
      {
        params: idParams,
        query: pathQuery,
        detail: { tags, operationId: "deleteSandboxFile", ...responds({ 204: null }, [404, 409, 501]), summary: "Delete a file or directory", description: "Query `path`; directories are removed with their contents. 204; 404 when missing." },
      },
    );
}

function decodeBase64(s: string): Uint8Array {
  if (!/^[A-Za-z0-9+/]*={0,2}$/.test(s) || s.length % 4 === 1) throw new ApiError(400, "content must be base64");
  return Buffer.from(s, "base64");
}
