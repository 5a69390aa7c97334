-- Positions in commit order. Every statement that inserts into `events` first takes one
-- transaction-scoped advisory lock (key 0x706d6c6f67000001, "pmlog"), held until its
-- transaction ends, so a row's global_position is drawn only after every earlier append
-- has committed or rolled back. Readers then read by global_position alone: a later
-- position can never become visible before an earlier one, and no transaction that does
-- not append (another database's batch job, an analyst's long report) holds them back.
CREATE OR REPLACE FUNCTION pm_events_append_lock() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_advisory_xact_lock(8101250530434613249);
    RETURN NULL;
END $$;

DROP TRIGGER IF EXISTS events_append_lock ON events;
CREATE TRIGGER events_append_lock BEFORE INSERT ON events
    FOR EACH STATEMENT EXECUTE FUNCTION pm_events_append_lock();

CREATE UNIQUE INDEX IF NOT EXISTS events_position ON events (global_position);
CREATE INDEX IF NOT EXISTS events_by_conversation_position
    ON events (conversation_id, global_position) WHERE conversation_id IS NOT NULL;
DROP INDEX IF EXISTS events_by_conversation;
DROP INDEX IF EXISTS events_log_order;

-- Stored cursors were (transaction id, position) pairs in that order; now they are
-- positions. A cursor continues just before the first event it had not processed, so
-- nothing is skipped; events after that which it had processed are delivered again, and
-- every processor's effect is idempotent.
UPDATE processors p
SET cursor_seq = COALESCE(
        (SELECT min(e.global_position) - 1 FROM events e
         WHERE (e.transaction_id, e.global_position) > (p.cursor_txid::text::xid8, p.cursor_seq)),
        (SELECT COALESCE(max(global_position), 0) FROM events)),
    cursor_txid = 0
WHERE cursor_txid <> 0;
UPDATE parked_events SET position_txid = 0 WHERE position_txid <> 0;

-- Read tables keep a log position per checkpoint and message: the transaction-id half
-- is 0 from now on.
DO $$
DECLARE t text;
BEGIN
    FOR t IN SELECT tablename FROM pg_tables
             WHERE schemaname = current_schema()
               AND (tablename LIKE 'rm\_g%\_conversation\_checkpoints' OR tablename LIKE 'rm\_g%\_messages')
    LOOP
        EXECUTE format('UPDATE %I SET log_txid = 0 WHERE log_txid <> 0', t);
    END LOOP;
END $$;
