-- An Idempotency-Key claim names the process running its command, so a claim whose
-- process is gone can be taken over at once instead of being held for 24 hours.
ALTER TABLE idempotency_keys ADD COLUMN owner text;
ALTER TABLE idempotency_keys ADD COLUMN claimed_at text;
