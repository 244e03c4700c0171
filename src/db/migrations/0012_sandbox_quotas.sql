CREATE TABLE "sandbox_admissions" (
	"sandbox_id" text PRIMARY KEY NOT NULL,
	"organization_id" text NOT NULL,
	"memory_mb" integer NOT NULL,
	"cpu_count" real NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE TABLE "sandbox_quotas" (
	"organization_id" text PRIMARY KEY NOT NULL,
	"max_sandboxes" integer,
	"max_memory_mb" integer,
	"max_cpus" real,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE INDEX "sandbox_admissions_org_idx" ON "sandbox_admissions" USING btree ("organization_id");