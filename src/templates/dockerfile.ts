/**
 * A Dockerfile as a build spec (build-spec.ts): the common single-stage instructions.
 * FROM names a template of the organization (or a shipped one) or an image; RUN, COPY,
 * ADD (local files: an ADD of a URL is refused, and archives are copied, not unpacked),
 * ENV, ARG (build-time environment, overridable with build arguments), WORKDIR, USER,
 * CMD / ENTRYPOINT (the start command of the template's sandboxes). Instructions that
 * change nothing a sandbox here can use (EXPOSE, LABEL, VOLUME, ...) are skipped with a
 * note in the build log; anything else is refused with the line it is on.
 *
 * COPY sources are resolved by the caller (it knows the build context): the parser only
 * records them, in `copies`, with the step that needs their files hash.
 */
import type { BuildSpec, BuildStep } from "./build-spec";

export interface ParsedDockerfile {
  spec: BuildSpec;
  /** For each COPY step (its index in spec.steps): the sources as written, relative to the context. */
  copies: { step: number; src: string; dest: string }[];
  /** Notes for the build log (skipped instructions). */
  notes: string[];
}

export class DockerfileError extends Error {}

const SKIPPED = new Set(["EXPOSE", "LABEL", "VOLUME", "MAINTAINER", "STOPSIGNAL", "HEALTHCHECK", "SHELL", "ONBUILD"]);
const MAX_BYTES = 1024 * 1024;

