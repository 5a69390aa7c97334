//! The read model's statements as the version before forgetting shipped them (personal
//! texts `NOT NULL`, no `forgotten`), verbatim but for their names: a database they made
//! is what [`super::upgrade`]'s test starts from.

use pm_domain::types::TaskStatus;
use pm_infrastructure::read_model::schema::{status_column, table};
use pm_infrastructure::sql::Dialect;

/// `CREATE TABLE`/`CREATE INDEX` statements of a generation, before forgetting.
pub fn old_create_statements(d: Dialect, g: i64) -> Vec<String> {
    let (uuid, ts, big) = (d.ty("uuid"), d.ty("timestamptz"), d.ty("bigint"));
    let t = |name: &str| table(g, name);
    let status_counts = TaskStatus::all()
        .map(|s| format!("{} {big} NOT NULL DEFAULT 0", status_column(s)))
        .collect::<Vec<_>>()
        .join(",\n  ");
    vec![
        format!(
            "CREATE TABLE IF NOT EXISTS {} (
  id {uuid} PRIMARY KEY,
  kind text NOT NULL,
  display_name text NOT NULL,
  external_identity text,
  created_at {ts} NOT NULL)",
            t("actors")
        ),
        format!(
            "CREATE TABLE IF NOT EXISTS {} (
  id {uuid} PRIMARY KEY,
  title text NOT NULL,
  actor_ids text NOT NULL,
  external_id text,
  external_source text,
  status text,
  organization text,
  created_at {ts} NOT NULL,
  updated_at {ts} NOT NULL,
  latest_checkpoint_id {uuid},
  latest_checkpoint_type text,
  latest_checkpoint_summary text,
  latest_checkpoint_at {ts},
  checkpoint_count {big} NOT NULL DEFAULT 0,
  message_count {big} NOT NULL DEFAULT 0,
  task_count {big} NOT NULL DEFAULT 0,
  {status_counts})",
            t("conversations")
        ),
        format!(
            "CREATE INDEX IF NOT EXISTS {0}_created ON {0} (created_at, id)",
            t("conversations")
        ),
        format!(
            "CREATE INDEX IF NOT EXISTS {0}_org ON {0} (organization, created_at, id)",
            t("conversations")
        ),
        format!(
            "CREATE INDEX IF NOT EXISTS {0}_status ON {0} (status, created_at, id)",
            t("conversations")
        ),
        format!(
            "CREATE INDEX IF NOT EXISTS {0}_source ON {0} (external_source, created_at, id)",
            t("conversations")
        ),
        format!(
            "CREATE INDEX IF NOT EXISTS {0}_latest ON {0} (latest_checkpoint_type, created_at, id)",
            t("conversations")
        ),
        format!(
            "CREATE TABLE IF NOT EXISTS {} (
  conversation_id {uuid} NOT NULL,
  actor_id {uuid} NOT NULL,
  ordinal {big} NOT NULL,
  PRIMARY KEY (conversation_id, actor_id))",
            t("conversation_actors")
        ),
        format!(
            "CREATE INDEX IF NOT EXISTS {0}_actor ON {0} (actor_id, conversation_id)",
            t("conversation_actors")
        ),
        format!(
            "CREATE TABLE IF NOT EXISTS {} (
  id {uuid} PRIMARY KEY,
  conversation_id {uuid} NOT NULL,
  checkpoint_type text NOT NULL,
  summary text NOT NULL,
  created_at {ts} NOT NULL,
  log_txid {big} NOT NULL,
  log_seq {big} NOT NULL)",
            t("conversation_checkpoints")
        ),
        format!(
            "CREATE INDEX IF NOT EXISTS {0}_conversation ON {0} (conversation_id, log_seq)",
            t("conversation_checkpoints")
        ),
        format!(
            "CREATE TABLE IF NOT EXISTS {} (
  id {uuid} PRIMARY KEY,
  conversation_id {uuid} NOT NULL,
  checkpoint_id {uuid} NOT NULL,
  instructions text NOT NULL,
  assigned_to {uuid},
  organization text,
  created_at {ts} NOT NULL,
  status text NOT NULL,
  status_changed_at {ts},
  status_sequence {big} NOT NULL DEFAULT 1,
  checkpoint_count {big} NOT NULL DEFAULT 0,
  first_work_started_at {ts},
  last_work_completed_at {ts})",
            t("tasks")
        ),
        format!(
            "CREATE INDEX IF NOT EXISTS {0}_created ON {0} (created_at, id)",
            t("tasks")
        ),
        format!(
            "CREATE INDEX IF NOT EXISTS {0}_status ON {0} (status, created_at, id)",
            t("tasks")
        ),
        format!(
            "CREATE INDEX IF NOT EXISTS {0}_assignee ON {0} (assigned_to, created_at, id)",
            t("tasks")
        ),
        format!(
            "CREATE INDEX IF NOT EXISTS {0}_conversation ON {0} (conversation_id, created_at, id)",
            t("tasks")
        ),
        format!(
            "CREATE INDEX IF NOT EXISTS {0}_checkpoint ON {0} (checkpoint_id, created_at, id)",
            t("tasks")
        ),
        format!(
            "CREATE INDEX IF NOT EXISTS {0}_org ON {0} (organization, created_at, id)",
            t("tasks")
        ),
        format!(
            "CREATE TABLE IF NOT EXISTS {} (
  id {uuid} PRIMARY KEY,
  task_id {uuid} NOT NULL,
  sequence {big} NOT NULL,
  type text NOT NULL,
  created_at {ts} NOT NULL,
  UNIQUE (task_id, sequence))",
            t("task_checkpoints")
        ),
        format!(
            "CREATE TABLE IF NOT EXISTS {} (
  id {uuid} PRIMARY KEY,
  conversation_id {uuid} NOT NULL,
  actor_id {uuid} NOT NULL,
  task_id {uuid},
  content text NOT NULL,
  external_identity text,
  time {ts} NOT NULL,
  log_txid {big} NOT NULL,
  log_seq {big} NOT NULL)",
            t("messages")
        ),
        format!(
            "CREATE INDEX IF NOT EXISTS {0}_conversation ON {0} (conversation_id, time, id)",
            t("messages")
        ),
        // task_id/actor_id filters run within one conversation: the conversation index
        // narrows them enough, and every index costs each message insert.
    ]
}
