-- Tool policies (TRUST.md "Tool policies"): the policies in force, derived from the log.
-- A row is written by the statement that appends the policy's `tool_policy.set` fact (and
-- deleted by the one that appends its `tool_policy.removed`), in its transaction, so a
-- batch of tool calls reported after a policy's PUT answered is decided by that policy.
-- `policy` is the set fact's payload, as the API shows it.
CREATE TABLE IF NOT EXISTS tool_policies
(
    name   text PRIMARY KEY,
    policy text NOT NULL
);

CREATE TRIGGER IF NOT EXISTS events_tool_policy_set AFTER INSERT ON events
    FOR EACH ROW
    WHEN NEW.event_type = 'project_manager.tool_policy.set'
BEGIN
    INSERT INTO tool_policies (name, policy)
    VALUES (NEW.payload ->> 'name', NEW.payload)
    ON CONFLICT (name) DO UPDATE SET policy = excluded.policy;
END;

CREATE TRIGGER IF NOT EXISTS events_tool_policy_removed AFTER INSERT ON events
    FOR EACH ROW
    WHEN NEW.event_type = 'project_manager.tool_policy.removed'
BEGIN
    DELETE FROM tool_policies WHERE name = NEW.payload ->> 'name';
END;

-- What a call was reported under and who decided it (TRUST.md "Approvals"); NULL for the
-- calls reported before policies existed.
ALTER TABLE saga_tool_calls ADD COLUMN policy text;
ALTER TABLE saga_tool_calls ADD COLUMN reported_by text;
ALTER TABLE saga_tool_calls ADD COLUMN approvers text;
ALTER TABLE saga_tool_calls ADD COLUMN on_behalf_of text;
ALTER TABLE saga_tool_calls ADD COLUMN comment text;

-- A view's `*` is expanded when it is made: made again, it shows the new columns.
DROP VIEW IF EXISTS tool_calls;
CREATE VIEW tool_calls AS SELECT * FROM saga_tool_calls;
