CREATE TABLE "api_keys" (
	"id" text PRIMARY KEY NOT NULL,
	"organization_id" text NOT NULL,
	"name" text NOT NULL,
	"key_hash" text NOT NULL,
	"key_prefix" text NOT NULL,
	"enabled" boolean DEFAULT true NOT NULL,
	"spending_limit" numeric(18, 6),
	"spent" numeric(18, 6) DEFAULT 0 NOT NULL,
	"rpm" integer,
	"expires_at" timestamp with time zone,
	"scopes" text[] DEFAULT '{}' NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL,
	"revoked_at" timestamp with time zone,
	CONSTRAINT "api_keys_key_hash_unique" UNIQUE("key_hash")
);
--> statement-breakpoint
CREATE TABLE "organizations" (
	"id" text PRIMARY KEY NOT NULL,
	"name" text NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "organizations_name_unique" UNIQUE("name")
);
--> statement-breakpoint
CREATE TABLE "events" (
	"id" text PRIMARY KEY NOT NULL,
	"organization_id" text NOT NULL,
	"resource_type" text NOT NULL,
	"resource_id" text NOT NULL,
	"agent_id" text,
	"type" text NOT NULL,
	"sandbox_id" text DEFAULT '' NOT NULL,
	"data" jsonb NOT NULL,
	"created_at" timestamp (3) with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE TABLE "webhook_attempts" (
	"id" bigint PRIMARY KEY GENERATED ALWAYS AS IDENTITY (sequence name "webhook_attempts_id_seq" INCREMENT BY 1 MINVALUE 1 MAXVALUE 9223372036854775807 START WITH 1 CACHE 1),
	"delivery_id" bigint NOT NULL,
	"attempt" integer NOT NULL,
	"started_at" timestamp (3) with time zone NOT NULL,
	"status_code" integer,
	"latency_ms" integer NOT NULL,
	"error" text,
	"ok" boolean NOT NULL,
	"worker" text DEFAULT '' NOT NULL
);
--> statement-breakpoint
CREATE TABLE "webhook_deliveries" (
	"id" bigint PRIMARY KEY GENERATED ALWAYS AS IDENTITY (sequence name "webhook_deliveries_id_seq" INCREMENT BY 1 MINVALUE 1 MAXVALUE 9223372036854775807 START WITH 1 CACHE 1),
	"event_id" text NOT NULL,
	"webhook_id" text NOT NULL,
	"organization_id" text NOT NULL,
	"status" text DEFAULT 'pending' NOT NULL,
	"attempts" integer DEFAULT 0 NOT NULL,
	"next_attempt_at" timestamp (3) with time zone DEFAULT now() NOT NULL,
	"last_status_code" integer,
	"last_error" text,
	"created_at" timestamp (3) with time zone DEFAULT now() NOT NULL,
	"finished_at" timestamp (3) with time zone
);
--> statement-breakpoint
CREATE TABLE "webhooks" (
	"id" text PRIMARY KEY NOT NULL,
	"organization_id" text NOT NULL,
	"name" text NOT NULL,
	"url" text NOT NULL,
	"resource_type" text NOT NULL,
	"events" jsonb NOT NULL,
	"enabled" boolean DEFAULT true NOT NULL,
	"signature_secret" text NOT NULL,
	"created_at" timestamp (3) with time zone DEFAULT now() NOT NULL,
	"updated_at" timestamp (3) with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE TABLE "usage_records" (
	"id" text PRIMARY KEY NOT NULL,
	"organization_id" text NOT NULL,
	"key_id" text NOT NULL,
	"request_id" text NOT NULL,
	"surface" text NOT NULL,
	"public_model" text NOT NULL,
	"upstream_model" text,
	"provider" text,
	"input_tokens" integer DEFAULT 0 NOT NULL,
	"output_tokens" integer DEFAULT 0 NOT NULL,
	"cost" numeric(18, 9),
	"latency_ms" integer NOT NULL,
	"status" integer NOT NULL,
	"streamed" boolean NOT NULL,
	"created_at" timestamp (3) with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE TABLE "gateway_interactions" (
	"id" text PRIMARY KEY NOT NULL,
	"organization_id" text NOT NULL,
	"key_id" text NOT NULL,
	"provider" text NOT NULL,
	"upstream_model" text NOT NULL,
	"public_model" text NOT NULL,
	"metered" boolean DEFAULT false NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE TABLE "sandboxes" (
	"id" text PRIMARY KEY NOT NULL,
	"organization_id" text NOT NULL,
	"template_id" text NOT NULL,
	"backend" text NOT NULL,
	"status" text NOT NULL,
	"metadata" jsonb NOT NULL,
	"env_vars" jsonb NOT NULL,
	"backend_state" jsonb NOT NULL,
	"started_at" timestamp (3) with time zone NOT NULL,
	"end_at" timestamp (3) with time zone NOT NULL,
	"stopped_at" timestamp (3) with time zone,
	"stop_reason" text
);
--> statement-breakpoint
CREATE TABLE "agent_environments" (
	"id" text PRIMARY KEY NOT NULL,
	"organization_id" text NOT NULL,
	"name" text NOT NULL,
	"description" text,
	"config" jsonb NOT NULL,
	"metadata" jsonb NOT NULL,
	"archived_at" timestamp (3) with time zone,
	"created_at" timestamp (3) with time zone NOT NULL,
	"updated_at" timestamp (3) with time zone NOT NULL
);
--> statement-breakpoint
CREATE TABLE "agent_session_events" (
	"seq" bigserial PRIMARY KEY NOT NULL,
	"id" text NOT NULL,
	"session_id" text NOT NULL,
	"organization_id" text NOT NULL,
	"type" text NOT NULL,
	"payload" jsonb NOT NULL,
	"created_at" timestamp (3) with time zone NOT NULL
);
--> statement-breakpoint
CREATE TABLE "agent_sessions" (
	"id" text PRIMARY KEY NOT NULL,
	"organization_id" text NOT NULL,
	"key_id" text NOT NULL,
	"agent_id" text NOT NULL,
	"agent_version" integer NOT NULL,
	"environment_id" text NOT NULL,
	"status" text NOT NULL,
	"title" text,
	"metadata" jsonb NOT NULL,
	"usage" jsonb NOT NULL,
	"sandbox_id" text,
	"lease_owner" text,
	"lease_until" timestamp (3) with time zone,
	"idle_since" timestamp (3) with time zone,
	"archived_at" timestamp (3) with time zone,
	"created_at" timestamp (3) with time zone NOT NULL,
	"updated_at" timestamp (3) with time zone NOT NULL
);
--> statement-breakpoint
CREATE TABLE "agent_versions" (
	"id" text NOT NULL,
	"version" integer NOT NULL,
	"organization_id" text NOT NULL,
	"name" text NOT NULL,
	"description" text,
	"model" jsonb NOT NULL,
	"system" text,
	"tools" jsonb NOT NULL,
	"mcp_servers" jsonb NOT NULL,
	"metadata" jsonb NOT NULL,
	"archived_at" timestamp (3) with time zone,
	"created_at" timestamp (3) with time zone NOT NULL,
	"updated_at" timestamp (3) with time zone NOT NULL,
	CONSTRAINT "agent_versions_id_version_pk" PRIMARY KEY("id","version")
);
--> statement-breakpoint
CREATE TABLE "generation_media" (
	"token" text PRIMARY KEY NOT NULL,
	"prediction_id" text NOT NULL,
	"organization_id" text NOT NULL,
	"storage_key" text NOT NULL,
	"content_type" text NOT NULL,
	"bytes" integer NOT NULL,
	"created_at" timestamp (3) with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE TABLE "predictions" (
	"id" text PRIMARY KEY NOT NULL,
	"organization_id" text NOT NULL,
	"key_id" text NOT NULL,
	"model" text NOT NULL,
	"generation_type" text NOT NULL,
	"mode" text NOT NULL,
	"input" jsonb NOT NULL,
	"status" text NOT NULL,
	"base_url" text NOT NULL,
	"provider" text,
	"upstream_model" text,
	"upstream_job" text,
	"attempts" integer DEFAULT 0 NOT NULL,
	"run_after" timestamp (3) with time zone DEFAULT now() NOT NULL,
	"deadline_at" timestamp (3) with time zone NOT NULL,
	"outputs" jsonb,
	"error_category" text,
	"error_message" text,
	"usage" jsonb,
	"estimated_cost" numeric(18, 9) NOT NULL,
	"final_cost" numeric(18, 9),
	"settlement" text DEFAULT 'pending' NOT NULL,
	"settled_at" timestamp (3) with time zone,
	"callback_url" text,
	"callback_status" text,
	"callback_attempts" integer DEFAULT 0 NOT NULL,
	"callback_next_at" timestamp (3) with time zone,
	"callback_last_error" text,
	"created_at" timestamp (3) with time zone DEFAULT now() NOT NULL,
	"started_at" timestamp (3) with time zone,
	"completed_at" timestamp (3) with time zone,
	"archived_at" timestamp (3) with time zone
);
--> statement-breakpoint
ALTER TABLE "api_keys" ADD CONSTRAINT "api_keys_organization_id_organizations_id_fk" FOREIGN KEY ("organization_id") REFERENCES "public"."organizations"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "webhook_attempts" ADD CONSTRAINT "webhook_attempts_delivery_id_webhook_deliveries_id_fk" FOREIGN KEY ("delivery_id") REFERENCES "public"."webhook_deliveries"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "webhook_deliveries" ADD CONSTRAINT "webhook_deliveries_event_id_events_id_fk" FOREIGN KEY ("event_id") REFERENCES "public"."events"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "webhook_deliveries" ADD CONSTRAINT "webhook_deliveries_webhook_id_webhooks_id_fk" FOREIGN KEY ("webhook_id") REFERENCES "public"."webhooks"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "api_keys_org_idx" ON "api_keys" USING btree ("organization_id");--> statement-breakpoint
CREATE INDEX "api_keys_updated_idx" ON "api_keys" USING btree ("updated_at");--> statement-breakpoint
CREATE INDEX "events_org_type_idx" ON "events" USING btree ("organization_id","resource_type","id");--> statement-breakpoint
CREATE INDEX "events_resource_idx" ON "events" USING btree ("resource_id","id");--> statement-breakpoint
CREATE INDEX "webhook_attempts_delivery_idx" ON "webhook_attempts" USING btree ("delivery_id","attempt");--> statement-breakpoint
CREATE INDEX "webhook_deliveries_pending_idx" ON "webhook_deliveries" USING btree ("webhook_id","next_attempt_at") WHERE status = 'pending';--> statement-breakpoint
CREATE INDEX "webhook_deliveries_webhook_idx" ON "webhook_deliveries" USING btree ("webhook_id","id");--> statement-breakpoint
CREATE INDEX "webhooks_org_idx" ON "webhooks" USING btree ("organization_id","resource_type");--> statement-breakpoint
CREATE INDEX "usage_records_org_idx" ON "usage_records" USING btree ("organization_id","created_at");--> statement-breakpoint
CREATE INDEX "usage_records_key_idx" ON "usage_records" USING btree ("key_id","created_at");--> statement-breakpoint
CREATE INDEX "gateway_interactions_key_idx" ON "gateway_interactions" USING btree ("key_id");--> statement-breakpoint
CREATE INDEX "sandboxes_org_idx" ON "sandboxes" USING btree ("organization_id","id");--> statement-breakpoint
CREATE INDEX "sandboxes_status_end_idx" ON "sandboxes" USING btree ("status","end_at");--> statement-breakpoint
CREATE INDEX "agent_environments_org_idx" ON "agent_environments" USING btree ("organization_id","id");--> statement-breakpoint
CREATE UNIQUE INDEX "agent_session_events_id_idx" ON "agent_session_events" USING btree ("id");--> statement-breakpoint
CREATE INDEX "agent_session_events_session_idx" ON "agent_session_events" USING btree ("session_id","seq");--> statement-breakpoint
CREATE INDEX "agent_sessions_org_idx" ON "agent_sessions" USING btree ("organization_id","id");--> statement-breakpoint
CREATE INDEX "agent_sessions_status_idx" ON "agent_sessions" USING btree ("status","lease_until");--> statement-breakpoint
CREATE INDEX "agent_versions_org_idx" ON "agent_versions" USING btree ("organization_id","id");--> statement-breakpoint
CREATE INDEX "generation_media_prediction_idx" ON "generation_media" USING btree ("prediction_id");--> statement-breakpoint
CREATE INDEX "predictions_due_idx" ON "predictions" USING btree ("run_after") WHERE status in ('starting', 'processing');--> statement-breakpoint
CREATE INDEX "predictions_org_idx" ON "predictions" USING btree ("organization_id","id");--> statement-breakpoint
CREATE INDEX "predictions_key_pending_idx" ON "predictions" USING btree ("key_id") WHERE settlement = 'pending';--> statement-breakpoint
CREATE INDEX "predictions_callback_idx" ON "predictions" USING btree ("callback_next_at") WHERE callback_status = 'pending';--> statement-breakpoint
CREATE INDEX "predictions_unarchived_idx" ON "predictions" USING btree ("created_at") WHERE archived_at is null;