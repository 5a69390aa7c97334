-- Positions in commit order without a lock across the commit. Until now every append took
-- the log's advisory lock exclusively and held it through its commit (0003_log_order.sql):
-- one appending transaction committed at a time. Now an append takes the same lock
-- *shared* — appends no longer wait for each other — and has its transaction id before it
-- draws a position. Readers work out how far they may read instead (the service's
-- `log/horizon.rs`): if a snapshot's newest visible position is P, every position at or
-- below P that will ever be visible was drawn by an append that had ended by then or
-- still holds this lock after it; once none of the appends holding it then holds it any
-- more, the positions up to P are final. Only appending transactions (holders of the lock, in this
-- database) hold readers back; an analyst's report or another database's batch job does
-- not.
--
-- Upgrading: a replica of an earlier version reads by position alone and could skip an
-- append that commits after a later one, so no earlier replica may run beside this one:
-- stop them before the first replica of this version starts (and migrates).
CREATE OR REPLACE FUNCTION pm_events_append_lock() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_advisory_xact_lock_shared(8101250530434613249);
    PERFORM pg_current_xact_id();
    RETURN NULL;
END $$;
