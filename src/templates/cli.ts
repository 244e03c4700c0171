/**
 * `gateway templates ...`: a client of a running service's template API (routes.ts), as
 * the e2b SDK is of E2B's. `build` parses the Dockerfile here (to learn its COPY sources),
 * uploads each source's files once by content hash (as a tar made by GNU tar), starts the
 * build and prints its log as it comes, and exits 0 when the template is ready.
 */
import { answerMessage, type ServiceApi, serviceClient } from "../http/service-client";
import { createHash } from "node:crypto";
import { lstatSync, mkdtempSync, readFileSync, readlinkSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { basename, dirname, join, resolve } from "node:path";
import { parseArgs } from "node:util";
import { parseDockerfile } from "./dockerfile";
import { SHIPPED_TEMPLATES, type ShippedTemplate } from "./shipped";

export const TEMPLATES_USAGE = `  gateway templates build -f <Dockerfile> [--name <name[:tag]>] [--tag <t>]... [--build-arg K=V]...
                          [--no-cache] [--url <service>] --api-key <key> [<context dir>]
                                          build a template from a Dockerfile on a running service
                                          (context: the Dockerfile's directory unless given)
  gateway templates build --shipped code_interpreter [--build-arg K=V]... [--name ...] [--no-cache] ...
                                          build a template the project ships (its Dockerfile is in
                                          the binary; \`templates show code_interpreter\` prints it)
  gateway templates show <shipped name>   print a shipped template's Dockerfile
  gateway templates list [--url <service>] --api-key <key>
  gateway templates delete <name> [--url <service>] --api-key <key>`;

export class TemplatesUsageError extends Error {}

const OPTIONS = {
  file: { type: "string", short: "f" },
  shipped: { type: "string" },
  name: { type: "string" },
  tag: { type: "string", multiple: true },
  "build-arg": { type: "string", multiple: true },
  "no-cache": { type: "boolean" },
  url: { type: "string" },
  "api-key": { type: "string" },
} as const;

const POLL_MS = 500;

/** Runs a `templates` subcommand; the exit code. `defaultUrl`: this host's service (PORT). */
export async function templatesCommand(sub: string | undefined, args: string[], defaultUrl: string): Promise<number> {
  const { values, positionals } = parseArgs({ args, options: OPTIONS, allowPositionals: true });
  if (sub === "show") {
    process.stdout.write(shipped(positionals[0]).dockerfile);
    return 0;
  }
  const key = values["api-key"];
  if (!key) throw new TemplatesUsageError("templates commands need --api-key (a key of the organization the template belongs to)");
  const api = serviceClient(values.url ?? defaultUrl, key);
  switch (sub) {
    case "list":
      console.log(JSON.stringify(await api("GET", "/templates"), null, 2));
      return 0;
    case "delete":
      if (!positionals[0]) throw new TemplatesUsageError("templates delete needs a template name");
      await api("DELETE", `/templates/${encodeURIComponent(positionals[0])}`);
      console.log(`deleted ${positionals[0]}`);
      return 0;
    case "build":
      return build(api, values, positionals[0]);
    default:
      throw new TemplatesUsageError(`unknown templates command "${sub ?? ""}"; use build, list, delete or show`);
  }
}

function shipped(name: string | undefined): ShippedTemplate {
  const names = Object.keys(SHIPPED_TEMPLATES).join(", ");
  if (!name || !Object.hasOwn(SHIPPED_TEMPLATES, name)) throw new TemplatesUsageError(`name a shipped template: ${names}`);
  return SHIPPED_TEMPLATES[name]!;
}

async function build(api: ServiceApi, values: { file?: string; shipped?: string; name?: string; tag?: string[]; "build-arg"?: string[]; "no-cache"?: boolean; url?: string }, contextArg: string | undefined): Promise<number> {
  if (!values.file === (values.shipped === undefined)) throw new TemplatesUsageError("templates build needs -f <Dockerfile> or --shipped <name> (one of them)");
  // A shipped template's Dockerfile copies no files: it needs no context.
  const dockerfilePath = values.file ? resolve(values.file) : undefined;
  const context = resolve(contextArg ?? (dockerfilePath ? dirname(dockerfilePath) : "."));
  if (!statSync(context, { throwIfNoEntry: false })?.isDirectory()) throw new TemplatesUsageError(`build context ${context} is not a directory`);
  const dockerfile = dockerfilePath ? readFileSync(dockerfilePath, "utf8") : shipped(values.shipped).dockerfile;
  values = { ...values, name: values.name ?? values.shipped };
  const buildArgs: Record<string, string> = {};
  for (const a of values["build-arg"] ?? []) {
    const eq = a.indexOf("=");
    if (eq <= 0) throw new TemplatesUsageError(`--build-arg must be NAME=value, not "${a}"`);
    buildArgs[a.slice(0, eq)] = a.slice(eq + 1);
  }
  const name = values.name ?? basename(context).toLowerCase().replace(/[^a-z0-9._-]+/g, "-").replace(/^[^a-z0-9]+/, "");
  const parsed = parseDockerfile(dockerfile, buildArgs);
  const ignore = dockerignore(context);
  const files: Record<string, string> = {};
  for (const c of parsed.copies) {
    if (Object.hasOwn(files, c.src)) continue;
    const matched = matchFiles(context, c.src, ignore);
    if (!matched.length) throw new Error(`COPY ${c.src}: no files match in ${context}`);
    const hash = filesHash(context, c.src, c.dest, matched);
    files[c.src] = hash;
    const link = (await api("GET", `/templates/files/${hash}`)) as { present: boolean; url?: string };
    if (link.present) {
      console.log(`files of ${c.src}: already uploaded`);
      continue;
    }
    await upload(context, matched, link.url!);
    console.log(`files of ${c.src}: uploaded (${matched.length} entries)`);
  }
  const started = (await api("POST", "/templates/builds", { name, tags: values.tag ?? [], dockerfile, buildArgs, files, ...(values["no-cache"] ? { force: true } : {}) })) as { templateID: string; buildID: string; name: string; tags: string[] };
  console.log(`building ${started.name} (${started.templateID}, build ${started.buildID}, tags ${started.tags.join(", ")})`);
  let offset = 0;
  for (;;) {
    const b = (await api("GET", `/templates/${started.templateID}/builds/${started.buildID}?logsOffset=${offset}`)) as { status: string; logs: { message: string; level: string }[]; reason?: { message: string } };
    for (const l of b.logs) console.log(l.level === "error" || l.level === "warn" ? `${l.level}: ${l.message}` : l.message);
    offset += b.logs.length;
    if (b.logs.length) continue; // the rest of the log first
    if (b.status === "ready") {
      console.log(`template ${started.name} is ready: create sandboxes with templateID "${started.name}"`);
      return 0;
    }
    if (b.status === "error") {
      console.error(`build failed: ${b.reason?.message ?? "unknown error"}`);
      return 1;
    }
    await Bun.sleep(POLL_MS);
  }
}

/** .dockerignore patterns (lines, `#` comments; `!` exceptions are not supported and ignored). */
function dockerignore(context: string): Bun.Glob[] {
  let text = "";
  try {
    text = readFileSync(join(context, ".dockerignore"), "utf8");
  } catch {
    return [];
  }
  return text
    .split("\n")
    .map((l) => l.trim())
    .filter((l) => l && !l.startsWith("#") && !l.startsWith("!"))
    .flatMap((p) => {
      const clean = p.replace(/^\/+/, "").replace(/\/+$/, "");
      return [new Bun.Glob(clean), new Bun.Glob(`${clean}/**`)];
    });
}

/** The context's entries a COPY source names: the path (a directory with everything under it) or a glob's matches, sorted. */
function matchFiles(context: string, src: string, ignore: Bun.Glob[]): string[] {
  const clean = src.replace(/^\.\/+/, "").replace(/\/+$/, "") || ".";
  const roots = /[*?[]/.test(clean) ? [...new Bun.Glob(clean).scanSync({ cwd: context, dot: true, onlyFiles: false })] : [clean];
  const out = new Set<string>();
  for (const r of roots) {
    const st = lstatSync(join(context, r), { throwIfNoEntry: false });
    if (!st) continue;
    if (r !== "." && !ignore.some((g) => g.match(r))) out.add(r);
    if (st.isDirectory()) {
      for (const f of new Bun.Glob("**").scanSync({ cwd: join(context, r), dot: true, onlyFiles: false })) {
        const rel = r === "." ? f : `${r}/${f}`;
        if (!ignore.some((g) => g.match(rel))) out.add(rel);
      }
    }
  }
  return [...out].sort();
}

/** sha256 over `COPY src dest` and each entry's path, mode, size and content (a link's target): what decides the COPY's result. */
function filesHash(context: string, src: string, dest: string, entries: string[]): string {
  const h = createHash("sha256").update(`COPY ${src} ${dest}`);
  for (const rel of entries) {
    const p = join(context, rel);
    const st = lstatSync(p);
    h.update(rel).update(String(st.mode)).update(String(st.size));
    if (st.isSymbolicLink()) h.update(readlinkSync(p));
    else if (st.isFile()) h.update(readFileSync(p));
  }
  return h.digest("hex");
}

/** Tars the entries (GNU tar, gzip, no recursion: the list is complete) and PUTs the archive to the upload link. */
async function upload(context: string, entries: string[], url: string): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), "gateway-template-"));
  try {
    const tar = join(dir, "files.tar.gz");
    const p = Bun.spawn(["tar", "-c", "-z", "-f", tar, "-C", context, "--no-recursion", "--null", "-T", "-"], { stdin: new Blob([entries.join("\0") + "\0"]), stdout: "ignore", stderr: "pipe" });
    const code = await p.exited;
    if (code !== 0) throw new Error(`tar failed: ${await new Response(p.stderr).text()}`);
    const res = await fetch(url, { method: "PUT", body: Bun.file(tar) });
    if (!res.ok) throw new Error(`upload failed: ${res.status} ${answerMessage(await res.text())}`);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
