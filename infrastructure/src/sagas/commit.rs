//! One saga transaction: move every conversation decided on to its next version
//! (compare-and-set: one moved by another writer is a conflict); spend the deadlines it
//! fires; write the deadline and read rows; append the runes and, for a processor batch,
//! move the cursor from where the batch was read (compare-and-set, in the runes'
//! statement) — all or nothing.
//!
//! Only a batch touches the processor's row: controls and deadlines lock the rows of their
//! own conversations, so writers of different conversations commit in parallel. The runes
//! are appended last: on PostgreSQL readers cannot pass an append until its transaction
//! ends, so the rest of the transaction runs before it appends. They go
//! through the log's one [`Appender`], which also rings the doorbell after the commit.

use std::collections::{BTreeSet, HashMap};

use chrono::{DateTime, Utc};
use pm_application::log::LogPosition;
use pm_application::sagas::{CommitError, Committed, NewRune, SagaWrite, SAGAS};
use pm_application::views::{AnomalyInstance, AnomalyView};
use pm_domain::saga::{ids, Deadline, DeadlineOp, InboxChange, Instance, Rune};
use pm_domain::EVENT_VERSION;
use uuid::Uuid;

use super::table::upsert;
use super::tables::{ArmedDeadline, Queued};
use crate::append::{Appender, CursorMove, NewEvent};
use crate::db::{Args, SqlType, Tx, ROWS_PER_STATEMENT};
use crate::processor::store::store_error;
use crate::Database;
use pm_application::bus::AppendFailure;

fn sql_error(e: sqlx::Error) -> CommitError {
    CommitError::Store(store_error(e))
}

/// Writes `write` as one transaction; see the module documentation.
///
/// # Errors
/// [`CommitError::Conflict`] when a conversation is not at its version or a fired deadline
/// is gone, [`CommitError::CursorMoved`] when a batch's cursor is not where it started,
/// [`CommitError::Store`] otherwise.
pub async fn commit(
    db: &Database,
    appender: &Appender,
    write: &SagaWrite,
    batch: Option<(LogPosition, LogPosition)>,
) -> Result<Committed, CommitError> {
    let now = Utc::now();
    let mut tx = db.begin().await.map_err(sql_error)?;
    let all = || write.conversations.iter().map(|(c, _)| *c).collect();
    let conflicts = versions(&mut tx, &write.conversations, &now)
        .await
        .map_err(sql_error)?;
    if !conflicts.is_empty() {
        return Err(CommitError::Conflict {
            conversations: conflicts,
        });
    }
    if !spend(&mut tx, &write.fired).await.map_err(sql_error)? {
        return Err(CommitError::Conflict {
            conversations: all(),
        });
    }
    super::leases::hold(&mut tx, &write.leases).await?;
    deadlines(&mut tx, write).await.map_err(sql_error)?;
    let forgotten = forgotten(&mut tx, write).await.map_err(sql_error)?;
    rows(&mut tx, write, &forgotten).await.map_err(sql_error)?;
    inbox(&mut tx, write).await.map_err(sql_error)?;
    anomalies(&mut tx, write).await.map_err(sql_error)?;
    let runes: Vec<NewEvent> = write.runes.iter().map(rune).collect();
    let cursor = batch.map(|(from, to)| CursorMove {
        processor: SAGAS,
        from,
        to,
    });
    let last_position = match appender.append_in(&mut tx, &runes, cursor).await {
        // Another owner moved the cursor: the transaction is dropped, nothing written.
        Ok(appended) if !appended.cursor_moved => return Err(CommitError::CursorMoved),
        Ok(appended) => appended.last,
        // A taken sequence: another writer appended to a stream of these conversations.
        Err(AppendFailure::Conflict | AppendFailure::KeyTaken) => {
            return Err(CommitError::Conflict {
                conversations: all(),
            })
        }
        Err(other) => return Err(CommitError::Store(other.into())),
    };
    tx.commit().await.map_err(sql_error)?;
    if last_position.is_some() {
        appender.ring();
    }
    Ok(Committed { last_position })
}

