-- Workers (WORKERS.md): a turn's claim, its claims count and reported tokens; an agent's
-- L0 head. The lease's expiry is the `turn_lease` deadline row (a heartbeat moves both).
ALTER TABLE saga_turns ADD COLUMN lease_worker text;
ALTER TABLE saga_turns ADD COLUMN lease_epoch integer;
ALTER TABLE saga_turns ADD COLUMN lease_expires_at text;
ALTER TABLE saga_turns ADD COLUMN claims integer NOT NULL DEFAULT 0;
ALTER TABLE saga_turns ADD COLUMN input_tokens integer NOT NULL DEFAULT 0;
ALTER TABLE saga_turns ADD COLUMN output_tokens integer NOT NULL DEFAULT 0;
ALTER TABLE saga_agents ADD COLUMN head_status text NOT NULL DEFAULT 'idle';

-- What a claim looks for: claimable turns, oldest first.
CREATE INDEX IF NOT EXISTS saga_turns_claimable ON saga_turns (created_at, id)
    WHERE state = 'dispatched' OR (state = 'streaming' AND lease_worker IS NULL);

DROP VIEW IF EXISTS turns;
CREATE VIEW turns AS SELECT * FROM saga_turns;
DROP VIEW IF EXISTS agents;
CREATE VIEW agents AS
SELECT a.id, a.conversation_id, a.actor_id, a.role, a.state, a.turn_epoch, a.active_turn_id,
       (SELECT json_group_array(turn_id) FROM
          (SELECT i.turn_id FROM saga_agent_inbox i WHERE i.agent_id = a.id ORDER BY i.position))
         AS queued_turn_ids,
       a.created_at, a.updated_at, a.head_status
FROM saga_agents a;
