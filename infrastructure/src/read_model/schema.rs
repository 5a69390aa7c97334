//! The read tables of one generation and the views over the current one.

use pm_domain::types::TaskStatus;

use crate::sql::Dialect;

/// The tables of a generation, by view name.
pub const TABLES: &[&str] = &[
    "actors",
    "conversations",
    "conversation_actors",
    "conversation_checkpoints",
    "tasks",
    "task_checkpoints",
    "messages",
];

/// The tables whose rows show personal texts, and so carry `forgotten` (TRUST.md
/// "Forgetting a person"): a row whose texts can no longer be read holds NULL in them and
/// `forgotten` true.
pub const FORGETTABLE: &[&str] = &[
    "actors",
    "conversations",
    "conversation_checkpoints",
    "tasks",
    "messages",
];

/// The physical name of `table` in generation `generation`.
pub fn table(generation: i64, table: &str) -> String {
    format!("rm_g{generation}_{table}")
}

/// The `conversations` column counting its tasks with `status` (`tasks_not_started`,
/// `tasks_work_started`, …).
pub fn status_column(status: TaskStatus) -> String {
    format!("tasks_{}", status.as_str().to_ascii_lowercase())
}

/// `CREATE TABLE`/`CREATE INDEX` statements of a generation.
pub fn create_statements(d: Dialect, g: i64) -> Vec<String> {
    let (uuid, ts, big) = (d.ty("uuid"), d.ty("timestamptz"), d.ty("bigint"));
    // Personal texts are nullable: NULL once forgotten.
    let forgotten = format!("forgotten {} NOT NULL DEFAULT FALSE", d.ty("boolean"));
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
  display_name text,
  external_identity text,
  created_at {ts} NOT NULL,
  {forgotten})",
            t("actors")
        ),
        format!(
            "CREATE TABLE IF NOT EXISTS {} (
  id {uuid} PRIMARY KEY,
  title text,
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
  {status_counts},
  {forgotten})",
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
  summary text,
  created_at {ts} NOT NULL,
  log_txid {big} NOT NULL,
  log_seq {big} NOT NULL,
  {forgotten})",
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
  instructions text,
  assigned_to {uuid},
  organization text,
  created_at {ts} NOT NULL,
  status text NOT NULL,
  status_changed_at {ts},
  status_sequence {big} NOT NULL DEFAULT 1,
  checkpoint_count {big} NOT NULL DEFAULT 0,
  first_work_started_at {ts},
  last_work_completed_at {ts},
  {forgotten})",
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
  content text,
  external_identity text,
  time {ts} NOT NULL,
  log_txid {big} NOT NULL,
  log_seq {big} NOT NULL,
  {forgotten})",
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

/// `DROP TABLE` statements of a generation. On PostgreSQL one statement drops them all:
/// the analysts' row-level security policies of some tables read others of the same
/// generation (`actors` reads `conversation_actors` and `tasks`, `task_checkpoints` reads
/// `tasks`), and a table cannot be dropped alone while another's policy depends on it.
pub fn drop_statements(d: Dialect, g: i64) -> Vec<String> {
    let tables = TABLES.iter().map(|name| table(g, name));
    match d {
        Dialect::Postgres => vec![format!(
            "DROP TABLE IF EXISTS {}",
            tables.collect::<Vec<_>>().join(", ")
        )],
        Dialect::Sqlite => tables
            .map(|t| format!("DROP TABLE IF EXISTS {t}"))
            .collect(),
    }
}

/// Statements pointing the views at generation `g`.
pub fn view_statements(g: i64) -> Vec<String> {
    TABLES
        .iter()
        .flat_map(|name| {
            [
                format!("DROP VIEW IF EXISTS {name}"),
                format!("CREATE VIEW {name} AS SELECT * FROM {}", table(g, name)),
            ]
        })
        .collect()
}
