ALTER TABLE "api_keys" ADD COLUMN "spend_period" text DEFAULT 'none' NOT NULL;--> statement-breakpoint
ALTER TABLE "api_keys" ADD COLUMN "period_spent" numeric(18, 6) DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE "api_keys" ADD COLUMN "period_start" timestamp with time zone;--> statement-breakpoint
ALTER TABLE "api_keys" ADD COLUMN "tpm" integer;--> statement-breakpoint
ALTER TABLE "organizations" ADD COLUMN "spending_limit" numeric(18, 6);--> statement-breakpoint
ALTER TABLE "organizations" ADD COLUMN "spend_period" text DEFAULT 'none' NOT NULL;--> statement-breakpoint
ALTER TABLE "organizations" ADD COLUMN "spent" numeric(18, 6) DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE "organizations" ADD COLUMN "period_spent" numeric(18, 6) DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE "organizations" ADD COLUMN "period_start" timestamp with time zone;--> statement-breakpoint
ALTER TABLE "organizations" ADD COLUMN "updated_at" timestamp with time zone DEFAULT now() NOT NULL;--> statement-breakpoint
-- The key cache's change notifications (0005) carry the budget columns and the token cap too.
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
    'scopes', NEW.scopes, 'createdAt', NEW.created_at, 'revokedAt', NEW.revoked_at, 'row', true
  )::text;
  IF octet_length(payload) > 7900 THEN
    payload := json_build_object('keyHash', NEW.key_hash)::text;
  END IF;
  PERFORM pg_notify('api_keys_changed', payload);
  RETURN NULL;
END;
$$;
--> statement-breakpoint
-- Every change of an organization that has (or just lost) a spending limit is announced on
-- channel organizations_changed with its budget, so each process's budget check sees spend
-- written by any process's usage meter at once (src/budgets/org-budgets.ts). Organizations
-- without a limit stay quiet: the meter updates their spend on every batch.
CREATE OR REPLACE FUNCTION organizations_notify_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF NEW.spending_limit IS NULL AND (TG_OP = 'INSERT' OR OLD.spending_limit IS NULL) THEN
    RETURN NULL;
  END IF;
  PERFORM pg_notify('organizations_changed', json_build_object(
    'id', NEW.id, 'spendingLimit', NEW.spending_limit, 'spendPeriod', NEW.spend_period,
    'spent', NEW.spent, 'periodSpent', NEW.period_spent, 'periodStart', NEW.period_start
  )::text);
  RETURN NULL;
END;
$$;
--> statement-breakpoint
CREATE TRIGGER organizations_notify_change AFTER INSERT OR UPDATE ON organizations FOR EACH ROW EXECUTE FUNCTION organizations_notify_change();
--> statement-breakpoint
-- An organization's spend so far, from its metered usage.
UPDATE organizations o SET spent = u.cost FROM (
  SELECT s.organization_id, sum(r.cost) AS cost FROM usage_requests r JOIN usage_series s ON s.id = r.series_id GROUP BY s.organization_id
) u WHERE u.organization_id = o.id AND u.cost IS NOT NULL;
