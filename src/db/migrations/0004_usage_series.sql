CREATE TABLE "usage_requests" (
	"series_id" integer NOT NULL,
	"request_id" text NOT NULL,
	"input_tokens" integer DEFAULT 0 NOT NULL,
	"output_tokens" integer DEFAULT 0 NOT NULL,
	"cost" numeric(18, 9),
	"latency_ms" integer NOT NULL,
	"status" integer NOT NULL,
	"streamed" boolean NOT NULL,
	"created_at" timestamp (3) with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE TABLE "usage_series" (
	"id" integer PRIMARY KEY GENERATED ALWAYS AS IDENTITY (sequence name "usage_series_id_seq" INCREMENT BY 1 MINVALUE 1 MAXVALUE 2147483647 START WITH 1 CACHE 1),
	"organization_id" text NOT NULL,
	"key_id" text NOT NULL,
	"surface" text NOT NULL,
	"public_model" text NOT NULL,
	"upstream_model" text,
	"provider" text,
	CONSTRAINT "usage_series_dims_key" UNIQUE NULLS NOT DISTINCT("key_id","surface","public_model","upstream_model","provider","organization_id")
);
--> statement-breakpoint
-- Usage recorded before this migration moves into the two tables (hand-written part).
INSERT INTO "usage_series" ("organization_id", "key_id", "surface", "public_model", "upstream_model", "provider")
	SELECT DISTINCT "organization_id", "key_id", "surface", "public_model", "upstream_model", "provider" FROM "usage_records";--> statement-breakpoint
INSERT INTO "usage_requests" ("series_id", "request_id", "input_tokens", "output_tokens", "cost", "latency_ms", "status", "streamed", "created_at")
	SELECT s."id", u."request_id", u."input_tokens", u."output_tokens", u."cost", u."latency_ms", u."status", u."streamed", u."created_at"
	FROM "usage_records" u JOIN "usage_series" s
	ON s."key_id" = u."key_id" AND s."surface" = u."surface" AND s."public_model" = u."public_model" AND s."organization_id" = u."organization_id"
	AND s."upstream_model" IS NOT DISTINCT FROM u."upstream_model" AND s."provider" IS NOT DISTINCT FROM u."provider";--> statement-breakpoint
DROP TABLE "usage_records" CASCADE;--> statement-breakpoint
CREATE INDEX "usage_requests_series_idx" ON "usage_requests" USING btree ("series_id","created_at");--> statement-breakpoint
CREATE VIEW "public"."usage_records" AS (select s.organization_id, s.key_id, r.request_id, s.surface, s.public_model, s.upstream_model, s.provider, r.input_tokens, r.output_tokens, r.cost, r.latency_ms, r.status, r.streamed, r.created_at from "usage_requests" r join "usage_series" s on s.id = r.series_id);