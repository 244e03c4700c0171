CREATE TABLE "media_objects" (
	"key" text PRIMARY KEY NOT NULL,
	"content_type" text NOT NULL,
	"data" "bytea" NOT NULL,
	"created_at" timestamp (3) with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
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
CREATE INDEX "sandboxes_node_idx" ON "sandboxes" USING btree ("node_id","status");--> statement-breakpoint
CREATE INDEX "sandboxes_destroy_pending_idx" ON "sandboxes" USING btree ("stop_requested_at") WHERE stop_requested_at is not null and status <> 'stopped';