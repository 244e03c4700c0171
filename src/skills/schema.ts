import { boolean, customType, index, integer, pgTable, primaryKey, text, timestamp } from "drizzle-orm/pg-core";

const ts = (name: string) => timestamp(name, { withTimezone: true, precision: 3 });

/**
 * Raw bytes. Bundle files live in the database, not on local disk: several service
 * processes share one PostgreSQL, and any of them may provision a session's sandbox.
 * postgres.js hands back a Buffer and PGlite a Uint8Array; both are Uint8Arrays.
 */
const bytea = customType<{ data: Uint8Array; driverData: Uint8Array }>({
  dataType: () => "bytea",
  toDriver: (v) => (Buffer.isBuffer(v) ? v : Buffer.from(v.buffer, v.byteOffset, v.byteLength)),
  fromDriver: (v) => (v instanceof Uint8Array ? v : new Uint8Array(v as ArrayBufferLike)),
});

/**
 * A Skill: a named, versioned bundle of instructions and files (spec: "Skills (reusable
 * instruction bundles)"). `name` is the kebab-case slug fixed by the first upload; every
 * version must keep it. `latest_version_id` is kept in the same transaction as the
 * versions it points into.
 */
export const skills = pgTable(
  "skills",
  {
    id: text("id").primaryKey(),
    organizationId: text("organization_id").notNull(),
    name: text("name").notNull(),
    displayName: text("display_name").notNull(),
    latestVersionId: text("latest_version_id").notNull(),
    createdAt: ts("created_at").notNull(),
    updatedAt: ts("updated_at").notNull(),
  },
  (t) => [index("skills_org_idx").on(t.organizationId, t.id)],
);

/** One uploaded bundle of a skill. Versions are immutable; deleting one removes its files. */
export const skillVersions = pgTable(
  "skill_versions",
  {
    id: text("id").primaryKey(),
    skillId: text("skill_id").notNull(),
    organizationId: text("organization_id").notNull(),
    name: text("name").notNull(),
    description: text("description").notNull(),
    fileCount: integer("file_count").notNull(),
    totalBytes: integer("total_bytes").notNull(),
    createdAt: ts("created_at").notNull(),
  },
  (t) => [index("skill_versions_skill_idx").on(t.skillId, t.id)],
);

/** The files of a version; `path` is relative to the skill's directory (`SKILL.md`, `scripts/run.py`). */
export const skillFiles = pgTable(
  "skill_files",
  {
    versionId: text("version_id").notNull(),
    path: text("path").notNull(),
    content: bytea("content").notNull(),
    /** Installed with the execute bit (a zip entry's mode said so, or the file starts with `#!`). */
    executable: boolean("executable").notNull(),
  },
  (t) => [primaryKey({ columns: [t.versionId, t.path] })],
);

export type SkillRow = typeof skills.$inferSelect;
export type SkillVersionRow = typeof skillVersions.$inferSelect;
