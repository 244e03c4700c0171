import { readFileSync, rmSync } from "node:fs";
import { BackendError } from "../../../src/plugin-api";
import { procStat } from "../procfs";
import { NAME_PROXY_NS_PORT } from "./nftables";
import { SANDBOX_ADDRESS, SANDBOX_GATEWAY, SANDBOX_PREFIX } from "./policy";

/**
 * The sandbox's way out: pasta (Debian `passt`), a user-mode network stack. It gives the
 * namespace one interface and turns the sandbox's packets into ordinary sockets of the
 * host, so the host needs no bridge, no veth, no iptables rule and no forwarding; the
 * namespace's nftables decide what leaves (nftables.ts). Chosen over slirp4netns for its
 * port forwarding from one namespace port to one host loopback port, which is how the
 * sandbox reaches its resolver and name proxy (in the service) and nothing else of the host
 * (slirp4netns maps all of host loopback or none); slirp4netns downloads faster here
 * (docs/benchmarks.md).
 *
 * Threats:
 * - The sandbox reaching the host's loopback services through the gateway: `--no-map-gw`
 *   (pasta would otherwise map the gateway address to the host's 127.0.0.1), and the
 *   gateway is in the never-reachable set anyway.
 * - Host ports forwarded into the sandbox, or the sandbox's ports published on the host:
 *   pasta forwards every bound port both ways by default (`auto`); here none, except
 *   the two named forwards (DNS on the namespace's 127.0.0.1:53, the name proxy).
 * - pasta itself: this old pasta joins the namespace only as root (`--runas 0:0`; it
 *   drops to nobody too early otherwise). It confines itself: a seccomp filter, an empty
 *   read-only mount namespace, pid, ipc and uts namespaces of its own. It runs in the
 *   sandbox's cgroup, so its CPU and memory count as the sandbox's and it ends with it.
 */
export async function startPasta(o: { prefix: string[]; pasta: string; netns: string; pidFile: string; dnsPort: number; proxyPort: number }): Promise<{ pid: number; start: number }> {
  rmSync(o.pidFile, { force: true });
  const argv = [
    ...o.prefix,
    o.pasta, "--runas", "0:0", "--quiet",
    "--netns", o.netns, "--config-net", "--ipv4-only",
    "--address", SANDBOX_ADDRESS, "--netmask", String(SANDBOX_PREFIX), "--gateway", SANDBOX_GATEWAY, "--no-map-gw",
    "--tcp-ports", "none", "--udp-ports", "none",
    "--tcp-ns", `${NAME_PROXY_NS_PORT}:${o.proxyPort}`,
    "--udp-ns", `53:${o.dnsPort}`,
    "--pid", o.pidFile,
  ];
  // pasta sets the namespace up, then its parent exits and the daemon stays.
  const proc = Bun.spawn(argv, { stdin: "ignore", stdout: "pipe", stderr: "pipe", env: {} });
  const [err, code] = await Promise.all([new Response(proc.stderr).text(), proc.exited]);
  const pid = Number(readPid(o.pidFile));
  const start = pid > 0 ? procStat(pid)?.startTime : undefined;
  if (code !== 0 || !start) {
    const said = err.split("\n").filter((l) => l && !l.startsWith("Failed to send")).join("; ");
    throw new BackendError(500, `sandbox network: pasta did not start (exit ${code})${said ? `: ${said.slice(0, 2000)}` : ""}`);
  }
  return { pid, start };
}

function readPid(file: string): string {
  try {
    return readFileSync(file, "utf8").trim();
  } catch {
    return "";
  }
}
