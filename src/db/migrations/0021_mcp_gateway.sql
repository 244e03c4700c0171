CREATE TABLE "mcp_servers" (
	"id" text PRIMARY KEY NOT NULL,
	"organization_id" text NOT NULL,
	"name" text NOT NULL,
	"url" text NOT NULL,
	"transport" text DEFAULT 'streamable-http' NOT NULL,
	"header_names" text[] DEFAULT '{}' NOT NULL,
	"oauth" jsonb,
	"credentials" text,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"updated_at" timestamp (3) with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "mcp_servers_org_name_key" UNIQUE("organization_id","name")
);
--> statement-breakpoint
ALTER TABLE "api_keys" ADD COLUMN "mcp" jsonb;--> statement-breakpoint
ALTER TABLE "usage_requests" ADD COLUMN "response_bytes" integer DEFAULT 0 NOT NULL;--> statement-breakpoint
-- The key-change notification carries the MCP allow list too (src/keys/auth-cache.ts).
CREATE OR REPLACE FUNCTION api_keys_notify_change() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  payload text;
BEGIN
  IF TG_OP = 'DELETE' THEN
    PERFORM pg_notify('api_keys_changed', json_build_object('keyHash', OLD.key_hash)::text);
    RETURN NULL;
  END IF;
  payload := json_build_object(
    'keyHash', NEW.key_hash, 'id', NEW.id, 'organizationId', NEW.organization_id, 'name', NEW.name,
    'keyPrefix', NEW.key_prefix, 'enabled', NEW.enabled, 'spendingLimit', NEW.spending_limit,
    'spendPeriod', NEW.spend_period, 'spent', NEW.spent, 'periodSpent', NEW.period_spent,
    'periodStart', NEW.period_start, 'rpm', NEW.rpm, 'tpm', NEW.tpm, 'expiresAt', NEW.expires_at,
    'scopes', NEW.scopes, 'mcp', NEW.mcp, 'createdAt', NEW.created_at, 'revokedAt', NEW.revoked_at, 'row', true
  )::text;
  IF octet_length(payload) > 7900 THEN
    payload := json_build_object('keyHash', NEW.key_hash)::text;
  END IF;
  PERFORM pg_notify('api_keys_changed', payload);
  RETURN NULL;
END;
$$;
