-- Every change to a key (revocation, expiry, limits, spend, a new key replacing a cached
-- "unknown key") is announced on channel api_keys_changed with the key's hash, so every
-- process's key cache refreshes that entry at once instead of at its next poll. A trigger
-- rather than a call in each writer: writers outside the key module (the usage meter,
-- an operator's SQL) are covered too. Delivered at commit, so listeners read the new row.
CREATE OR REPLACE FUNCTION api_keys_notify_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify('api_keys_changed', CASE WHEN TG_OP = 'DELETE' THEN OLD.key_hash ELSE NEW.key_hash END);
  RETURN NULL;
END;
$$;
--> statement-breakpoint
CREATE TRIGGER api_keys_notify_change AFTER INSERT OR UPDATE OR DELETE ON api_keys FOR EACH ROW EXECUTE FUNCTION api_keys_notify_change();
