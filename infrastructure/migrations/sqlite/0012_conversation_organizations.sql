-- Each conversation's organization (TRUST.md "Organizations"), derived from the log: the
-- row is written by the statement that appends the conversation's `conversation.started`
-- fact, in its transaction, so whoever can read an event of a conversation can also read
-- its organization. A conversation's organization never changes; one without has NULL.
-- (SQLite is single-tenant for analysts' SQL: no roles, no row-level security.)
CREATE TABLE IF NOT EXISTS conversation_organizations
(
    conversation_id text PRIMARY KEY,
    organization    text
);
CREATE INDEX IF NOT EXISTS conversation_organizations_organization
    ON conversation_organizations (organization, conversation_id);

CREATE TRIGGER IF NOT EXISTS events_conversation_organization AFTER INSERT ON events
    FOR EACH ROW
    WHEN NEW.event_type = 'project_manager.conversation.started'
BEGIN
    INSERT OR IGNORE INTO conversation_organizations (conversation_id, organization)
    VALUES (NEW.aggregate_id, NEW.payload ->> 'organization');
END;

INSERT OR IGNORE INTO conversation_organizations (conversation_id, organization)
SELECT aggregate_id, payload ->> 'organization'
FROM events
WHERE event_type = 'project_manager.conversation.started';
