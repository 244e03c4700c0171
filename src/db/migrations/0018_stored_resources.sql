CREATE TABLE "gateway_stored_resources" (
	"id" text PRIMARY KEY NOT NULL,
	"kind" text NOT NULL,
	"organization_id" text NOT NULL,
	"key_id" text NOT NULL,
	"provider" text NOT NULL,
	"object" jsonb NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE INDEX "gateway_stored_resources_org_idx" ON "gateway_stored_resources" USING btree ("organization_id","kind","created_at");