-- The one rewrite of the log the service ever makes (issue 33, item 4): texts a version
-- before sealing wrote in the clear are sealed in place, once. `up_to` is the newest
-- position when the first sealing version started (everything after it was written
-- sealed); `sealed_through` how far the pass has come. The pass is done when they meet.
CREATE TABLE IF NOT EXISTS pm_log_sealing
(
    id             smallint PRIMARY KEY CHECK (id = 1),
    up_to          bigint      NOT NULL,
    sealed_through bigint      NOT NULL,
    started_at     timestamptz NOT NULL,
    finished_at    timestamptz
);
