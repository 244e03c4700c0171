-- Every change to a key (revocation, expiry, limits, spend, a new key replacing a cached
-- "unknown key") is announced on channel api_keys_changed, so every process's key cache
-- updates that entry at once instead of at its next poll. A trigger rather than a call in
-- each writer: writers outside the key module (the usage meter, an operator's SQL) are
-- covered too. Delivered at commit, in commit order. The payload carries the row as the
-- cache needs it, so a listener applies it without a query; a deleted row, or one too
-- large for a notification (8000 bytes), is announced by its hash alone and re-read.
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
    'spent', NEW.spent, 'rpm', NEW.rpm, 'expiresAt', NEW.expires_at, 'scopes', NEW.scopes,
    'createdAt', NEW.created_at, 'revokedAt', NEW.revoked_at, 'row', true
  )::text;
  IF octet_length(payload) > 7900 THEN
    payload := json_build_object('keyHash', NEW.key_hash)::text;
  END IF;
  PERFORM pg_notify('api_keys_changed', payload);
  RETURN NULL;
END;
$$;
--> statement-breakpoint
CREATE TRIGGER api_keys_notify_change AFTER INSERT OR UPDATE OR DELETE ON api_keys FOR EACH ROW EXECUTE FUNCTION api_keys_notify_change();
