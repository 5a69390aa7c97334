//! One saga transaction: move every conversation decided on to its next version
//! (compare-and-set: one moved by another writer is a conflict); spend the deadlines it
//! fires; write the deadline and read rows; append the runes and, for a processor batch,
//! move the cursor from where the batch was read (compare-and-set, in the runes'
//! statement) — all or nothing.
//!
//! Only a batch touches the processor's row: controls and deadlines lock the rows of their
//! own conversations, so writers of different conversations commit in parallel. The runes
//! are appended last: on PostgreSQL an append holds the log's order lock until its
//! transaction ends, so the rest of the transaction runs before it takes that lock. They go
//! through the log's one [`Appender`], which also rings the doorbell after the commit.

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use pm_application::log::LogPosition;
use pm_application::sagas::{CommitError, Committed, NewRune, SagaWrite, SAGAS};
use pm_domain::saga::{ids, ConversationState, Deadline, DeadlineOp, InboxChange, Instance, Rune};
use pm_domain::EVENT_VERSION;
use uuid::Uuid;

use crate::append::{Appender, CursorMove, NewEvent};
use crate::db::{Args, Tx, ROWS_PER_STATEMENT};
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
    sessions(&mut tx, write).await.map_err(sql_error)?;
    agents(&mut tx, write).await.map_err(sql_error)?;
    inbox(&mut tx, write).await.map_err(sql_error)?;
    turns(&mut tx, write).await.map_err(sql_error)?;
    tool_calls(&mut tx, write).await.map_err(sql_error)?;
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
                         VALUES ($1::uuid, 1, $2::timestamptz) ON CONFLICT (conversation_id) DO NOTHING",
                        Args::new().uuid(*conversation).time(now),
                    )
                } else {
                    (
                        "UPDATE saga_conversations SET version = version + 1, \
                         updated_at = $3::timestamptz WHERE conversation_id = $1::uuid AND version = $2",
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
                "DELETE FROM saga_deadlines WHERE aggregate_type = $1 AND aggregate_id = $2::uuid \
                 AND kind = $3 AND epoch = $4 AND due_at = $5::timestamptz",
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
            let i = args.push(crate::db::Arg::Text(Some(instance.id().to_string())));
            let k = args.push(crate::db::Arg::Text(Some((*kind).into())));
            keys.push(format!(
                "(aggregate_type = {t} AND aggregate_id = {i}::uuid AND kind = {k})"
            ));
        }
        let sql = format!("DELETE FROM saga_deadlines WHERE {}", keys.join(" OR "));
        tx.execute(&sql, args).await?;
    }
    let armed: Vec<(Uuid, pm_domain::saga::Deadline)> = ops
        .iter()
        .filter_map(|(c, op)| match op {
            DeadlineOp::Arm(d) => Some((*c, *d)),
            DeadlineOp::Disarm { .. } => None,
        })
        .collect();
    tx.insert_all(
        "INSERT INTO saga_deadlines (aggregate_type, aggregate_id, kind, conversation_id, due_at, epoch)",
        &["", "::uuid", "", "::uuid", "::timestamptz", ""],
        "ON CONFLICT (aggregate_type, aggregate_id, kind) DO UPDATE SET \
         conversation_id = excluded.conversation_id, due_at = excluded.due_at, epoch = excluded.epoch",
        &armed,
        |args, (conversation, d)| {
            args.text(d.instance.aggregate_type())
                .uuid(d.instance.id())
                .text(d.kind.as_str())
                .uuid(*conversation)
                .time(&d.due_at)
                .int(d.epoch)
        },
    )
    .await?;
    Ok(())
}

/// A token count as the `bigint` it is stored in (counts beyond it are kept at the max).
fn clamp(tokens: u64) -> i64 {
    i64::try_from(tokens).unwrap_or(i64::MAX)
}

fn json<T: serde::Serialize>(value: &T) -> String {
    serde_json::to_string(value).unwrap_or_else(|_| "null".into())
}

