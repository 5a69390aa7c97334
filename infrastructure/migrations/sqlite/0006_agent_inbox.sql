-- An agent's inbox (L0's `agent_inbox`) as rows: a turn enqueued is a row inserted, a turn
-- dispatched a row deleted, instead of the agent's whole queue rewritten as one JSON text
-- on every change (which made a long queue expensive to extend). `position` orders the
-- inbox: the sequence of the `agent.turn_enqueued` rune in the agent's stream.
CREATE TABLE IF NOT EXISTS saga_agent_inbox
(
    agent_id        text    NOT NULL,
    turn_id         text    NOT NULL,
    conversation_id text    NOT NULL,
    position        integer NOT NULL,
    PRIMARY KEY (agent_id, turn_id)
);
CREATE INDEX IF NOT EXISTS saga_agent_inbox_order ON saga_agent_inbox (agent_id, position);

-- The queues written so far, in their order (an agent's later enqueues have higher
-- sequences than its number of queued turns).
INSERT OR IGNORE INTO saga_agent_inbox (agent_id, turn_id, conversation_id, position)
SELECT a.id, q.value, a.conversation_id, q.key + 1
FROM saga_agents a, json_each(a.queued_turn_ids) q;

-- The analysts' `agents` view keeps its columns: `queued_turn_ids` is the inbox, oldest
-- first, as a JSON array. (Ordered in a sub-select, not `json_group_array(… ORDER BY …)`:
-- the view must read in the sqlite3 shells analysts have, older than SQLite 3.44.)
DROP VIEW IF EXISTS agents;
ALTER TABLE saga_agents DROP COLUMN queued_turn_ids;
CREATE VIEW agents AS
SELECT a.id, a.conversation_id, a.actor_id, a.role, a.state, a.turn_epoch, a.active_turn_id,
       (SELECT json_group_array(turn_id) FROM
          (SELECT i.turn_id FROM saga_agent_inbox i WHERE i.agent_id = a.id ORDER BY i.position))
         AS queued_turn_ids,
       a.created_at, a.updated_at
FROM saga_agents a;
