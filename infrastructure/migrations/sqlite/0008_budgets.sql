-- Token budgets (WORKERS.md "Budgets"): tokens the turns reported, per session and agent,
-- and the session's budget (null: unlimited).
ALTER TABLE saga_sessions ADD COLUMN tokens_used integer NOT NULL DEFAULT 0;
ALTER TABLE saga_sessions ADD COLUMN token_budget integer;
ALTER TABLE saga_agents ADD COLUMN tokens_used integer NOT NULL DEFAULT 0;

DROP VIEW IF EXISTS sessions;
CREATE VIEW sessions AS SELECT * FROM saga_sessions;
DROP VIEW IF EXISTS agents;
CREATE VIEW agents AS
SELECT a.id, a.conversation_id, a.actor_id, a.role, a.state, a.turn_epoch, a.active_turn_id,
       (SELECT json_group_array(turn_id) FROM
          (SELECT i.turn_id FROM saga_agent_inbox i WHERE i.agent_id = a.id ORDER BY i.position))
         AS queued_turn_ids,
       a.created_at, a.updated_at, a.head_status, a.tokens_used
FROM saga_agents a;
