import { sandboxServiceOf } from "../sandboxes";
import type { NetworkRequest } from "../sandboxes/network";
import type { Services } from "../services";
import type { PackageManager } from "../settings/values";
import type { EnvironmentConfig } from "./environments";

/**
 * An environment's `packages`, installed when the session's sandbox starts, under the
 * environment's networking, from the registries the operator configured
 * (AGENT_PACKAGE_REGISTRIES; never a public host written here). Sandboxes of the local
 * backend have a read-only system root and no root user, so installs go where the
 * sandbox's user can write: pip `--user` (~/.local), npm into /home/user/node_modules,
 * cargo, gem and go under the home. apt needs root and a writable root (an image
 * template): on a template of the host's /usr it is refused with a clear error.
 *
 * Each package is installed by a command of its own, so a failure names the package.
 * Package names were checked when the environment was saved (environments.ts) and go to
 * the package manager as argv words, never through a shell.
 */

/** One install, as the session's `session.packages_installed` event shows it. */
export interface InstallStep {
  manager: PackageManager;
  package: string;
  exit_code: number;
  /** The end of what the command printed. */
  output: string;
}

/** A package that did not install: the message names it and says why. */
export class PackageInstallError extends Error {}

const HOME = "/home/user";
const OUTPUT_TAIL = 2000;
const INSTALL_TIMEOUT_SEC = 600;

const tail = (s: string) => (s.length > OUTPUT_TAIL ? `...${s.slice(-OUTPUT_TAIL)}` : s);

/** The argv that installs one package (as the sandbox's user), and the program it needs. */
function installCommand(manager: PackageManager, pkg: string, registry: string | undefined): { argv: string[]; needs: string } {
  switch (manager) {
    case "pip": {
      // Debian marks its Python externally managed; --user writes only the home, which is what the flag guards.
      // A plain-http index is the operator's choice (a mirror on a private network): pip is told to trust it.
      const index = registry ? ["--index-url", registry, ...(registry.startsWith("http:") ? ["--trusted-host", new URL(registry).hostname] : [])] : [];
      return { needs: "python3 -m pip", argv: ["env", "PIP_BREAK_SYSTEM_PACKAGES=1", "python3", "-m", "pip", "install", "--user", "--no-input", "--disable-pip-version-check", "--no-warn-script-location", ...index, pkg] };
    }
    case "npm":
      return { needs: "npm", argv: ["npm", "install", "--prefix", HOME, "--no-audit", "--no-fund", "--no-update-notifier", ...(registry ? ["--registry", registry] : []), pkg] };
    case "cargo":
      return { needs: "cargo", argv: ["cargo", "install", "--root", `${HOME}/.cargo`, ...(registry ? ["--index", registry] : []), pkg] };
    case "gem":
      return { needs: "gem", argv: ["gem", "install", "--user-install", "--no-document", ...(registry ? ["--clear-sources", "--source", registry] : []), pkg] };
    case "go":
      return { needs: "go", argv: ["env", `GOPATH=${HOME}/go`, ...(registry ? [`GOPROXY=${registry}`] : []), "go", "install", pkg] };
    case "apt":
      return { needs: "apt-get", argv: ["apt-get", "install", "-y", pkg] };
  }
}

const ORDER: PackageManager[] = ["apt", "pip", "npm", "cargo", "gem", "go"];

/** Installs the environment's packages in the sandbox; the log of every install, or PackageInstallError at the first failure. */
export async function installPackages(s: Services, org: string, sandboxId: string, env: EnvironmentConfig): Promise<InstallStep[]> {
  const svc = sandboxServiceOf(s);
  const registries = s.config.agents.packageRegistries;
  const log: InstallStep[] = [];
  if (env.packages.apt.length && svc.templates.get(env.template)?.backend === "local") {
    throw new PackageInstallError(`apt packages (${env.packages.apt.join(", ")}) need an image template with a writable root and a root user; template '${env.template}' runs the host's /usr read-only. Use pip, npm, cargo, gem or go packages here, or a template of another backend`);
  }
  for (const manager of ORDER) {
    for (const pkg of env.packages[manager]) {
      const { argv, needs } = installCommand(manager, pkg, registries[manager]);
      const r = await svc.exec(org, sandboxId, { cmd: argv[0], args: argv.slice(1), timeout: INSTALL_TIMEOUT_SEC });
      const output = tail(`${r.stdout}${r.stderr}`);
      log.push({ manager, package: pkg, exit_code: r.exitCode, output });
      if (r.exitCode === 127) throw new PackageInstallError(`${manager} package '${pkg}' could not be installed: ${needs} is not available in template '${env.template}'`);
      if (r.exitCode !== 0) throw new PackageInstallError(`${manager} package '${pkg}' failed to install (exit ${r.exitCode}): ${tail(r.stderr || r.stdout).trim()}`);
    }
  }
  return log;
}

/** Host names (or addresses) of URLs, for allow rules. */
function hostsOf(urls: Iterable<string>): string[] {
  const out = new Set<string>();
  for (const u of urls) {
    try {
      out.add(new URL(u).hostname.replace(/^\[|\]$/g, ""));
    } catch {
      // Not a URL: nothing to open.
    }
  }
  return [...out];
}

/**
 * The session sandbox's network, from the environment's `networking`: `unrestricted` is
 * the internet (under the service's deny ranges); `limited` opens only `allowed_hosts`,
 * plus the operator's package registries with `allow_package_managers` and the agent's
 * MCP servers with `allow_mcp_servers`.
 */
export function sessionNetwork(s: Services, env: EnvironmentConfig, mcpServerUrls: string[]): NetworkRequest {
  const n = env.networking as { type?: string; allowed_hosts?: string[]; allow_package_managers?: boolean; allow_mcp_servers?: boolean };
  if (n.type === "unrestricted") return { allowInternetAccess: true };
  const open = [...(n.allowed_hosts ?? [])];
  if (n.allow_package_managers) open.push(...hostsOf(Object.values(s.config.agents.packageRegistries)), ...s.config.agents.packageHosts);
  if (n.allow_mcp_servers) open.push(...hostsOf(mcpServerUrls));
  return { allowInternetAccess: false, allowOut: [...new Set(open)] };
}