/// A rune as a row of the log.
fn rune(r: &NewRune) -> NewEvent {
    NewEvent {
        aggregate_type: r.recorded.instance.aggregate_type(),
        aggregate_id: r.recorded.instance.id().to_string(),
        sequence: r.sequence,
        event_type: r.recorded.event_type().to_string(),
        event_version: EVENT_VERSION.to_string(),
        payload: r.recorded.payload_text(),
        metadata: json(&r.metadata),
        conversation_id: Some(r.conversation_id),
    }
}

/// Moves every conversation from its expected version to the next (a conversation without
/// a row is at 0); answers those that were not at their expected version.
async fn versions(
    tx: &mut Tx,
    expected: &[(Uuid, i64)],
    now: &DateTime<Utc>,
) -> Result<Vec<Uuid>, sqlx::Error> {
    if expected.is_empty() {
        return Ok(Vec::new());
    }
    let moved: Vec<Uuid> = match tx {
        Tx::Postgres(pg) => {
            sqlx::query_scalar(PG_VERSIONS)
                .bind(expected.iter().map(|(c, _)| *c).collect::<Vec<_>>())
                .bind(expected.iter().map(|(_, v)| *v).collect::<Vec<_>>())
                .bind(*now)
                .fetch_all(&mut **pg)
                .await?
        }
        Tx::Sqlite(_) => {
            let mut moved = Vec::with_capacity(expected.len());
            for (conversation, version) in expected {
                let (sql, args) = if *version == 0 {
                    (
                        "INSERT INTO saga_conversations (conversation_id, version, updated_at) \
                         VALUES ($1, 1, $2) ON CONFLICT (conversation_id) DO NOTHING",
                        Args::new().uuid(*conversation).time(now),
                    )
                } else {
                    (
                        "UPDATE saga_conversations SET version = version + 1, \
                         updated_at = $3 WHERE conversation_id = $1 AND version = $2",
                        Args::new().uuid(*conversation).int(*version).time(now),
                    )
                };
                if tx.execute(sql, args).await? == 1 {
                    moved.push(*conversation);
                }
            }
            moved
        }
    };
    Ok(expected
        .iter()
        .map(|(c, _)| *c)
        .filter(|c| !moved.contains(c))
        .collect())
}

/// [`versions`] as one PostgreSQL statement: the conversations moved or created.
const PG_VERSIONS: &str = "\
WITH input AS (
  SELECT * FROM UNNEST($1::uuid[], $2::bigint[]) AS i(conversation_id, expected)
), moved AS (
  UPDATE saga_conversations c SET version = c.version + 1, updated_at = $3
  FROM input i
  WHERE c.conversation_id = i.conversation_id AND i.expected > 0 AND c.version = i.expected
  RETURNING c.conversation_id
), created AS (
  INSERT INTO saga_conversations (conversation_id, version, updated_at)
  SELECT conversation_id, 1, $3 FROM input WHERE expected = 0
  ON CONFLICT (conversation_id) DO NOTHING
  RETURNING conversation_id
)
SELECT conversation_id FROM moved UNION ALL SELECT conversation_id FROM created";

/// Deletes the deadline rows `fired` names (with their epoch and due time); answers
/// whether every one was still there.
async fn spend(tx: &mut Tx, fired: &[(Uuid, Deadline)]) -> Result<bool, sqlx::Error> {
    for (_, d) in fired {
        let deleted = tx
            .execute(
                "DELETE FROM saga_deadlines WHERE aggregate_type = $1 AND aggregate_id = $2 \
                 AND kind = $3 AND epoch = $4 AND due_at = $5",
                Args::new()
                    .text(d.instance.aggregate_type())
                    .uuid(d.instance.id())
                    .text(d.kind.as_str())
                    .int(d.epoch)
                    .time(&d.due_at),
            )
            .await?;
        if deleted == 0 {
            return Ok(false);
        }
    }
    Ok(true)
}

/// Keeps the last of the items with the same key, in first-seen order.
fn last_by_key<T: Clone, K: std::hash::Hash + Eq>(items: &[T], key: impl Fn(&T) -> K) -> Vec<T> {
    let mut at: HashMap<K, usize> = HashMap::new();
    let mut kept: Vec<T> = Vec::new();
    for item in items {
        match at.get(&key(item)) {
            Some(i) => kept[*i] = item.clone(),
            None => {
                at.insert(key(item), kept.len());
                kept.push(item.clone());
            }
        }
    }
    kept
}

