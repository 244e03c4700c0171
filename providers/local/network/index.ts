import { readFileSync, renameSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { type Cidr, type EgressRules, type Logger, opensNetwork } from "../../../src/plugin-api";
import { procStat, signal } from "../procfs";
import { NameProxy } from "./name-proxy";
import { createNamespace, enterNamespace, removeNamespace } from "./namespace";
import { applyRuleset, openAddresses, renderRuleset } from "./nftables";
import { startPasta } from "./pasta";
import { policyContext } from "./policy";
import { SandboxResolver } from "./resolver";
import type { Upstream } from "./upstream";

/**
 * The network of local sandboxes, one job per module of this folder:
 * namespace.ts (a namespace per sandbox, made by the service), nftables.ts (the policy of
 * policy.ts, in the kernel), pasta.ts (the way out), resolver.ts (DNS that opens allowed
 * names), name-proxy.ts (the name check of HTTP and TLS), relays.ts (ports from outside).
 * This class ties them to a sandbox's life: prepare before it starts, apply rules at
 * handout and on update, restore the service's listeners after a restart, release at
 * the end. What a restarted service needs is kept in the sandbox's directory
 * (network.json): the rules, the ports pasta forwards to, pasta's pid.
 */

/** The host programs it runs, each with its Debian package (checked with the backend's other tools). */
export const NETWORK_TOOLS: [string, string][] = [
  ["unshare", "util-linux"],
  ["umount", "mount"],
  ["ip", "iproute2"],
  ["nft", "nftables"],
  ["pasta", "passt"],
  ["socat", "socat"],
];

export interface NetworkOptions {
  upstreams: readonly Upstream[];
  /** EGRESS_ALLOW_CIDRS. */
  operatorAllow: Cidr[];
  log: Logger;
  tool: (name: string) => string;
}

interface NetworkFile {
  rules: EgressRules;
  dnsPort?: number;
  proxyPort?: number;
  pasta?: { pid: number; start: number };
}

const NOTHING: EgressRules = { internet: false, allowCidrs: [], allowDomains: [], denyCidrs: [] };

export class LocalNetworks {
  /** The service's side of each sandbox with a network stack: its resolver and name proxy. */
  private readonly listeners = new Map<string, { resolver: SandboxResolver; proxy: NameProxy }>();

  constructor(private readonly o: NetworkOptions) {}

  private context() {
    return policyContext(this.o.operatorAllow);
  }

  /** Where a sandbox's namespace is bound. */
  path(dir: string): string {
    return join(dir, "netns");
  }

  private enter(dir: string): string[] {
    return enterNamespace(this.o.tool("nsenter"), this.path(dir));
  }

  /** Before the sandbox starts: its namespace, with its loopback and nothing else open; returns the argv prefix that enters it. */
  async prepare(dir: string): Promise<string[]> {
    const t = this.o.tool;
    await createNamespace({ unshare: t("unshare"), ip: t("ip"), nft: t("nft") }, this.path(dir), renderRuleset(NOTHING, this.context(), false));
    return this.enter(dir);
  }

  /**
   * Puts `rules` in force. The first rules that open anything also give the sandbox its
   * way out: the service's resolver and name proxy for it, then pasta (in `cgroupPrefix`,
   * the sandbox's cgroup). The firewall changes first, so nothing leaves under old rules
   * once this returns.
   */
  async apply(sandboxId: string, dir: string, cgroupPrefix: string[], rules: EgressRules): Promise<void> {
    const found = readNetworkFile(dir);
    // A new sandbox that opens nothing keeps the rules it was prepared with.
    if (!found && !opensNetwork(rules) && !rules.denyCidrs.length) return;
    const file = found ?? { rules: NOTHING };
    const stack = !!file.pasta || opensNetwork(rules);
    const l = stack ? await this.listen(sandboxId, dir, file) : undefined;
    await applyRuleset(this.enter(dir), this.o.tool("nft"), renderRuleset(rules, this.context(), stack));
    if (l) l.resolver.rules = l.proxy.rules = rules;
    if (stack && !file.pasta) {
      file.pasta = await startPasta({ prefix: cgroupPrefix, pasta: this.o.tool("pasta"), netns: this.path(dir), pidFile: join(dir, "pasta.pid"), dnsPort: file.dnsPort!, proxyPort: file.proxyPort! });
    }
    file.rules = rules;
    writeNetworkFile(dir, file);
  }

  /** The service's listeners of a sandbox: made on its first network, listening on the same ports again after a restart. */
  private async listen(sandboxId: string, dir: string, file: NetworkFile) {
    const known = this.listeners.get(sandboxId);
    if (known) return known;
    const common = { upstreams: this.o.upstreams, context: () => this.context(), log: this.o.log };
    const enter = this.enter(dir);
    const nft = this.o.tool("nft");
    const resolver = await SandboxResolver.listen({ ...common, port: file.dnsPort ?? 0, open: (addresses, seconds) => openAddresses(enter, nft, addresses, seconds) });
    const proxy = await NameProxy.listen({ ...common, port: file.proxyPort ?? 0 }).catch((e) => {
      resolver.close();
      throw e;
    });
    resolver.rules = proxy.rules = file.rules;
    file.dnsPort = resolver.port;
    file.proxyPort = proxy.port;
    const l = { resolver, proxy };
    this.listeners.set(sandboxId, l);
    return l;
  }

  /** After a service restart: the listeners of a live sandbox whose pasta still forwards to them. */
  async restore(sandboxId: string, dir: string): Promise<void> {
    const file = readNetworkFile(dir);
    if (!file?.pasta || procStat(file.pasta.pid)?.startTime !== file.pasta.start) return;
    await this.listen(sandboxId, dir, file).catch((err) => this.o.log.error("sandbox network: the resolver and name proxy of a sandbox could not listen again; its names do not resolve", { sandboxId, err }));
  }

  /** At the end of a sandbox (its processes, pasta and relays included, are gone or going with its cgroup). */
  async release(sandboxId: string, dir: string): Promise<void> {
    const l = this.listeners.get(sandboxId);
    this.listeners.delete(sandboxId);
    l?.resolver.close();
    l?.proxy.close();
    // Without a cgroup pasta is not among the sandbox's processes: end it by its pid.
    const pasta = readNetworkFile(dir)?.pasta;
    if (pasta && procStat(pasta.pid)?.startTime === pasta.start) signal(pasta.pid, "SIGKILL");
    await removeNamespace(this.o.tool("umount"), this.path(dir));
  }

  /** Service shutdown: the listeners go (sandboxes, their namespaces and pasta stay; a restarted service listens again). */
  close(): void {
    for (const l of this.listeners.values()) {
      l.resolver.close();
      l.proxy.close();
    }
    this.listeners.clear();
  }

  /** Bytes through the sandbox's interface (its pid 1 is in its namespace). */
  bytes(initPid: number): { rx: number; tx: number } | undefined {
    let text: string;
    try {
      text = readFileSync(`/proc/${initPid}/net/dev`, "utf8");
    } catch {
      return undefined;
    }
    let rx = 0;
    let tx = 0;
    for (const line of text.split("\n").slice(2)) {
      const [name, rest] = line.split(":");
      if (!rest || name.trim() === "lo") continue;
      const f = rest.trim().split(/\s+/).map(Number);
      rx += f[0];
      tx += f[8];
    }
    return { rx, tx };
  }
}

function readNetworkFile(dir: string): NetworkFile | undefined {
  try {
    return JSON.parse(readFileSync(join(dir, "network.json"), "utf8"));
  } catch {
    return undefined;
  }
}

function writeNetworkFile(dir: string, file: NetworkFile): void {
  writeFileSync(join(dir, "network.json.tmp"), JSON.stringify(file), { mode: 0o600 });
  renameSync(join(dir, "network.json.tmp"), join(dir, "network.json"));
}
