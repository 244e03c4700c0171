import { index, integer, jsonb, pgTable, primaryKey, real, text, timestamp, uniqueIndex } from "drizzle-orm/pg-core";
import type { BuildSpec, TemplateRunConfig } from "./build-spec";

const at = (name: string) => timestamp(name, { withTimezone: true, precision: 3 });

/**
 * Templates an organization built (E2B's Template SDK, a Dockerfile, our API). The shipped
 * and CONFIG_FILE templates are configuration, not rows: every organization sees them,
 * read-only. `name` is what clients pass as `templateID` (E2B's alias), unique per
 * organization; `id` (`tpl_...`) is stable across rebuilds.
 */
export const templates = pgTable(
  "templates",
  {
    id: text("id").primaryKey(),
    organizationId: text("organization_id").notNull(),
    name: text("name").notNull(),
    createdAt: at("created_at").notNull().defaultNow(),
    updatedAt: at("updated_at").notNull().defaultNow(),
    lastSpawnedAt: at("last_spawned_at"),
    spawnCount: integer("spawn_count").notNull().default(0),
  },
  (t) => [uniqueIndex("templates_org_name_idx").on(t.organizationId, t.name)],
);

/**
 * One build of a template: what it was asked (`spec`), where it got (`status`, `reason`),
 * and what it made: `layers` (layer digests, bottom first, of the layer store) and
 * `config` (environment, user, workdir, start and ready commands of its sandboxes).
 */
export const templateBuilds = pgTable(
  "template_builds",
  {
    id: text("id").primaryKey(),
    templateId: text("template_id").notNull(),
    organizationId: text("organization_id").notNull(),
    /** waiting (requested, not started) | building | ready | error */
    status: text("status").notNull(),
    spec: jsonb("spec").$type<BuildSpec>(),
    /** Tags the build gets when it succeeds (asked for when it was requested). */
    tags: jsonb("tags").notNull().$type<string[]>(),
    layers: jsonb("layers").$type<string[]>(),
    config: jsonb("config").$type<TemplateRunConfig>(),
    reason: jsonb("reason").$type<{ message: string; step?: string }>(),
    cpuCount: real("cpu_count"),
    memoryMB: integer("memory_mb"),
    createdAt: at("created_at").notNull().defaultNow(),
    updatedAt: at("updated_at").notNull().defaultNow(),
    finishedAt: at("finished_at"),
  },
  (t) => [index("template_builds_template_idx").on(t.templateId, t.createdAt)],
);

/** Tags of a template point at one of its builds; `default` is what the bare name starts. */
export const templateTags = pgTable(
  "template_tags",
  {
    templateId: text("template_id").notNull(),
    tag: text("tag").notNull(),
    buildId: text("build_id").notNull(),
    createdAt: at("created_at").notNull().defaultNow(),
  },
  (t) => [primaryKey({ columns: [t.templateId, t.tag] })],
);

/** A build's log, in order; the SDK polls it by offset. */
export const templateBuildLogs = pgTable(
  "template_build_logs",
  {
    buildId: text("build_id").notNull(),
    seq: integer("seq").notNull(),
    at: at("at").notNull(),
    level: text("level").notNull(),
    message: text("message").notNull(),
    step: text("step"),
  },
  (t) => [primaryKey({ columns: [t.buildId, t.seq] })],
);

/**
 * The layer each step made, by its cache key (the organization, the parent layers' digest,
 * the step and its files hash): a rebuild that reaches an unchanged step takes the layer
 * instead of running it. Per organization, so one cannot learn from a cache hit whether
 * another has built some files.
 */
export const templateStepCache = pgTable("template_step_cache", {
  key: text("key").primaryKey(),
  organizationId: text("organization_id").notNull(),
  layer: text("layer").notNull(),
  createdAt: at("created_at").notNull().defaultNow(),
});

export type TemplateRow = typeof templates.$inferSelect;
export type TemplateBuildRow = typeof templateBuilds.$inferSelect;