/** Parses `text`; `buildArgs` override ARG defaults (Docker's --build-arg). */
export function parseDockerfile(text: string, buildArgs: Record<string, string> = {}): ParsedDockerfile {
  if (text.length > MAX_BYTES) throw new DockerfileError("the Dockerfile is larger than 1 MB");
  const steps: BuildStep[] = [];
  const copies: ParsedDockerfile["copies"] = [];
  const notes: string[] = [];
  /** ARG and ENV values seen so far: what `$NAME` expands to in later instructions (as Docker does). */
  const vars: Record<string, string> = {};
  let from: string | undefined;
  let entrypoint: string[] | undefined;
  let cmd: string[] | undefined;
  let entrypointShell: string | undefined;
  let cmdShell: string | undefined;

  for (const { line, keyword, rest } of instructions(text)) {
    const fail = (msg: string): never => {
      throw new DockerfileError(`line ${line}: ${msg}`);
    };
    if (keyword !== "ARG" && keyword !== "FROM" && from === undefined) fail(`${keyword} before FROM`);
    switch (keyword) {
      case "FROM": {
        if (from !== undefined) fail("multi-stage builds (a second FROM) are not supported");
        const words = rest.split(/\s+/).filter((w) => !w.startsWith("--"));
        if (!words[0]) fail("FROM needs an image or template");
        from = expand(words[0], vars);
        break;
      }
      case "RUN": {
        const json = jsonArray(rest);
        if (rest.startsWith("<<")) fail("heredocs are not supported; put the script in a file and COPY it");
        const command = json ? json.map(shellQuote).join(" ") : rest;
        if (!command.trim()) fail("RUN needs a command");
        steps.push({ type: "RUN", args: [command] });
        break;
      }
      case "COPY":
      case "ADD": {
        const { flags, words } = flagsAndWords(rest);
        if (flags.from !== undefined) fail("COPY --from (multi-stage) is not supported");
        const args = (jsonArray(words.join(" ")) ?? words).map((w) => expand(w, vars));
        if (args.length < 2) fail(`${keyword} needs a source and a destination`);
        const dest = args[args.length - 1];
        for (const src of args.slice(0, -1)) {
          if (keyword === "ADD" && /^[a-z][a-z0-9+.-]*:\/\//i.test(src)) fail("ADD of a URL is not supported; download it in a RUN step");
          if (src.startsWith("/") || src.split("/").includes("..")) fail(`${keyword} source '${src}' must be a path inside the build context`);
          copies.push({ step: steps.length, src, dest });
          // Docker's COPY owns files by root unless --chown says otherwise (E2B's copy: the current user).
          steps.push({ type: "COPY", args: [src, dest, flags.chown || "root", flags.chmod ?? ""] });
        }
        break;
      }
      case "ENV":
      case "ARG": {
        const pairs = keyword === "ENV" ? envPairs(rest, fail) : argPairs(rest, fail);
        const args: string[] = [];
        for (const [k, v] of pairs) {
          const value = keyword === "ARG" ? (Object.hasOwn(buildArgs, k) ? buildArgs[k] : v === undefined ? vars[k] : expand(v, vars)) : expand(v ?? "", vars);
          if (value === undefined) continue; // an ARG with no default and no build argument: unset, as in Docker
          vars[k] = value;
          args.push(k, value);
        }
        // An ARG before FROM only parameterises FROM.
        if (args.length && from !== undefined) steps.push({ type: keyword, args });
        break;
      }
      case "WORKDIR":
        if (!rest) fail("WORKDIR needs a directory");
        steps.push({ type: "WORKDIR", args: [expand(rest, vars)] });
        break;
      case "USER":
        if (!rest) fail("USER needs a user");
        steps.push({ type: "USER", args: [expand(rest, vars).split(":")[0]] });
        break;
      case "CMD":
      case "ENTRYPOINT": {
        const json = jsonArray(rest);
        if (keyword === "CMD") [cmd, cmdShell] = json ? [json, undefined] : [undefined, rest];
        else [entrypoint, entrypointShell] = json ? [json, undefined] : [undefined, rest];
        break;
      }
      default:
        if (SKIPPED.has(keyword)) notes.push(`line ${line}: ${keyword} has no effect here and was skipped`);
        else fail(`unknown instruction ${keyword}`);
    }
  }
  if (from === undefined) throw new DockerfileError("the Dockerfile has no FROM");
  // As E2B's own parser (the SDK's fromDockerfile) does, so both Dockerfile paths make the same
  // template: the instructions run as root in /, as in Docker; the sandboxes then run as E2B's
  // `user` in /home/user unless the Dockerfile says otherwise.
  const sawUser = steps.some((s) => s.type === "USER");
  const sawWorkdir = steps.some((s) => s.type === "WORKDIR");
  steps.unshift({ type: "USER", args: ["root"] }, { type: "WORKDIR", args: ["/"] });
  for (const c of copies) c.step += 2;
  if (!sawUser) steps.push({ type: "USER", args: ["user"] });
  if (!sawWorkdir) steps.push({ type: "WORKDIR", args: ["/home/user"] });
  // Docker: a shell-form ENTRYPOINT ignores CMD; an exec-form one takes CMD as its arguments.
  let startCmd: string | undefined;
  if (entrypointShell !== undefined) startCmd = entrypointShell;
  else if (entrypoint) startCmd = [...entrypoint, ...(cmd ?? [])].map(shellQuote).join(" ") + (cmdShell && !cmd ? ` ${cmdShell}` : "");
  else if (cmd) startCmd = cmd.map(shellQuote).join(" ");
  else if (cmdShell !== undefined) startCmd = cmdShell;
  const spec: BuildSpec = { ...fromField(from), steps, ...(startCmd ? { startCmd } : {}) };
  return { spec, copies, notes };
}

/** FROM names an image when it looks like one (a registry path, a tag or a digest), a template otherwise; `template:` / `image:` prefixes say so outright. */
function fromField(from: string): Pick<BuildSpec, "fromImage" | "fromTemplate"> {
  if (from.startsWith("template:")) return { fromTemplate: from.slice("template:".length) };
  if (from.startsWith("image:")) return { fromImage: from.slice("image:".length) };
  if (/[/:@]/.test(from)) return { fromImage: from };
  return { fromTemplate: from };
}

/** The instructions of a Dockerfile: comments and blank lines dropped, continuation lines joined. */
function* instructions(text: string): Generator<{ line: number; keyword: string; rest: string }> {
  const lines = text.split(/\r?\n/);
  let escape = "\\";
  let i = 0;
  let sawInstruction = false;
  while (i < lines.length) {
    const start = i + 1;
    let raw = lines[i++];
    const directive = /^#\s*escape\s*=\s*(\S)\s*$/i.exec(raw);
    if (directive && !sawInstruction) {
      escape = directive[1];
      continue;
    }
    if (/^\s*(#|$)/.test(raw)) continue;
    while (raw.trimEnd().endsWith(escape) && i < lines.length) {
      raw = raw.trimEnd().slice(0, -1);
      // Comment lines inside a continued instruction are dropped, as Docker does.
      let next = lines[i++];
      while (/^\s*#/.test(next) && i < lines.length) next = lines[i++];
      raw += " " + next.trim();
    }
    sawInstruction = true;
    const m = /^\s*([A-Za-z]+)\s*(.*)$/.exec(raw);
    if (!m) throw new DockerfileError(`line ${start}: not an instruction`);
    yield { line: start, keyword: m[1].toUpperCase(), rest: m[2].trim() };
  }
}

/** The exec (JSON array) form, or undefined for the shell form. */
function jsonArray(rest: string): string[] | undefined {
  if (!rest.startsWith("[")) return undefined;
  try {
    const v = JSON.parse(rest);
    return Array.isArray(v) && v.every((x) => typeof x === "string") ? v : undefined;
  } catch {
    return undefined;
  }
}

function flagsAndWords(rest: string): { flags: Record<string, string>; words: string[] } {
  const flags: Record<string, string> = {};
  const words: string[] = [];
  for (const w of rest.split(/\s+/).filter(Boolean)) {
    const m = /^--([a-z-]+)(?:=(.*))?$/.exec(w);
    if (m && words.length === 0) flags[m[1]] = m[2] ?? "";
    else words.push(w);
  }
  if (flags.chown !== undefined) flags.chown = flags.chown.split(":")[0];
  return { flags, words };
}

/** `ENV K=V K2="V 2"` or the legacy `ENV K V with spaces`. */
function envPairs(rest: string, fail: (m: string) => never): [string, string | undefined][] {
  const words = shellWords(rest, fail);
  if (words.length && !words[0].includes("=")) {
    const m = /^(\S+)\s+(.*)$/.exec(rest);
    if (!m) fail("ENV needs a name and a value");
    return [[m![1], shellWords(m![2], fail).join(" ")]];
  }
  return words.map((w) => {
    const eq = w.indexOf("=");
    if (eq <= 0) fail(`'${w}' is not NAME=value`);
    return [w.slice(0, eq), w.slice(eq + 1)];
  });
}

function argPairs(rest: string, fail: (m: string) => never): [string, string | undefined][] {
  return shellWords(rest, fail).map((w) => {
    const eq = w.indexOf("=");
    return eq < 0 ? [w, undefined] : [w.slice(0, eq), w.slice(eq + 1)];
  });
}

/** Splits on unquoted blanks, removing quotes (the words of ENV / ARG lines). */
function shellWords(s: string, fail: (m: string) => never): string[] {
  const out: string[] = [];
  let cur = "";
  let quote: string | undefined;
  let has = false;
  for (let i = 0; i < s.length; i++) {
    const c = s[i];
    if (quote) {
      if (c === quote) quote = undefined;
      else if (c === "\\" && quote === '"' && i + 1 < s.length) cur += s[++i];
      else cur += c;
    } else if (c === '"' || c === "'") {
      quote = c;
      has = true;
    } else if (c === "\\" && i + 1 < s.length) {
      cur += s[++i];
      has = true;
    } else if (/\s/.test(c)) {
      if (cur || has) out.push(cur);
      cur = "";
      has = false;
    } else {
      cur += c;
      has = true;
    }
  }
  if (quote) fail("unterminated quote");
  if (cur || has) out.push(cur);
  return out;
}

/** `$NAME` and `${NAME}` (with `${NAME:-default}`) from ARG / ENV values; unknown names expand to nothing, as in Docker. */
function expand(s: string, vars: Record<string, string>): string {
  return s.replace(/\\\$|\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}|\$([A-Za-z_][A-Za-z0-9_]*)/g, (all, braced, dflt, bare) => {
    if (all === "\\$") return "$";
    const name = braced ?? bare;
    const v = Object.hasOwn(vars, name) ? vars[name] : undefined;
    return v !== undefined && v !== "" ? v : (dflt ?? "");
  });
}

/** A word for `sh -c`: as it is when plainly safe, in single quotes otherwise. */
export function shellQuote(s: string): string {
  return /^[A-Za-z0-9_./:=@%+,-]+$/.test(s) ? s : `'${s.replaceAll("'", `'\\''`)}'`;
}
