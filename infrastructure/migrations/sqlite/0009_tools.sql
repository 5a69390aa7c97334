-- Tool calls (WORKERS.md "Tools"): one row per call a worker reported on a turn, written by
-- the saga processor in the transaction that appends the call's `tool.*` runes, and the
-- analysts' view (docs/READ_MODEL.md).
--
-- `id` is the call's instance (UUIDv5 of turn and `call_id`, the stream of its runes).
-- `ordinal` is the call's place in its turn's report order (0, 1, … in the order of the
-- turn's `turn.tool_calls_received` runes); a turn lists its calls by it, since a batch's
-- calls are written at once with the same times. `requires_approval` is 0 or 1.
CREATE TABLE IF NOT EXISTS saga_tool_calls
(
    id                text PRIMARY KEY,
    turn_id           text        NOT NULL,
    conversation_id   text        NOT NULL,
    call_id           text        NOT NULL,
    ordinal           integer     NOT NULL,
    tool_name         text        NOT NULL,
    arguments         text        NOT NULL,
    state             text        NOT NULL,
    requires_approval integer     NOT NULL,
    policy_reason     text,
    approver          text,
    timeout_ms        integer,
    result            text,
    created_at        text NOT NULL,
    updated_at        text NOT NULL
) STRICT;
-- Keyset pages of `GET /v1/tool-calls`: all, per state (approvers and executors poll),
-- per conversation, per turn (also a turn's own calls).
CREATE INDEX IF NOT EXISTS saga_tool_calls_page ON saga_tool_calls (created_at, id);
CREATE INDEX IF NOT EXISTS saga_tool_calls_state ON saga_tool_calls (state, created_at, id);
CREATE INDEX IF NOT EXISTS saga_tool_calls_conversation ON saga_tool_calls (conversation_id, created_at, id);
CREATE INDEX IF NOT EXISTS saga_tool_calls_turn ON saga_tool_calls (turn_id, created_at, id);

CREATE VIEW IF NOT EXISTS tool_calls AS SELECT * FROM saga_tool_calls;
