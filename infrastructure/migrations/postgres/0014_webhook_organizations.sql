-- A webhook delivers only the events its registrant may see (TRUST.md "Organizations"):
-- the registrant's organizations as a JSON array, NULL for every organization (what every
-- subscription made before this migration was).
ALTER TABLE webhooks ADD COLUMN IF NOT EXISTS organizations text;
