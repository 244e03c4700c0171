DROP VIEW "public"."usage_records";--> statement-breakpoint
ALTER TABLE "api_keys" ADD COLUMN "reserved" numeric(18, 9) DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE "api_keys" ADD COLUMN "reserved_until" timestamp with time zone;--> statement-breakpoint
ALTER TABLE "organizations" ADD COLUMN "reserved" numeric(18, 9) DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE "organizations" ADD COLUMN "reserved_until" timestamp with time zone;--> statement-breakpoint
ALTER TABLE "usage_hourly" ADD COLUMN "cache_write_tokens" bigint DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE "usage_hourly" ADD COLUMN "reasoning_tokens" bigint DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE "usage_requests" ADD COLUMN "cache_write_tokens" integer DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE "usage_requests" ADD COLUMN "cache_write_1h_tokens" integer DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE "usage_requests" ADD COLUMN "reasoning_tokens" integer DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE "usage_requests" ADD COLUMN "input_audio_tokens" integer DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE "usage_requests" ADD COLUMN "output_audio_tokens" integer DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE "usage_requests" ADD COLUMN "estimated" boolean DEFAULT false NOT NULL;--> statement-breakpoint
CREATE VIEW "public"."usage_records" AS (select s.organization_id, s.key_id, r.request_id, s.surface, s.public_model, s.upstream_model, s.provider, r.input_tokens, r.output_tokens, r.cost, r.latency_ms, r.status, r.streamed, r.attempts, r.cached_tokens, r.cache_write_tokens, r.cache_write_1h_tokens, r.reasoning_tokens, r.input_audio_tokens, r.output_audio_tokens, r.estimated, r.created_at from "usage_requests" r join "usage_series" s on s.id = r.series_id);