async fn sessions(tx: &mut Tx, write: &SagaWrite) -> Result<(), sqlx::Error> {
    let rows = last_by_key(&write.sessions, |(s, _)| s.conversation_id);
    tx.insert_all(
        "INSERT INTO saga_sessions (conversation_id, state, conversation_state, root_agent_id, \
         agent_ids, waiting_checkpoint_id, waiting_since, consecutive_errors, tokens_used, \
         token_budget, created_at, updated_at)",
        &[
            "::uuid",
            "",
            "",
            "::uuid",
            "",
            "::uuid",
            "::timestamptz",
            "",
            "",
            "",
            "::timestamptz",
            "::timestamptz",
        ],
        "ON CONFLICT (conversation_id) DO UPDATE SET state = excluded.state, \
         conversation_state = excluded.conversation_state, root_agent_id = excluded.root_agent_id, \
         agent_ids = excluded.agent_ids, waiting_checkpoint_id = excluded.waiting_checkpoint_id, \
         waiting_since = CASE WHEN excluded.conversation_state = 'waiting_user' \
           AND saga_sessions.conversation_state = 'waiting_user' \
           THEN saga_sessions.waiting_since ELSE excluded.waiting_since END, \
         consecutive_errors = excluded.consecutive_errors, tokens_used = excluded.tokens_used, \
         token_budget = excluded.token_budget, updated_at = excluded.updated_at",
        &rows,
        |args, (s, at)| {
            let waiting = s.conversation_state == Some(ConversationState::WaitingUser);
            args.uuid(s.conversation_id)
                .text(s.state.as_str())
                .opt_text(s.conversation_state.map(|c| c.as_str()))
                .opt_uuid(s.root_agent_id)
                .text(json(&s.agent_ids))
                .opt_uuid(s.waiting_checkpoint_id)
                .opt_time(waiting.then_some(at))
                .int(i64::from(s.consecutive_errors))
                .int(clamp(s.tokens_used))
                .opt_int(s.token_budget.map(clamp))
                .time(at)
                .time(at)
        },
    )
    .await?;
    Ok(())
}

async fn agents(tx: &mut Tx, write: &SagaWrite) -> Result<(), sqlx::Error> {
    let rows = last_by_key(&write.agents, |(a, _)| a.id);
    tx.insert_all(
        "INSERT INTO saga_agents (id, conversation_id, actor_id, role, state, turn_epoch, \
         active_turn_id, head_status, tokens_used, created_at, updated_at)",
        &[
            "::uuid",
            "::uuid",
            "::uuid",
            "",
            "",
            "",
            "::uuid",
            "",
            "",
            "::timestamptz",
            "::timestamptz",
        ],
        "ON CONFLICT (id) DO UPDATE SET state = excluded.state, turn_epoch = excluded.turn_epoch, \
         active_turn_id = excluded.active_turn_id, head_status = excluded.head_status, \
         tokens_used = excluded.tokens_used, updated_at = excluded.updated_at",
        &rows,
        |args, (a, at)| {
            args.uuid(a.id)
                .uuid(a.conversation_id)
                .opt_uuid(a.actor_id)
                .text(a.role.as_str())
                .text(a.state.as_str())
                .int(a.turn_epoch)
                .opt_uuid(a.active_turn_id)
                .text(a.head_status.as_str())
                .int(clamp(a.tokens_used))
                .time(at)
                .time(at)
        },
    )
    .await?;
    Ok(())
}

async fn turns(tx: &mut Tx, write: &SagaWrite) -> Result<(), sqlx::Error> {
    let rows = last_by_key(&write.turns, |(t, _)| t.id);
    tx.insert_all(
        "INSERT INTO saga_turns (id, agent_id, conversation_id, kind, task_id, input, state, \
         turn_epoch, terminal_rune, deliverable, deliverable_reason, lease_worker, lease_epoch, \
         lease_expires_at, claims, input_tokens, output_tokens, created_at, updated_at)",
        &[
            "::uuid",
            "::uuid",
            "::uuid",
            "",
            "::uuid",
            "",
            "",
            "",
            "",
            "::uuid",
            "",
            "",
            "",
            "::timestamptz",
            "",
            "",
            "",
            "::timestamptz",
            "::timestamptz",
        ],
        // A heartbeat moves `lease_expires_at` of the same claim: a row written for that
        // claim keeps the later expiry.
        "ON CONFLICT (id) DO UPDATE SET state = excluded.state, turn_epoch = excluded.turn_epoch, \
         terminal_rune = excluded.terminal_rune, deliverable = excluded.deliverable, \
         deliverable_reason = excluded.deliverable_reason, lease_worker = excluded.lease_worker, \
         lease_expires_at = CASE WHEN excluded.lease_epoch = saga_turns.lease_epoch \
           AND saga_turns.lease_expires_at > excluded.lease_expires_at \
           THEN saga_turns.lease_expires_at ELSE excluded.lease_expires_at END, \
         lease_epoch = excluded.lease_epoch, claims = excluded.claims, \
         input_tokens = excluded.input_tokens, output_tokens = excluded.output_tokens, \
         updated_at = excluded.updated_at",
        &rows,
        |args, (t, at)| {
            args.uuid(t.id)
                .uuid(t.agent_id)
                .uuid(t.conversation_id)
                .text(t.kind.as_str())
                .opt_uuid(t.task_id)
                .text(json(&t.input))
                .text(t.state.as_str())
                .opt_int(t.turn_epoch)
                .opt_text(t.terminal_rune.clone())
                .opt_uuid(t.deliverable)
                .opt_text(t.deliverable_reason.clone())
                .opt_text(t.lease.as_ref().map(|l| l.worker.clone()))
                .opt_int(t.lease.as_ref().map(|l| l.turn_epoch))
                .opt_time(t.lease.as_ref().map(|l| &l.lease_expires_at))
                .int(i64::from(t.claims))
                .int(clamp(t.input_tokens))
                .int(clamp(t.output_tokens))
                .time(at)
                .time(at)
        },
    )
    .await?;
    Ok(())
}

