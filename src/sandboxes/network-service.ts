import { and, eq, inArray } from "drizzle-orm";
import type { Db } from "../db/client";
import { recordEvent } from "../events/record";
import { ApiError } from "../http/errors";
import { isWellFormedId } from "../ids";
import { networkingOf, type SandboxNetworking } from "./backend";
import { egressRules, type NetworkRequest, resolveNetwork } from "./network";
import { type SandboxRow, sandboxes } from "./schema";
import type { SandboxService } from "./service";

/**
 * What sandboxes' networks do while they run: rules replaced on a running sandbox (E2B's
 * updateNetwork), and the way in to a port of a sandbox (host routing, src/e2b). Beside
 * the lifecycle (service.ts), whose per-sandbox serialisation and backend error mapping
 * it shares.
 */
export class SandboxNetworks {
  constructor(
    private readonly svc: SandboxService,
    private readonly db: Db,
  ) {}

  private networking(row: SandboxRow): SandboxNetworking {
    const inst = this.svc.sandboxInstance(row.backend);
    const found = networkingOf(inst.instance, inst.plugin.definition.serves);
    if (!found) throw new ApiError(501, `sandbox backend '${row.backend}' does not offer networks; use a template on a backend that serves them`);
    return found;
  }

  /**
   * Replaces a running sandbox's egress rules, as E2B's update does: the allow and deny
   * lists and the internet switch are the request's (an omitted field is cleared, the
   * default applies again); public traffic and the host mask stay. The change and its
   * `sandbox.lifecycle.updated` event commit together, after the backend applied it.
   */
  async update(organizationId: string, id: string, req: NetworkRequest): Promise<SandboxRow> {
    return this.svc.serial(id, async () => {
      const row = await this.svc.get(organizationId, id);
      if (row.status === "paused") throw new ApiError(409, "sandbox is paused; connect to resume it");
      if (row.status !== "running") throw new ApiError(409, `sandbox is ${row.status}`);
      const current = row.network;
      const next = resolveNetwork(this.svc.networkMode, this.svc.templates.get(row.templateId)?.network, {
        allowInternetAccess: req.allowInternetAccess,
        allowOut: req.allowOut,
        denyOut: req.denyOut,
        allowPublicTraffic: current?.allowPublicTraffic,
        maskRequestHost: current?.maskRequestHost,
      });
      const networking = this.networking(row);
      await this.svc.call(() => networking.setNetwork(row.id, row.backendState, egressRules(next)).then(() => {}), "failed to update the sandbox's network in provider");
      return this.db.transaction(async (tx) => {
        const [updated] = await tx.update(sandboxes).set({ network: next }).where(eq(sandboxes.id, row.id)).returning();
        const shown = { allowInternetAccess: next.allowInternetAccess, allowOut: next.allowOut, denyOut: next.denyOut };
        await recordEvent(tx, { organizationId, resourceType: "sandbox", resourceId: row.id, type: "sandbox.lifecycle.updated", data: { changed: ["network"], network: shown } });
        return updated;
      });
    });
  }

  /**
   * The running sandbox a request from outside names (host routing), whatever its
   * organization: the caller's token, or the sandbox's public traffic, decides (src/e2b).
   * A paused one with autoResume too, still paused.
   */
  async running(id: string): Promise<SandboxRow | undefined> {
    if (!isWellFormedId(id, "sbx_")) return undefined;
    const [row] = await this.db
      .select()
      .from(sandboxes)
      .where(and(eq(sandboxes.id, id), inArray(sandboxes.status, ["running", "paused"])));
    // autoResume (E2B's lifecycle): a request to one of its ports resumes it, once the
    // caller has passed the sandbox's traffic check (the caller resumes it: src/e2b/data-plane.ts).
    if (row?.status === "paused" && !row.lifecycle?.autoResume) return undefined;
    return row;
  }

  /** A Unix socket that reaches `port` on the sandbox's loopback. */
  async portSocket(row: SandboxRow, port: number): Promise<string> {
    const networking = this.networking(row);
    return this.svc.call(() => networking.portSocket(row.id, row.backendState, port), "failed to reach the sandbox's port in provider");
  }
}
