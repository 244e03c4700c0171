import { and, desc, eq, isNull, lt } from "drizzle-orm";
import { ApiError } from "../http/errors";
import type { Db } from "../db/client";
import { isWellFormedId, newId } from "../ids";
import { checkAllowList } from "../sandboxes/network";
import { iso, mergeMetadata, type Page, pageOf } from "./page";
import { type EnvironmentRow, agentEnvironments } from "./schema";

/**
 * How a session's tools run. `config` follows the SDK's cloud config (`networking`,
 * `packages`) plus one field of ours: `template`, the sandbox template (and so the
 * backend) the session's sandbox is created from (default `base`).
 * Networking defaults to none: `limited` with no allowed hosts. It becomes the session
 * sandbox's network (packages.ts sessionNetwork).
 */
export interface EnvironmentConfig {
  type: "cloud";
  template: string;
  networking: Record<string, unknown>;
  packages: { type: "packages"; apt: string[]; cargo: string[]; gem: string[]; go: string[]; npm: string[]; pip: string[] };
}

export const NO_NETWORK = { type: "limited", allowed_hosts: [], allow_mcp_servers: false, allow_package_managers: false };
const PACKAGE_MANAGERS = ["apt", "cargo", "gem", "go", "npm", "pip"] as const;
// Package names go to a shell inside the sandbox: only plain package spellings pass.
const PACKAGE_NAME = /^[A-Za-z0-9][A-Za-z0-9._+\-=<>~@/:]*$/;

export function normalizeConfig(input: any, templates: Set<string>, current?: EnvironmentConfig): EnvironmentConfig {
  if (input?.type === "self_hosted") throw new ApiError(400, "self_hosted environments are not supported; use type 'cloud'");
  const base = current ?? { type: "cloud", template: "base", networking: NO_NETWORK, packages: { type: "packages", apt: [], cargo: [], gem: [], go: [], npm: [], pip: [] } };
  if (input == null) return base;
  const template = input.template ?? base.template;
  if (!templates.has(template)) throw new ApiError(400, `unknown sandbox template '${template}' (known: ${[...templates].join(", ")})`);
  const packages = { ...base.packages };
  for (const m of PACKAGE_MANAGERS) {
    const list = input.packages?.[m];
    if (list == null) continue;
    for (const p of list) if (!PACKAGE_NAME.test(p)) throw new ApiError(400, `config.packages.${m}: invalid package name '${p}'`);
    packages[m] = list;
  }
  let networking = base.networking;
  if (input.networking) {
    networking =
      input.networking.type === "unrestricted"
        ? { type: "unrestricted" }
        : {
            type: "limited",
            allowed_hosts: checkAllowList("config.networking.allowed_hosts", input.networking.allowed_hosts),
            allow_mcp_servers: input.networking.allow_mcp_servers ?? false,
            allow_package_managers: input.networking.allow_package_managers ?? false,
          };
  }
  return { type: "cloud", template, networking, packages };
}

export function environmentJson(r: EnvironmentRow) {
  return {
    id: r.id,
    type: "environment" as const,
    name: r.name,
    description: r.description,
    config: r.config,
    metadata: r.metadata,
    scope: "organization" as const,
    archived_at: iso(r.archivedAt),
    created_at: r.createdAt.toISOString(),
    updated_at: r.updatedAt.toISOString(),
  };
}

export class EnvironmentRepository {
  constructor(
    private readonly db: Db,
    private readonly templates: () => Set<string>,
  ) {}

  async create(organizationId: string, input: { name: string; description?: string | null; config?: unknown; metadata?: Record<string, string> }): Promise<EnvironmentRow> {
    const now = new Date();
    const [row] = await this.db
      .insert(agentEnvironments)
      .values({
        id: newId("env_"),
        organizationId,
        name: input.name,
        description: input.description ?? null,
        config: normalizeConfig(input.config, this.templates()) as unknown as Record<string, unknown>,
        metadata: input.metadata ?? {},
        createdAt: now,
        updatedAt: now,
      })
      .returning();
    return row;
  }

  async get(organizationId: string, id: string): Promise<EnvironmentRow> {
    if (!isWellFormedId(id, "env_")) throw new ApiError(404, "environment not found");
    const [row] = await this.db.select().from(agentEnvironments).where(and(eq(agentEnvironments.id, id), eq(agentEnvironments.organizationId, organizationId)));
    if (!row) throw new ApiError(404, "environment not found");
    return row;
  }

  async update(organizationId: string, id: string, input: { name?: string | null; description?: string | null; config?: unknown; metadata?: Record<string, string | null> }): Promise<EnvironmentRow> {
    const cur = await this.get(organizationId, id);
    if (cur.archivedAt) throw new ApiError(400, "environment is archived");
    const [row] = await this.db
      .update(agentEnvironments)
      .set({
        name: input.name ?? cur.name,
        description: input.description === undefined ? cur.description : input.description,
        config: (input.config === undefined ? cur.config : normalizeConfig(input.config, this.templates(), cur.config as unknown as EnvironmentConfig)) as Record<string, unknown>,
        metadata: mergeMetadata(cur.metadata, input.metadata),
        updatedAt: new Date(),
      })
      .where(eq(agentEnvironments.id, id))
      .returning();
    return row;
  }

  async archive(organizationId: string, id: string): Promise<EnvironmentRow> {
    const cur = await this.get(organizationId, id);
    if (cur.archivedAt) return cur;
    const [row] = await this.db.update(agentEnvironments).set({ archivedAt: new Date(), updatedAt: new Date() }).where(eq(agentEnvironments.id, id)).returning();
    return row;
  }

  async delete(organizationId: string, id: string): Promise<void> {
    await this.get(organizationId, id);
    await this.db.delete(agentEnvironments).where(eq(agentEnvironments.id, id));
  }

  async list(organizationId: string, opts: { limit: number; after?: string; includeArchived: boolean }): Promise<Page<ReturnType<typeof environmentJson>>> {
    const rows = await this.db
      .select()
      .from(agentEnvironments)
      .where(
        and(
          eq(agentEnvironments.organizationId, organizationId),
          opts.includeArchived ? undefined : isNull(agentEnvironments.archivedAt),
          opts.after ? lt(agentEnvironments.id, opts.after) : undefined,
        ),
      )
      .orderBy(desc(agentEnvironments.id))
      .limit(opts.limit + 1);
    return pageOf(rows, opts.limit, environmentJson, (r) => r.id);
  }
}