async fn deadlines(tx: &mut Tx, write: &SagaWrite) -> Result<(), sqlx::Error> {
    let ops = last_by_key(&write.deadlines, |(_, op)| op.key());
    let disarmed: Vec<(Instance, &str)> = ops
        .iter()
        .filter_map(|(_, op)| match op {
            DeadlineOp::Disarm { instance, kind } => Some((*instance, kind.as_str())),
            DeadlineOp::Arm(_) => None,
        })
        .collect();
    for chunk in disarmed.chunks(ROWS_PER_STATEMENT) {
        let mut args = Args::with_capacity(chunk.len() * 3);
        let mut keys = Vec::with_capacity(chunk.len());
        for (instance, kind) in chunk {
            let t = args.push(crate::db::Arg::Text(Some(instance.aggregate_type().into())));
            let i = args.push(crate::db::Arg::Uuid(Some(instance.id())));
            let k = args.push(crate::db::Arg::Text(Some((*kind).into())));
            keys.push(format!(
                "(aggregate_type = {t} AND aggregate_id = {i} AND kind = {k})"
            ));
        }
        let sql = format!("DELETE FROM saga_deadlines WHERE {}", keys.join(" OR "));
        tx.execute(&sql, args).await?;
    }
    let armed: Vec<ArmedDeadline> = ops
        .iter()
        .filter_map(|(conversation_id, op)| match op {
            DeadlineOp::Arm(deadline) => Some(ArmedDeadline {
                conversation_id: *conversation_id,
                deadline: *deadline,
            }),
            DeadlineOp::Disarm { .. } => None,
        })
        .collect();
    upsert(tx, &armed).await
}

fn json<T: serde::Serialize>(value: &T) -> String {
    serde_json::to_string(value).unwrap_or_else(|_| "null".into())
}

/// The rows of the sessions, agents, turns and tool calls the write changed: the last of
/// each row's in the write wins (one statement may not change a row twice).
/// The conversations of the write's tool calls that were forgotten (their key destroyed):
/// read after the write's versions moved, so a forgetting that committed before is seen
/// and one still to come waits for this write and scrubs what it wrote.
async fn forgotten(tx: &mut Tx, write: &SagaWrite) -> Result<BTreeSet<Uuid>, sqlx::Error> {
    let conversations: BTreeSet<Uuid> = write
        .tool_calls
        .iter()
        .map(|c| c.call.conversation_id)
        .collect();
    let mut forgotten = BTreeSet::new();
    for conversation in conversations {
        let destroyed = tx
            .fetch_optional(
                "SELECT 1 AS n FROM pm_keys WHERE scope = $1 AND id = $2 AND length(material) = 0",
                Args::new()
                    .text(crate::keys::Scope::Conversation.as_str())
                    .uuid(conversation),
            )
            .await?;
        if destroyed.is_some() {
            forgotten.insert(conversation);
        }
    }
    Ok(forgotten)
}

async fn rows(
    tx: &mut Tx,
    write: &SagaWrite,
    forgotten: &BTreeSet<Uuid>,
) -> Result<(), sqlx::Error> {
    upsert(tx, &last_by_key(&write.sessions, |s| s.conversation_id)).await?;
    upsert(tx, &last_by_key(&write.agents, |a| a.id)).await?;
    upsert(tx, &last_by_key(&write.turns, |t| t.id)).await?;
    let mut calls = last_by_key(&write.tool_calls, |c| {
        ids::tool_call_id(c.call.turn_id, &c.call.call_id)
    });
    // A forgotten conversation's texts are never written again, here as in the log.
    for placed in calls
        .iter_mut()
        .filter(|c| forgotten.contains(&c.call.conversation_id))
    {
        placed.call.arguments = serde_json::Value::Null;
        placed.call.comment = None;
        if let Some(result) = &mut placed.call.result {
            result.output = None;
            result.error = None;
        }
    }
    upsert(tx, &calls).await
}

