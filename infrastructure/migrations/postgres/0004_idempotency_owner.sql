-- An Idempotency-Key claim names the replica running its command, so a claim whose
-- replica is gone can be taken over at once instead of being held for 24 hours.
ALTER TABLE idempotency_keys ADD COLUMN IF NOT EXISTS owner text;
ALTER TABLE idempotency_keys ADD COLUMN IF NOT EXISTS claimed_at timestamptz;
