ALTER TABLE "api_keys" ADD COLUMN "leases" jsonb DEFAULT '{}'::jsonb NOT NULL;--> statement-breakpoint
ALTER TABLE "organizations" ADD COLUMN "leases" jsonb DEFAULT '{}'::jsonb NOT NULL;--> statement-breakpoint
ALTER TABLE "api_keys" DROP COLUMN "reserved";--> statement-breakpoint
ALTER TABLE "api_keys" DROP COLUMN "reserved_until";--> statement-breakpoint
ALTER TABLE "organizations" DROP COLUMN "reserved";--> statement-breakpoint
ALTER TABLE "organizations" DROP COLUMN "reserved_until";