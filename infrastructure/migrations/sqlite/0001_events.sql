-- The event store: sqlite-es's `events` table plus what the global log needs. SQLite has
-- one writer at a time, so global_position order is commit order.
CREATE TABLE IF NOT EXISTS events
(
  global_position INTEGER PRIMARY KEY AUTOINCREMENT,
  aggregate_type  text                          NOT NULL,
  aggregate_id    text                          NOT NULL,
  sequence        integer CHECK (sequence >= 0) NOT NULL,
  event_type      text                          NOT NULL,
  event_version   text                          NOT NULL,
  payload         text                          NOT NULL,
  metadata        text                          NOT NULL,
  conversation_id text,
  UNIQUE (aggregate_type, aggregate_id, sequence)
) STRICT;

CREATE INDEX IF NOT EXISTS events_by_conversation ON events (conversation_id, global_position)
  WHERE conversation_id IS NOT NULL;

CREATE TABLE IF NOT EXISTS snapshots
(
  aggregate_type   text                                  NOT NULL,
  aggregate_id     text                                  NOT NULL,
  last_sequence    integer CHECK (last_sequence >= 0)    NOT NULL,
  current_snapshot integer CHECK (current_snapshot >= 0) NOT NULL,
  payload          text                                  NOT NULL,
  PRIMARY KEY (aggregate_type, aggregate_id, last_sequence)
) STRICT;

CREATE TABLE IF NOT EXISTS idempotency_keys
(
  role         text    NOT NULL,
  key          text    NOT NULL,
  request_hash text    NOT NULL,
  status       integer,
  body         text,
  location     text,
  position     text,
  created_at   text    NOT NULL,
  PRIMARY KEY (role, key)
) STRICT;
