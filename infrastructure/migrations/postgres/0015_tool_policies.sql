-- Tool policies (TRUST.md "Tool policies"): the policies in force, derived from the log.
-- A row is written by the statement that appends the policy's `tool_policy.set` fact (and
-- deleted by the one that appends its `tool_policy.removed`), in its transaction, so a
-- batch of tool calls reported after a policy's PUT answered is decided by that policy on
-- every replica — no processor lag between an operator's rule and the calls it governs.
-- `policy` is the set fact's payload, as the API shows it.
CREATE TABLE IF NOT EXISTS tool_policies
(
    name   text PRIMARY KEY,
    policy text NOT NULL
);

CREATE OR REPLACE FUNCTION pm_tool_policy() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.event_type = 'project_manager.tool_policy.set' THEN
        INSERT INTO tool_policies (name, policy)
        VALUES (NEW.payload ->> 'name', NEW.payload::text)
        ON CONFLICT (name) DO UPDATE SET policy = excluded.policy;
    ELSE
        DELETE FROM tool_policies WHERE name = NEW.payload ->> 'name';
    END IF;
    RETURN NULL;
END $$;

DROP TRIGGER IF EXISTS events_tool_policy ON events;
CREATE TRIGGER events_tool_policy AFTER INSERT ON events
    FOR EACH ROW
    WHEN (NEW.event_type IN ('project_manager.tool_policy.set',
                             'project_manager.tool_policy.removed'))
    EXECUTE FUNCTION pm_tool_policy();

-- What a call was reported under and who decided it (TRUST.md "Approvals"); NULL for the
-- calls reported before policies existed.
ALTER TABLE saga_tool_calls ADD COLUMN IF NOT EXISTS policy text;
ALTER TABLE saga_tool_calls ADD COLUMN IF NOT EXISTS reported_by text;
ALTER TABLE saga_tool_calls ADD COLUMN IF NOT EXISTS approvers text;
ALTER TABLE saga_tool_calls ADD COLUMN IF NOT EXISTS on_behalf_of uuid;
ALTER TABLE saga_tool_calls ADD COLUMN IF NOT EXISTS comment text;

CREATE OR REPLACE VIEW tool_calls AS SELECT * FROM saga_tool_calls;
