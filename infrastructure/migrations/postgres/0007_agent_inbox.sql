-- An agent's inbox (L0's `agent_inbox`) as rows: a turn enqueued is a row inserted, a turn
-- dispatched a row deleted, instead of the agent's whole queue rewritten as one JSON text
-- on every change (which made a long queue expensive to extend). `position` orders the
-- inbox: the sequence of the `agent.turn_enqueued` rune in the agent's stream.
CREATE TABLE IF NOT EXISTS saga_agent_inbox
(
    agent_id        uuid   NOT NULL,
    turn_id         uuid   NOT NULL,
    conversation_id uuid   NOT NULL,
    position        bigint NOT NULL,
    PRIMARY KEY (agent_id, turn_id)
);
CREATE INDEX IF NOT EXISTS saga_agent_inbox_order ON saga_agent_inbox (agent_id, position);

-- The queues written so far, in their order (an agent's later enqueues have higher
-- sequences than its number of queued turns).
INSERT INTO saga_agent_inbox (agent_id, turn_id, conversation_id, position)
SELECT a.id, q.turn_id::uuid, a.conversation_id, q.position
FROM saga_agents a
CROSS JOIN LATERAL json_array_elements_text(a.queued_turn_ids::json) WITH ORDINALITY AS q(turn_id, position)
ON CONFLICT DO NOTHING;

-- The analysts' `agents` view keeps its columns: `queued_turn_ids` is the inbox, oldest
-- first, as a JSON array.
DROP VIEW IF EXISTS agents;
ALTER TABLE saga_agents DROP COLUMN queued_turn_ids;
CREATE VIEW agents AS
SELECT a.id, a.conversation_id, a.actor_id, a.role, a.state, a.turn_epoch, a.active_turn_id,
       COALESCE((SELECT json_agg(i.turn_id ORDER BY i.position) FROM saga_agent_inbox i
                 WHERE i.agent_id = a.id)::text, '[]') AS queued_turn_ids,
       a.created_at, a.updated_at
FROM saga_agents a;