/// What the write's agent runes do to the inboxes ([`InboxChange`], the domain's own
/// definition): a turn enqueued is a row, a turn dispatched is no row, an agent terminated
/// has none. The changes are netted in order (a turn enqueued and dispatched in one write
/// leaves nothing), then written as at most three statements: the turns that leave, the
/// inboxes that are cleared, the rows that come inserted.
///
/// A turn leaves by its whole primary key and an inbox is cleared by its agent, each in a
/// statement of its own: one statement for both (a join on the agent with `turn IS NULL OR
/// turn = …`) cannot use the key for the turn, and PostgreSQL ran it as a hash join over a
/// sequential scan of every queued turn of every agent on each batch that dispatched one.
async fn inbox(tx: &mut Tx, write: &SagaWrite) -> Result<(), sqlx::Error> {
    let mut left: Vec<(Uuid, Uuid)> = Vec::new();
    let mut cleared: Vec<Uuid> = Vec::new();
    let mut enqueued: Vec<Queued> = Vec::new();
    for r in &write.runes {
        let (Instance::Agent(agent), Rune::Agent(rune)) = (&r.recorded.instance, &r.recorded.rune)
        else {
            continue;
        };
        match rune.inbox_change() {
            Some(InboxChange::Enqueued(turn)) => {
                enqueued.push(Queued {
                    agent_id: *agent,
                    turn_id: turn,
                    conversation_id: r.conversation_id,
                    position: r.sequence,
                });
            }
            Some(InboxChange::Dequeued(turn)) => {
                let before = enqueued.len();
                enqueued.retain(|q| !(q.agent_id == *agent && q.turn_id == turn));
                if enqueued.len() == before && !cleared.contains(agent) {
                    left.push((*agent, turn));
                }
            }
            Some(InboxChange::Cleared) => {
                enqueued.retain(|q| q.agent_id != *agent);
                left.retain(|(a, _)| a != agent);
                if !cleared.contains(agent) {
                    cleared.push(*agent);
                }
            }
            None => {}
        }
    }
    for chunk in left.chunks(ROWS_PER_STATEMENT) {
        let args = chunk
            .iter()
            .fold(Args::with_capacity(chunk.len() * 2), |args, (a, t)| {
                args.uuid(*a).uuid(*t)
            });
        tx.fetch_rows(
            &[SqlType::Uuid, SqlType::Uuid],
            chunk.len(),
            args,
            |source| {
                format!(
                    "WITH v (agent_id, turn_id) AS ({source}) \
                 DELETE FROM saga_agent_inbox AS i WHERE EXISTS (SELECT 1 FROM v \
                 WHERE v.agent_id = i.agent_id AND v.turn_id = i.turn_id)"
                )
            },
        )
        .await?;
    }
    for chunk in cleared.chunks(ROWS_PER_STATEMENT) {
        let args = chunk
            .iter()
            .fold(Args::with_capacity(chunk.len()), |args, a| args.uuid(*a));
        tx.fetch_rows(&[SqlType::Uuid], chunk.len(), args, |source| {
            format!(
                "WITH v (agent_id) AS ({source}) \
                 DELETE FROM saga_agent_inbox AS i WHERE EXISTS (SELECT 1 FROM v \
                 WHERE v.agent_id = i.agent_id)"
            )
        })
        .await?;
    }
    upsert(tx, &enqueued).await
}

/// The id of the anomaly recorded as rune `sequence` of `instance`.
pub fn anomaly_id(instance: &Instance, sequence: i64) -> Uuid {
    Uuid::new_v5(
        &pm_domain::ids::NAMESPACE,
        format!(
            "anomaly\n{}\n{}\n{sequence}",
            instance.aggregate_type(),
            instance.id()
        )
        .as_bytes(),
    )
}

async fn anomalies(tx: &mut Tx, write: &SagaWrite) -> Result<(), sqlx::Error> {
    let rows: Vec<AnomalyView> = write
        .runes
        .iter()
        .filter_map(|r| {
            let a = r.recorded.rune.anomaly()?;
            Some(AnomalyView {
                id: anomaly_id(&r.recorded.instance, r.sequence),
                conversation_id: r.conversation_id,
                instance: AnomalyInstance {
                    aggregate_type: r.recorded.instance.aggregate_type().to_string(),
                    id: r.recorded.instance.id(),
                },
                sequence: r.sequence,
                state: a.state.clone(),
                fact: a.fact.clone(),
                reason: a.reason.clone(),
                causation_id: r.metadata.causation_id.clone(),
                created_at: r.metadata.recorded_at,
            })
        })
        .collect();
    upsert(tx, &rows).await
}
