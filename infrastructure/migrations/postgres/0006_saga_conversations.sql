-- Each conversation's saga version: how many transactions have written its saga state.
-- A saga writer commits only if every conversation it decided on is still at the version
-- its machines were loaded at (and moves it on), so writers of different conversations
-- never wait for each other, and one that finds a conversation written elsewhere reloads
-- that conversation only. A conversation without a row is at version 0.
-- (`processors.writes`, the one global count this replaces, is no longer read or written.)
CREATE TABLE IF NOT EXISTS saga_conversations
(
    conversation_id uuid PRIMARY KEY,
    version         bigint      NOT NULL,
    updated_at      timestamptz NOT NULL
);
