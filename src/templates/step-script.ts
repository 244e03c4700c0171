/**
 * The shell scripts a build runs as the sandbox's root for each step. They are built here,
 * from checked values (build-spec.ts: user names match USER_NAME, modes are octal), and
 * every free-form value goes in single quotes, so a step's text is only ever the command
 * the template's author asked for, run as the user the step names.
 */
import { posix } from "node:path";
import { shellQuote } from "./dockerfile";

/** What the steps so far have set: the environment, user and working directory of the next. */
export interface StepState {
  env: Record<string, string>;
  /** ARG values: the environment of later steps, not of the template's sandboxes. */
  buildEnv: Record<string, string>;
  user: string;
  workdir: string;
}

const PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/**
 * Runs `command` as `user` in `workdir` with exactly the build's environment (env -i: the
 * build service's own environment never leaks in). runuser (util-linux) switches user
 * inside the sandbox, where the build runs as the user namespace's root.
 */
export function runScript(command: string, user: string, s: StepState): string {
  const env = { PATH, ...s.env, ...s.buildEnv };
  const assignments = Object.entries(env).map(([k, v]) => shellQuote(`${k}=${v}`));
  const as = user === "root" || user === "0" ? "" : `runuser -u ${shellQuote(user)} -- `;
  return [
    `home=$(getent passwd ${shellQuote(user)} | cut -d: -f6); [ -n "$home" ] || home=/`,
    `shell=/bin/sh; [ -x /bin/bash ] && shell=/bin/bash`,
    `cd ${shellQuote(s.workdir)} 2>/dev/null || cd /`,
    `exec ${as}env -i HOME="$home" USER=${shellQuote(user)} ${assignments.join(" ")} "$shell" -c ${shellQuote(command)}`,
  ].join("\n");
}

/** Creates a user that does not exist yet (E2B's USER does), with a home and bash as its shell where there is one. */
export function ensureUserScript(user: string, uid?: number): string {
  if (user === "root" || /^[0-9]+$/.test(user)) return "true";
  const q = shellQuote(user);
  const shell = `$([ -x /bin/bash ] && echo /bin/bash || echo /bin/sh)`;
  const uidFlag = uid === undefined ? "" : ` $(getent passwd ${uid} >/dev/null || echo -u ${uid})`;
  return [
    `if ! id -u ${q} >/dev/null 2>&1; then`,
    `  if command -v useradd >/dev/null; then useradd -m -s ${shell}${uidFlag} ${q}`,
    `  elif command -v adduser >/dev/null; then adduser -D ${q}`,
    `  else echo "cannot create user ${user}: no useradd or adduser in the image" >&2; exit 1; fi`,
    `fi`,
  ].join("\n");
}

/** WORKDIR: the directory exists afterwards, owned by the current user when the step made it. */
export function workdirScript(dir: string, user: string): string {
  const q = shellQuote(dir);
  return `[ -d ${q} ] || { mkdir -p ${q} && chown ${shellQuote(user)}: ${q}; }`;
}

/**
 * COPY: unpacks the uploaded tar (gzip or not) into a scratch directory, takes the entries
 * `src` (a path or glob, relative to the context) names, owns them by `owner`, and copies
 * them to `dest` as Docker does: a directory's contents into dest; several sources, or a
 * dest ending in "/", into the directory dest; one file to dest itself. The tar comes from
 * the client: it is unpacked inside the build's sandbox, never on the host, so a hostile
 * archive (absolute names, `..`, links) can only reach the layer its own build makes.
 */
export function copyScript(tarPath: string, src: string, dest: string, owner: string, mode: string, workdir: string): string {
  const target = posix.resolve(workdir, dest) + (dest.endsWith("/") && dest !== "/" ? "/" : "");
  const t = shellQuote(target);
  const cleanSrc = posix.normalize(src).replace(/\/+$/, "") || ".";
  return [
    `set -e`,
    `stage=$(mktemp -d /tmp/.template-copy.XXXXXX)`,
    `trap 'rm -rf "$stage" ${shellQuote(tarPath)}' EXIT`,
    `tar -x -f ${shellQuote(tarPath)} -C "$stage" --no-same-owner`,
    `cd "$stage"`,
    `[ -x /bin/bash ] || { echo "COPY needs bash in the image" >&2; exit 1; }`,
    `/bin/bash -e -c ${shellQuote(copyBody(cleanSrc, t, owner, mode))}`,
  ].join("\n");
}

function copyBody(src: string, target: string, owner: string, mode: string): string {
  return [
    `shopt -s nullglob dotglob`,
    `srcs=( ${globWord(src)} )`,
    `[ \${#srcs[@]} -gt 0 ] || { echo ${shellQuote(`COPY: no files match ${src}`)} >&2; exit 1; }`,
    `for s in "\${srcs[@]}"; do chown -R ${shellQuote(owner)}: "$s"; done`,
    mode ? `for s in "\${srcs[@]}"; do find "$s" -type f -exec chmod ${mode} {} +; done` : `:`,
    `dest=${target}`,
    `if [ \${#srcs[@]} -eq 1 ] && [ -d "\${srcs[0]}" ]; then mkdir -p "$dest"; cp -a "\${srcs[0]}/." "$dest/"`,
    `elif [ \${#srcs[@]} -gt 1 ] || [ "\${dest%/}" != "$dest" ]; then mkdir -p "$dest"; cp -a "\${srcs[@]}" "$dest/"`,
    `else mkdir -p "$(dirname "$dest")"; cp -a "\${srcs[0]}" "$dest"; fi`,
  ].join("\n");
}

/** A path pattern as a bash word: glob characters stay active, everything else is escaped. */
function globWord(pattern: string): string {
  return pattern.replace(/[^A-Za-z0-9_./*?[\]-]/g, (c) => `\\${c}`);
}
