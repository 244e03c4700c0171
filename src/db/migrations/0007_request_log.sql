CREATE TABLE "usage_hourly" (
	"series_id" integer NOT NULL,
	"hour" timestamp with time zone NOT NULL,
	"requests" bigint NOT NULL,
	"input_tokens" bigint NOT NULL,
	"output_tokens" bigint NOT NULL,
	"cached_tokens" bigint NOT NULL,
	"cost" numeric(24, 9) NOT NULL,
	CONSTRAINT "usage_hourly_series_id_hour_pk" PRIMARY KEY("series_id","hour")
);
--> statement-breakpoint
DROP VIEW "public"."usage_records";--> statement-breakpoint
ALTER TABLE "usage_requests" ADD COLUMN "id" bigint NOT NULL GENERATED ALWAYS AS IDENTITY (sequence name "usage_requests_id_seq" INCREMENT BY 1 MINVALUE 1 MAXVALUE 9223372036854775807 START WITH 1 CACHE 1);--> statement-breakpoint
ALTER TABLE "usage_requests" ADD COLUMN "attempts" integer DEFAULT 1 NOT NULL;--> statement-breakpoint
ALTER TABLE "usage_requests" ADD COLUMN "cached_tokens" integer DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE "usage_requests" ADD COLUMN "request_body" text;--> statement-breakpoint
ALTER TABLE "usage_requests" ADD COLUMN "response_body" text;--> statement-breakpoint
CREATE INDEX "usage_hourly_hour_idx" ON "usage_hourly" USING btree ("hour");--> statement-breakpoint
CREATE INDEX "usage_requests_time_idx" ON "usage_requests" USING btree ("created_at");--> statement-breakpoint
CREATE INDEX "usage_series_org_idx" ON "usage_series" USING btree ("organization_id");--> statement-breakpoint
CREATE VIEW "public"."usage_records" AS (select s.organization_id, s.key_id, r.request_id, s.surface, s.public_model, s.upstream_model, s.provider, r.input_tokens, r.output_tokens, r.cost, r.latency_ms, r.status, r.streamed, r.attempts, r.cached_tokens, r.created_at from "usage_requests" r join "usage_series" s on s.id = r.series_id);--> statement-breakpoint
-- Usage recorded before this migration gets its hourly sums (hand-written part).
INSERT INTO "usage_hourly" ("series_id", "hour", "requests", "input_tokens", "output_tokens", "cached_tokens", "cost")
	SELECT "series_id", date_trunc('hour', "created_at", 'UTC'), count(*), sum("input_tokens"), sum("output_tokens"), sum("cached_tokens"), coalesce(sum("cost"), 0)
	FROM "usage_requests" GROUP BY 1, 2;
