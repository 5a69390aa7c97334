-- Each conversation's organization (TRUST.md "Organizations"), derived from the log: the
-- row is written by the statement that appends the conversation's `conversation.started`
-- fact, in its transaction, so whoever can read an event of a conversation can also read
-- its organization — the log's readers, both processors' tables, claims and an analyst's
-- row-level security all scope by this one table. A conversation's organization never
-- changes; a conversation without one has a row with NULL (only `*` principals see it).
CREATE TABLE IF NOT EXISTS conversation_organizations
(
    conversation_id uuid PRIMARY KEY,
    organization    text
);
CREATE INDEX IF NOT EXISTS conversation_organizations_organization
    ON conversation_organizations (organization, conversation_id);

CREATE OR REPLACE FUNCTION pm_conversation_organization() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO conversation_organizations (conversation_id, organization)
    VALUES (NEW.aggregate_id::uuid, NEW.payload ->> 'organization')
    ON CONFLICT (conversation_id) DO NOTHING;
    RETURN NULL;
END $$;

DROP TRIGGER IF EXISTS events_conversation_organization ON events;
CREATE TRIGGER events_conversation_organization AFTER INSERT ON events
    FOR EACH ROW
    WHEN (NEW.event_type = 'project_manager.conversation.started')
    EXECUTE FUNCTION pm_conversation_organization();

INSERT INTO conversation_organizations (conversation_id, organization)
SELECT aggregate_id::uuid, payload ->> 'organization'
FROM events
WHERE event_type = 'project_manager.conversation.started'
ON CONFLICT (conversation_id) DO NOTHING;
