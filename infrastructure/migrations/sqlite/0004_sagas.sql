-- The sagas' state as read tables (written by the saga processor in the transaction that
-- appends the runes they derive from), their durable deadlines, and plain views for
-- analysts (docs/READ_MODEL.md).

-- How many transactions have written a processor's state: a saga writer that finds it
-- moved since its own last write knows another writer (an operator's control on another
-- replica) changed saga state it may hold in memory.
ALTER TABLE processors ADD COLUMN writes integer NOT NULL DEFAULT 0;

CREATE TABLE IF NOT EXISTS saga_sessions
(
    conversation_id       text PRIMARY KEY,
    state                 text        NOT NULL,
    conversation_state    text,
    root_agent_id         text,
    agent_ids             text        NOT NULL,
    waiting_checkpoint_id text,
    waiting_since         text,
    consecutive_errors    integer     NOT NULL,
    created_at            text NOT NULL,
    updated_at            text NOT NULL
) STRICT;
CREATE INDEX IF NOT EXISTS saga_sessions_page ON saga_sessions (created_at, conversation_id);
CREATE INDEX IF NOT EXISTS saga_sessions_state ON saga_sessions (state, conversation_state);

CREATE TABLE IF NOT EXISTS saga_agents
(
    id              text PRIMARY KEY,
    conversation_id text        NOT NULL,
    actor_id        text,
    role            text        NOT NULL,
    state           text        NOT NULL,
    turn_epoch      integer      NOT NULL,
    active_turn_id  text,
    queued_turn_ids text        NOT NULL,
    created_at      text NOT NULL,
    updated_at      text NOT NULL
) STRICT;
CREATE INDEX IF NOT EXISTS saga_agents_page ON saga_agents (created_at, id);
CREATE INDEX IF NOT EXISTS saga_agents_conversation ON saga_agents (conversation_id, created_at, id);
CREATE INDEX IF NOT EXISTS saga_agents_actor ON saga_agents (actor_id, created_at, id);
CREATE INDEX IF NOT EXISTS saga_agents_state ON saga_agents (state, created_at, id);

CREATE TABLE IF NOT EXISTS saga_turns
(
    id                 text PRIMARY KEY,
    agent_id           text        NOT NULL,
    conversation_id    text        NOT NULL,
    kind               text        NOT NULL,
    task_id            text,
    input              text        NOT NULL,
    state              text        NOT NULL,
    turn_epoch         integer,
    terminal_rune      text,
    deliverable        text,
    deliverable_reason text,
    created_at         text NOT NULL,
    updated_at         text NOT NULL
) STRICT;
CREATE INDEX IF NOT EXISTS saga_turns_page ON saga_turns (created_at, id);
CREATE INDEX IF NOT EXISTS saga_turns_conversation ON saga_turns (conversation_id, created_at, id);
CREATE INDEX IF NOT EXISTS saga_turns_agent ON saga_turns (agent_id, created_at, id);
CREATE INDEX IF NOT EXISTS saga_turns_task ON saga_turns (task_id, created_at, id);
CREATE INDEX IF NOT EXISTS saga_turns_state ON saga_turns (state, created_at, id);

CREATE TABLE IF NOT EXISTS saga_anomalies
(
    id              text PRIMARY KEY,
    conversation_id text        NOT NULL,
    aggregate_type  text        NOT NULL,
    aggregate_id    text        NOT NULL,
    sequence        integer      NOT NULL,
    state           text        NOT NULL,
    fact            text        NOT NULL,
    reason          text        NOT NULL,
    causation_id    text,
    created_at      text NOT NULL
) STRICT;
CREATE INDEX IF NOT EXISTS saga_anomalies_page ON saga_anomalies (created_at, id);
CREATE INDEX IF NOT EXISTS saga_anomalies_conversation ON saga_anomalies (conversation_id, created_at, id);

-- Armed deadlines: one row per (instance, kind), written with the transition that arms it
-- and deleted with the one that disarms or fires it.
CREATE TABLE IF NOT EXISTS saga_deadlines
(
    aggregate_type  text        NOT NULL,
    aggregate_id    text        NOT NULL,
    kind            text        NOT NULL,
    conversation_id text        NOT NULL,
    due_at          text NOT NULL,
    epoch           integer      NOT NULL,
    PRIMARY KEY (aggregate_type, aggregate_id, kind)
) STRICT;
CREATE INDEX IF NOT EXISTS saga_deadlines_due ON saga_deadlines (due_at);
CREATE INDEX IF NOT EXISTS saga_deadlines_conversation ON saga_deadlines (conversation_id);

CREATE VIEW IF NOT EXISTS sessions AS SELECT * FROM saga_sessions;
CREATE VIEW IF NOT EXISTS agents AS SELECT * FROM saga_agents;
CREATE VIEW IF NOT EXISTS turns AS SELECT * FROM saga_turns;
CREATE VIEW IF NOT EXISTS anomalies AS SELECT * FROM saga_anomalies;
CREATE VIEW IF NOT EXISTS deadlines AS SELECT * FROM saga_deadlines;
