-- The event store: postgres-es's `events` table plus what the global log needs.
-- postgres-es reads and writes the first seven columns; the rest have defaults or are
-- filled by project-manager's own single-statement append.
CREATE TABLE IF NOT EXISTS events
(
    aggregate_type  text                         NOT NULL,
    aggregate_id    text                         NOT NULL,
    sequence        bigint CHECK (sequence >= 0) NOT NULL,
    event_type      text                         NOT NULL,
    event_version   text                         NOT NULL,
    -- json, not jsonb: stored as written (cheaper to write and to stream back out);
    -- the ->> operators work the same for analysts
    payload         json                         NOT NULL,
    metadata        json                         NOT NULL,
    -- the writing transaction: with global_position, the commit-safe log order
    transaction_id  xid8                         NOT NULL DEFAULT pg_current_xact_id(),
    global_position bigint GENERATED ALWAYS AS IDENTITY,
    -- the conversation the event belongs to (NULL for actors)
    conversation_id uuid,
    PRIMARY KEY (aggregate_type, aggregate_id, sequence)
);

CREATE UNIQUE INDEX IF NOT EXISTS events_log_order ON events (transaction_id, global_position);
CREATE INDEX IF NOT EXISTS events_by_conversation
    ON events (conversation_id, transaction_id, global_position)
    WHERE conversation_id IS NOT NULL;

-- postgres-es's snapshot table; unused (the snapshot store double-applies events in 0.5.0)
-- but created so the crate's documented schema is complete.
CREATE TABLE IF NOT EXISTS snapshots
(
    aggregate_type   text                                 NOT NULL,
    aggregate_id     text                                 NOT NULL,
    last_sequence    bigint CHECK (last_sequence >= 0)    NOT NULL,
    current_snapshot bigint CHECK (current_snapshot >= 0) NOT NULL,
    payload          json                                 NOT NULL,
    PRIMARY KEY (aggregate_type, aggregate_id, last_sequence)
);

-- Idempotency-Key answers, per role, kept 24 h.
CREATE TABLE IF NOT EXISTS idempotency_keys
(
    role         text        NOT NULL,
    key          text        NOT NULL,
    request_hash text        NOT NULL,
    status       integer,
    body         text,
    location     text,
    position     text,
    created_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (role, key)
);
CREATE INDEX IF NOT EXISTS idempotency_keys_created_at ON idempotency_keys (created_at);
