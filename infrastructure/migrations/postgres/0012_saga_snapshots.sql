-- Each conversation's latest snapshot of its saga machines (application::sagas::snapshot):
-- the machines encoded as of log position `position` — the fold of every rune of the
-- conversation at or before it. Loading a conversation reads the snapshot of the format it
-- knows and the runes after `position`, not its whole history. Written beside the saga
-- path (never in its transactions); a lost or unreadable snapshot only means more runes
-- to fold.
CREATE TABLE IF NOT EXISTS saga_snapshots
(
    conversation_id uuid PRIMARY KEY,
    position        bigint      NOT NULL,
    format          bigint      NOT NULL,
    state           bytea       NOT NULL,
    written_at      timestamptz NOT NULL
);
