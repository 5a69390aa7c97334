//! Group commit on PostgreSQL: single-fact appends of concurrent commands are gathered by
//! a writer (one: appends are serialized by the log's order lock) and written by one `INSERT … ON CONFLICT DO NOTHING RETURNING` per
//! batch — one statement, one transaction, one WAL flush for many commands — instead of
//! one each. A row the database skipped lost its optimistic-concurrency race (its
//! sequence is taken): only that command gets `AggregateConflict`, the others succeed.
//! Each command is answered only after the batch has committed, so a `201` still means
//! the fact is durable.

use std::sync::Arc;

use cqrs_es::AggregateError;
use pm_application::idempotency::IdempotencyKey;
use pm_application::log::LogPosition;
use pm_domain::DomainError;
use sqlx::PgPool;
use tokio::sync::{mpsc, oneshot, Mutex};
use uuid::Uuid;

use super::append::{classify, NewEvent};

/// The batch's rows are inserted unless their sequence is taken, and the idempotency key
/// of every written row that has one is completed with its position — in one statement,
/// so a durable fact always has its key's answer.
const PG_APPEND_SKIPPING_TAKEN: &str = "\
WITH input AS (
  SELECT * FROM UNNEST($1::text[], $2::text[], $3::bigint[], $4::text[], $5::text[], $6::text[], $7::text[], $8::uuid[], $9::text[], $10::text[])
    AS i(aggregate_type, aggregate_id, sequence, event_type, event_version, payload, metadata, conversation_id, key_role, key)
), ins AS (
  INSERT INTO events (aggregate_type, aggregate_id, sequence, event_type, event_version, payload, metadata, conversation_id)
  SELECT aggregate_type, aggregate_id, sequence, event_type, event_version, payload::json, metadata::json, conversation_id FROM input
  ON CONFLICT (aggregate_type, aggregate_id, sequence) DO NOTHING
  RETURNING aggregate_type, aggregate_id, sequence, global_position
), done AS (
  UPDATE idempotency_keys k SET status = 201, position = ins.global_position::text
  FROM ins JOIN input i USING (aggregate_type, aggregate_id, sequence)
  WHERE i.key IS NOT NULL AND k.role = i.key_role AND k.key = i.key AND k.status IS NULL
)
SELECT aggregate_type, aggregate_id, sequence, global_position FROM ins";

/// A written row: aggregate type, aggregate id, sequence, global position.
type WrittenRow = (String, String, i64, i64);

/// An owned row waiting for its batch.
struct Job {
    aggregate_type: &'static str,
    aggregate_id: String,
    sequence: i64,
    event_type: String,
    event_version: String,
    payload: String,
    metadata: String,
    conversation_id: Option<Uuid>,
    key: Option<IdempotencyKey>,
    reply: oneshot::Sender<Result<LogPosition, AggregateError<DomainError>>>,
}

/// The handle commands append through.
#[derive(Clone)]
pub struct GroupCommit {
    jobs: mpsc::Sender<Job>,
}

impl GroupCommit {
    /// Starts `workers` batch writers on `pool`, each writing at most `max_batch` rows per
    /// statement.
    pub fn start(pool: PgPool, workers: usize, max_batch: usize) -> Self {
        let (jobs, queue) = mpsc::channel::<Job>(8192);
        let queue = Arc::new(Mutex::new(queue));
        for _ in 0..workers.max(1) {
            tokio::spawn(worker(pool.clone(), queue.clone(), max_batch.max(1)));
        }
        Self { jobs }
    }

    /// Appends one fact (completing `key` with it); returns its log position once its
    /// batch has committed.
    ///
    /// # Errors
    /// `AggregateConflict` when the sequence is taken, otherwise as
    /// [`classify`] maps the database error.
    pub async fn append(
        &self,
        row: &NewEvent<'_>,
        key: Option<&IdempotencyKey>,
    ) -> Result<LogPosition, AggregateError<DomainError>> {
        let (reply, answer) = oneshot::channel();
        let job = Job {
            aggregate_type: row.aggregate_type,
            aggregate_id: row.aggregate_id.to_string(),
            sequence: row.sequence,
            event_type: row.event_type.clone(),
            event_version: row.event_version.clone(),
            payload: row.payload.to_string(),
            metadata: row.metadata.to_string(),
            conversation_id: row.conversation_id,
            key: key.cloned(),
            reply,
        };
        let gone = || AggregateError::DatabaseConnectionError("the append workers stopped".into());
        self.jobs.send(job).await.map_err(|_| gone())?;
        answer.await.map_err(|_| gone())?
    }
}

async fn worker(pool: PgPool, queue: Arc<Mutex<mpsc::Receiver<Job>>>, max_batch: usize) {
    loop {
        let mut jobs = Vec::with_capacity(max_batch);
        {
            let mut queue = queue.lock().await;
            match queue.recv().await {
                Some(job) => jobs.push(job),
                None => return,
            }
            while jobs.len() < max_batch {
                match queue.try_recv() {
                    Ok(job) => jobs.push(job),
                    Err(_) => break,
                }
            }
        }
        write(&pool, jobs).await;
    }
}

async fn write(pool: &PgPool, jobs: Vec<Job>) {
    metrics::histogram!("pm_append_batch_events").record(jobs.len() as f64);
    let result: Result<Vec<WrittenRow>, sqlx::Error> = sqlx::query_as(PG_APPEND_SKIPPING_TAKEN)
        .bind(jobs.iter().map(|j| j.aggregate_type).collect::<Vec<_>>())
        .bind(
            jobs.iter()
                .map(|j| j.aggregate_id.as_str())
                .collect::<Vec<_>>(),
        )
        .bind(jobs.iter().map(|j| j.sequence).collect::<Vec<_>>())
        .bind(
            jobs.iter()
                .map(|j| j.event_type.as_str())
                .collect::<Vec<_>>(),
        )
        .bind(
            jobs.iter()
                .map(|j| j.event_version.as_str())
                .collect::<Vec<_>>(),
        )
        .bind(jobs.iter().map(|j| j.payload.as_str()).collect::<Vec<_>>())
        .bind(jobs.iter().map(|j| j.metadata.as_str()).collect::<Vec<_>>())
        .bind(jobs.iter().map(|j| j.conversation_id).collect::<Vec<_>>())
        .bind(
            jobs.iter()
                .map(|j| j.key.as_ref().map(|k| k.role.as_str()))
                .collect::<Vec<_>>(),
        )
        .bind(
            jobs.iter()
                .map(|j| j.key.as_ref().map(|k| k.key.as_str()))
                .collect::<Vec<_>>(),
        )
        .fetch_all(pool)
        .await;
    match result {
        Ok(rows) => {
            for job in jobs {
                let written = rows.iter().find(|(t, id, seq, _)| {
                    t == job.aggregate_type && *id == job.aggregate_id && *seq == job.sequence
                });
                let answer = match written {
                    Some((_, _, _, position)) => Ok(LogPosition(*position)),
                    None => Err(AggregateError::AggregateConflict),
                };
                let _ = job.reply.send(answer);
            }
        }
        Err(e) => {
            let message = e.to_string();
            let transient = matches!(classify(e), AggregateError::DatabaseConnectionError(_));
            for job in jobs {
                let err = if transient {
                    AggregateError::DatabaseConnectionError(message.clone().into())
                } else {
                    AggregateError::UnexpectedError(message.clone().into())
                };
                let _ = job.reply.send(Err(err));
            }
        }
    }
}
