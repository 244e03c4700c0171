CREATE TABLE "agent_endpoints" (
	"id" text PRIMARY KEY NOT NULL,
	"organization_id" text NOT NULL,
	"name" text NOT NULL,
	"description" text,
	"agent_id" text NOT NULL,
	"agent_version" integer NOT NULL,
	"environment_id" text NOT NULL,
	"metadata" jsonb NOT NULL,
	"created_at" timestamp (3) with time zone NOT NULL,
	"updated_at" timestamp (3) with time zone NOT NULL
);
--> statement-breakpoint
CREATE TABLE "deployment_runs" (
	"id" text PRIMARY KEY NOT NULL,
	"organization_id" text NOT NULL,
	"deployment_id" text NOT NULL,
	"agent_id" text NOT NULL,
	"agent_version" integer NOT NULL,
	"trigger" text NOT NULL,
	"scheduled_at" timestamp (3) with time zone,
	"session_id" text,
	"error" jsonb,
	"created_at" timestamp (3) with time zone NOT NULL
);
--> statement-breakpoint
CREATE TABLE "deployments" (
	"id" text PRIMARY KEY NOT NULL,
	"organization_id" text NOT NULL,
	"key_id" text NOT NULL,
	"name" text NOT NULL,
	"description" text,
	"agent_id" text NOT NULL,
	"agent_version" integer NOT NULL,
	"environment_id" text NOT NULL,
	"initial_events" jsonb NOT NULL,
	"metadata" jsonb NOT NULL,
	"schedule_expression" text,
	"schedule_timezone" text,
	"next_run_at" timestamp (3) with time zone,
	"last_run_at" timestamp (3) with time zone,
	"status" text NOT NULL,
	"paused_reason" jsonb,
	"archived_at" timestamp (3) with time zone,
	"created_at" timestamp (3) with time zone NOT NULL,
	"updated_at" timestamp (3) with time zone NOT NULL
);
--> statement-breakpoint
CREATE INDEX "agent_endpoints_org_idx" ON "agent_endpoints" USING btree ("organization_id","id");--> statement-breakpoint
CREATE UNIQUE INDEX "deployment_runs_scheduled_idx" ON "deployment_runs" USING btree ("deployment_id","scheduled_at");--> statement-breakpoint
CREATE INDEX "deployment_runs_org_idx" ON "deployment_runs" USING btree ("organization_id","id");--> statement-breakpoint
CREATE INDEX "deployment_runs_deployment_idx" ON "deployment_runs" USING btree ("deployment_id","id");--> statement-breakpoint
CREATE INDEX "deployments_org_idx" ON "deployments" USING btree ("organization_id","id");--> statement-breakpoint
CREATE INDEX "deployments_due_idx" ON "deployments" USING btree ("next_run_at");