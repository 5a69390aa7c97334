-- Processors: a named consumer of the global log, its cursor, its lease, and (for
-- projections) the generation of read tables it writes.
CREATE TABLE IF NOT EXISTS processors
(
    name             text PRIMARY KEY,
    cursor_txid      bigint      NOT NULL DEFAULT 0,
    cursor_seq       bigint      NOT NULL DEFAULT 0,
    generation       integer     NOT NULL DEFAULT 1,
    lease_owner      text,
    lease_expires_at timestamptz,
    updated_at       timestamptz,
    rebuild_status   text,
    rebuild_detail   text,
    rebuild_heartbeat timestamptz
);

-- Events a processor could not apply, with the reason; the processor skipped them.
CREATE TABLE IF NOT EXISTS parked_events
(
    processor      text        NOT NULL,
    position_txid  bigint      NOT NULL,
    position_seq   bigint      NOT NULL,
    aggregate_type text        NOT NULL,
    aggregate_id   text        NOT NULL,
    event_type     text        NOT NULL,
    error          text        NOT NULL,
    parked_at      timestamptz NOT NULL,
    PRIMARY KEY (processor, position_txid, position_seq)
);
