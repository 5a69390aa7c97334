-- Workers (WORKERS.md): a turn's claim, its claims count and reported tokens; an agent's
-- L0 head. The lease's expiry is the `turn_lease` deadline row (a heartbeat moves both).
ALTER TABLE saga_turns ADD COLUMN IF NOT EXISTS lease_worker text;
ALTER TABLE saga_turns ADD COLUMN IF NOT EXISTS lease_epoch bigint;
ALTER TABLE saga_turns ADD COLUMN IF NOT EXISTS lease_expires_at timestamptz;
ALTER TABLE saga_turns ADD COLUMN IF NOT EXISTS claims integer NOT NULL DEFAULT 0;
ALTER TABLE saga_turns ADD COLUMN IF NOT EXISTS input_tokens bigint NOT NULL DEFAULT 0;
ALTER TABLE saga_turns ADD COLUMN IF NOT EXISTS output_tokens bigint NOT NULL DEFAULT 0;
ALTER TABLE saga_agents ADD COLUMN IF NOT EXISTS head_status text NOT NULL DEFAULT 'idle';

-- What a claim looks for: claimable turns, oldest first.
CREATE INDEX IF NOT EXISTS saga_turns_claimable ON saga_turns (created_at, id)
    WHERE state = 'dispatched' OR (state = 'streaming' AND lease_worker IS NULL);

-- The analysts' views gain the columns (a `SELECT *` view keeps the columns it was made with).
DROP VIEW IF EXISTS turns;
CREATE VIEW turns AS SELECT * FROM saga_turns;
DROP VIEW IF EXISTS agents;
CREATE VIEW agents AS
SELECT a.id, a.conversation_id, a.actor_id, a.role, a.state, a.turn_epoch, a.active_turn_id,
       COALESCE((SELECT json_agg(i.turn_id ORDER BY i.position) FROM saga_agent_inbox i
                 WHERE i.agent_id = a.id)::text, '[]') AS queued_turn_ids,
       a.created_at, a.updated_at, a.head_status
FROM saga_agents a;
