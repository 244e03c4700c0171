CREATE TABLE "sandbox_snapshots" (
	"id" text PRIMARY KEY NOT NULL,
	"organization_id" text NOT NULL,
	"sandbox_id" text NOT NULL,
	"template_id" text NOT NULL,
	"backend" text NOT NULL,
	"name" text,
	"size_bytes" bigint NOT NULL,
	"created_at" timestamp (3) with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
ALTER TABLE "sandboxes" ADD COLUMN "paused_at" timestamp (3) with time zone;--> statement-breakpoint
ALTER TABLE "sandboxes" ADD COLUMN "lifecycle" jsonb;--> statement-breakpoint
CREATE INDEX "sandbox_snapshots_org_idx" ON "sandbox_snapshots" USING btree ("organization_id","id");