import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { readText } from "./fs";
import { parseCgroupMounts, parseProcCgroup, v1Parents, v2Layout } from "./paths";
import type { SandboxCgroups } from "./types";
import { CgroupV1, V1_OPTIONAL, V1_REQUIRED } from "./v1";
import { CgroupV2, V2_REQUIRED } from "./v2";

/**
 * The parent group's name: one per sandbox root (DATA_DIR), so services with other data
 * directories on the same host never sweep each other's groups, and a restarted
 * service finds its own.
 */
export function parentGroupName(sandboxRoot: string): string {
  return `sandboxes-${createHash("sha256").update(sandboxRoot).digest("hex").slice(0, 12)}`;
}

/**
 * Finds a writable cgroup hierarchy for per-sandbox groups: v2 when this process's v2
 * group offers memory, pids and cpu (a unified host, or a delegated subtree), else v1
 * with the memory, pids and cpu controllers mounted. A message saying why when neither
 * works.
 */
export function detectCgroups(parentName: string, pid = process.pid): SandboxCgroups | string {
  const mounts = parseCgroupMounts(readFileSync("/proc/self/mountinfo", "utf8"));
  const own = parseProcCgroup(readFileSync(`/proc/${pid}/cgroup`, "utf8"));
  const problems: string[] = [];
  if (mounts.v2 && own.has("")) {
    const layout = v2Layout(mounts.v2, own.get("")!, parentName);
    const offered = layout ? (readText(join(layout.base, "cgroup.controllers")) ?? "").trim().split(/\s+/) : [];
    if (layout && V2_REQUIRED.every((c) => offered.includes(c))) {
      const v2 = CgroupV2.setup(layout, pid);
      if (typeof v2 !== "string") return v2;
      problems.push(v2);
    } else if (!mounts.v1.size) {
      problems.push(`cgroup v2 is mounted at ${mounts.v2.point}, but this process's group does not offer ${V2_REQUIRED.join(", ")} (delegate them: systemd Delegate=yes)`);
    }
  }
  if (V1_REQUIRED.every((c) => mounts.v1.has(c))) {
    const controllers = [...V1_REQUIRED, ...V1_OPTIONAL.filter((c) => mounts.v1.has(c))];
    const parents = v1Parents(mounts, own, controllers, parentName);
    if (typeof parents === "string") problems.push(parents);
    else {
      const v1 = CgroupV1.setup(parents);
      if (typeof v1 !== "string") return v1;
      problems.push(v1);
    }
  } else if (mounts.v1.size) {
    problems.push(`cgroup v1 lacks the ${V1_REQUIRED.filter((c) => !mounts.v1.has(c)).join(", ")} controller(s)`);
  }
  if (!mounts.v2 && !mounts.v1.size) problems.push("no cgroup filesystem is mounted");
  return problems.join("; ");
}
