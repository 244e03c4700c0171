CREATE TABLE "gateway_responses" (
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
CREATE INDEX "gateway_responses_org_idx" ON "gateway_responses" USING btree ("organization_id");