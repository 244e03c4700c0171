import { BackendError } from "../../src/plugin-api";
import { NETWORK_TOOLS } from "./network";

const HOST_TOOLS: [string, string][] = [
  ["bwrap", "bubblewrap"],
  ["nsenter", "util-linux"],
  ["setpriv", "util-linux"],
  ["prlimit", "util-linux"],
  ["unshare", "util-linux"],
];

/**
 * The host programs the local backend runs (bwrap, util-linux, and the network tools when
 * sandboxes get a network), found once on the service's PATH. Kept apart so that a
 * missing one is reported the same way, with the Debian package to install, wherever
 * it is needed.
 */
export class HostTools {
  private readonly tools = new Map<string, string>();

  constructor(private readonly opts: { path?: string; network: boolean }) {}

  /** The first missing host program, named with the Debian package that provides it. */
  missing(): string | undefined {
    for (const [tool, pkg] of this.opts.network ? [...HOST_TOOLS, ...NETWORK_TOOLS] : HOST_TOOLS) {
      if (this.tools.has(tool)) continue;
      const path = Bun.which(tool, { PATH: this.opts.path ?? process.env.PATH ?? "" });
      if (!path) return `the local sandbox backend needs '${tool}', which is not installed: install the Debian package '${pkg}'`;
      this.tools.set(tool, path);
    }
    return undefined;
  }

  path(name: string): string {
    const missing = this.missing();
    if (missing) throw new BackendError(503, missing);
    const found = this.tools.get(name) ?? Bun.which(name, { PATH: this.opts.path ?? process.env.PATH ?? "" });
    // A tool only some calls need (socat, for ports from outside, when sandboxes have no network).
    if (!found) throw new BackendError(503, `the local sandbox backend needs '${name}' for this, which is not installed: install the Debian package '${NETWORK_TOOLS.find(([t]) => t === name)?.[1] ?? name}'`);
    this.tools.set(name, found);
    return found;
  }
}
