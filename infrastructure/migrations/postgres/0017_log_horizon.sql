-- Positions in commit order without a lock across the commit. Until now every append took
-- the log's advisory lock exclusively and held it through its commit (0003_log_order.sql):
-- one appending transaction committed at a time. Now appends do not wait for each other.
-- Instead, before a statement draws a position, it reads how far the position sequence
-- has gone (every position it draws will be above that) and takes a shared advisory lock
-- that says so, held until its transaction ends: class 0x706d6c62 ("pmlb"), the bound's
-- low 31 bits as the second key. Readers work out how far they may read from those locks
-- (the service's `log/horizon.rs`): if a snapshot's newest visible position is P and the
-- locks held afterwards say the appends in progress draw above B, every position up to
-- min(P, B) that will ever be visible is visible to any later snapshot. Only appending
-- transactions hold readers back; an analyst's report or another database's batch job
-- does not.
--
-- Upgrading: a replica of an earlier version reads by position alone and could skip an
-- append that commits after a later one, so no earlier replica may run beside this one:
-- stop them before the first replica of this version starts (and migrates).
CREATE OR REPLACE FUNCTION pm_events_append_lock() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    drawn bigint;
BEGIN
    SELECT CASE WHEN is_called THEN last_value ELSE last_value - 1 END INTO drawn
    FROM events_global_position_seq;
    PERFORM pg_advisory_xact_lock_shared(1886219362, (drawn & 2147483647)::integer);
    RETURN NULL;
END $$;
