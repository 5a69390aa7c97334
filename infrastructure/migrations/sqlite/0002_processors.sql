CREATE TABLE IF NOT EXISTS processors
(
  name             text PRIMARY KEY,
  cursor_txid      integer NOT NULL DEFAULT 0,
  cursor_seq       integer NOT NULL DEFAULT 0,
  generation       integer NOT NULL DEFAULT 1,
  lease_owner      text,
  lease_expires_at text,
  updated_at       text,
  rebuild_status   text,
  rebuild_detail   text,
  rebuild_heartbeat text
) STRICT;

CREATE TABLE IF NOT EXISTS parked_events
(
  processor      text    NOT NULL,
  position_txid  integer NOT NULL,
  position_seq   integer NOT NULL,
  aggregate_type text    NOT NULL,
  aggregate_id   text    NOT NULL,
  event_type     text    NOT NULL,
  error          text    NOT NULL,
  parked_at      text    NOT NULL,
  PRIMARY KEY (processor, position_txid, position_seq)
) STRICT;
