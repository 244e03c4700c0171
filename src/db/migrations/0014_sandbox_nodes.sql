CREATE TABLE "sandbox_nodes" (
	"id" text PRIMARY KEY NOT NULL,
	"url" text NOT NULL,
	"cpus" real NOT NULL,
	"memory_mb" integer NOT NULL,
	"started_at" timestamp (3) with time zone NOT NULL,
	"heartbeat_at" timestamp (3) with time zone NOT NULL,
	"lost_at" timestamp (3) with time zone
);
--> statement-breakpoint
ALTER TABLE "sandboxes" ADD COLUMN "node_id" text;--> statement-breakpoint
ALTER TABLE "sandboxes" ADD COLUMN "stop_requested_at" timestamp (3) with time zone;--> statement-breakpoint
ALTER TABLE "sandboxes" ADD COLUMN "destroy_error" text;--> statement-breakpoint
CREATE INDEX "sandboxes_node_idx" ON "sandboxes" USING btree ("node_id","status");