-- Console sign-outs (TRUST.md "The boundary"): the console's cookie is signed and carries
-- its own expiry, so any replica accepts it without a session table; a sign-out is the one
-- thing that must reach every replica at once. Each row is a signed-out session's id,
-- refused from then on until the cookie's own expiry, after which the row is useless and
-- is deleted by a later sign-out.
CREATE TABLE IF NOT EXISTS console_signouts
(
    session_id text PRIMARY KEY,
    expires_at bigint NOT NULL
);
CREATE INDEX IF NOT EXISTS console_signouts_expires_at ON console_signouts (expires_at);