/// The columns of a `saga_tool_calls` row, in the order [`tool_calls`] binds them.
const TOOL_CALL_COLUMNS: &str = "id, turn_id, conversation_id, call_id, ordinal, tool_name, \
     arguments, state, requires_approval, policy_reason, approver, timeout_ms, result, \
     policy, reported_by, approvers, on_behalf_of, comment, created_at, updated_at";

/// Upserts the tool call rows (the last of a call's rows in the write wins). A call's
/// `tool_name`, `arguments`, `requires_approval` and `timeout_ms` are those of its
/// `tool.call` and never change; `created_at` stays the time of that rune.
///
/// `ordinal` is the call's place in its turn's report order, so a turn lists its calls as
/// the worker reported them even though a batch's calls share one time (the engine writes
/// a conversation's rows at the time of its last rune) and the write holds them by id. It
/// is the call's index in the turn's `tool_calls` of the same write: a `tool.call` is
/// recorded only with the `turn.tool_calls_received` naming it, so the row of a new call's
/// turn is always in the write. A row whose turn is not in it is a later change of the
/// call, which keeps the ordinal it has (the update does not touch it); were such a row
/// new, it would take the count of its turn's stored calls — the next place — with ties
/// (several in one write) left to `(created_at, id)`.
async fn tool_calls(tx: &mut Tx, write: &SagaWrite) -> Result<(), sqlx::Error> {
    let rows = last_by_key(&write.tool_calls, |(c, _)| {
        ids::tool_call_id(c.turn_id, &c.call_id)
    });
    if rows.is_empty() {
        return Ok(());
    }
    // A later row of a turn lists the calls of an earlier one at the same places.
    let mut places: HashMap<(Uuid, &str), i64> = HashMap::new();
    for (turn, _) in &write.turns {
        for (i, call) in turn.tool_calls.iter().enumerate() {
            places.insert(
                (turn.id, call.call_id.as_str()),
                i64::try_from(i).unwrap_or(i64::MAX),
            );
        }
    }
    let casts = [
        "::uuid",
        "::uuid",
        "::uuid",
        "",
        "",
        "",
        "",
        "",
        "",
        "",
        "",
        "",
        "",
        "",
        "",
        "",
        "::uuid",
        "",
        "::timestamptz",
        "::timestamptz",
    ];
    for chunk in rows.chunks(ROWS_PER_STATEMENT) {
        let args = chunk.iter().fold(
            Args::with_capacity(chunk.len() * casts.len()),
            |args, (c, at)| {
                args.uuid(ids::tool_call_id(c.turn_id, &c.call_id))
                    .uuid(c.turn_id)
                    .uuid(c.conversation_id)
                    .text(c.call_id.clone())
                    .opt_int(places.get(&(c.turn_id, c.call_id.as_str())).copied())
                    .text(c.tool_name.clone())
                    .text(json(&c.arguments))
                    .text(c.state.as_str())
                    .bool(c.requires_approval)
                    .opt_text(c.policy_reason.clone())
                    .opt_text(c.approver.clone())
                    .opt_int(c.timeout_ms.map(clamp))
                    .opt_text(c.result.as_ref().map(json))
                    .opt_text(c.policy.clone())
                    .opt_text(c.reported_by.clone())
                    .opt_text(c.approvers.as_ref().map(json))
                    .opt_uuid(c.on_behalf_of)
                    .opt_text(c.comment.clone())
                    .time(at)
                    .time(at)
            },
        );
        tx.fetch_rows(&casts, chunk.len(), args, |source| {
            format!(
                "WITH v ({TOOL_CALL_COLUMNS}) AS ({source}) \
                 INSERT INTO saga_tool_calls ({TOOL_CALL_COLUMNS}) \
                 SELECT v.id, v.turn_id, v.conversation_id, v.call_id, \
                 COALESCE(v.ordinal, (SELECT count(*) FROM saga_tool_calls s \
                   WHERE s.turn_id = v.turn_id)), \
                 v.tool_name, v.arguments, v.state, v.requires_approval, v.policy_reason, \
                 v.approver, v.timeout_ms, v.result, v.policy, v.reported_by, v.approvers, \
                 v.on_behalf_of, v.comment, v.created_at, v.updated_at \
                 FROM v WHERE true \
                 ON CONFLICT (id) DO UPDATE SET state = excluded.state, \
                 policy_reason = excluded.policy_reason, approver = excluded.approver, \
                 result = excluded.result, approvers = excluded.approvers, \
                 on_behalf_of = excluded.on_behalf_of, comment = excluded.comment, \
                 updated_at = excluded.updated_at"
            )
        })
        .await?;
    }
    Ok(())
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
    let mut enqueued: Vec<(Uuid, Uuid, Uuid, i64)> = Vec::new();
    for r in &write.runes {
        let (Instance::Agent(agent), Rune::Agent(rune)) = (&r.recorded.instance, &r.recorded.rune)
        else {
            continue;
        };
        match rune.inbox_change() {
            Some(InboxChange::Enqueued(turn)) => {
                enqueued.push((*agent, turn, r.conversation_id, r.sequence));
            }
            Some(InboxChange::Dequeued(turn)) => {
                let before = enqueued.len();
                enqueued.retain(|(a, t, _, _)| !(a == agent && *t == turn));
                if enqueued.len() == before && !cleared.contains(agent) {
                    left.push((*agent, turn));
                }
            }
            Some(InboxChange::Cleared) => {
                enqueued.retain(|(a, _, _, _)| a != agent);
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
        tx.fetch_rows(&["::uuid", "::uuid"], chunk.len(), args, |source| {
            format!(
                "WITH v (agent_id, turn_id) AS ({source}) \
                 DELETE FROM saga_agent_inbox AS i WHERE EXISTS (SELECT 1 FROM v \
                 WHERE v.agent_id = i.agent_id AND v.turn_id = i.turn_id)"
            )
        })
        .await?;
    }
    for chunk in cleared.chunks(ROWS_PER_STATEMENT) {
        let args = chunk
            .iter()
            .fold(Args::with_capacity(chunk.len()), |args, a| args.uuid(*a));
        tx.fetch_rows(&["::uuid"], chunk.len(), args, |source| {
            format!(
                "WITH v (agent_id) AS ({source}) \
                 DELETE FROM saga_agent_inbox AS i WHERE EXISTS (SELECT 1 FROM v \
                 WHERE v.agent_id = i.agent_id)"
            )
        })
        .await?;
    }
    tx.insert_all(
        "INSERT INTO saga_agent_inbox (agent_id, turn_id, conversation_id, position)",
        &["::uuid", "::uuid", "::uuid", ""],
        "ON CONFLICT (agent_id, turn_id) DO NOTHING",
        &enqueued,
        |args, (agent, turn, conversation, position)| {
            args.uuid(*agent)
                .uuid(*turn)
                .uuid(*conversation)
                .int(*position)
        },
    )
    .await?;
    Ok(())
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
    let rows: Vec<(&NewRune, &pm_domain::saga::SagaAnomaly)> = write
        .runes
        .iter()
        .filter_map(|r| r.recorded.rune.anomaly().map(|a| (r, a)))
        .collect();
    tx.insert_all(
        "INSERT INTO saga_anomalies (id, conversation_id, aggregate_type, aggregate_id, sequence, \
         state, fact, reason, causation_id, created_at)",
        &[
            "::uuid",
            "::uuid",
            "",
            "::uuid",
            "",
            "",
            "",
            "",
            "",
            "::timestamptz",
        ],
        "ON CONFLICT (id) DO NOTHING",
        &rows,
        |args, (r, a)| {
            args.uuid(anomaly_id(&r.recorded.instance, r.sequence))
                .uuid(r.conversation_id)
                .text(r.recorded.instance.aggregate_type())
                .uuid(r.recorded.instance.id())
                .int(r.sequence)
                .text(a.state.clone())
                .text(a.fact.clone())
                .text(a.reason.clone())
                .opt_text(r.metadata.causation_id.clone())
                .time(&r.metadata.recorded_at)
        },
    )
    .await?;
    Ok(())
}
