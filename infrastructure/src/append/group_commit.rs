//! Group commit on PostgreSQL: single-fact appends of concurrent commands are gathered by
//! a writer (one: while its batch commits the next gathers) and written by one
//! `INSERT … ON CONFLICT DO NOTHING RETURNING` per
//! batch — one statement, one transaction, one WAL flush for many commands — instead of
//! one each. A row the database skipped lost its optimistic-concurrency race (its
//! sequence is taken): only that command gets [`AppendFailure::Conflict`]; a row skipped
//! because its unclaimed `Idempotency-Key` already has a record gets
//! [`AppendFailure::KeyTaken`]; the others succeed.
//! Each command is answered only after the batch has committed, so a `201` still means
//! the fact is durable.

use std::sync::Arc;

use pm_application::idempotency::IdempotencyKey;
use pm_application::log::LogPosition;
use sqlx::PgPool;
use tokio::sync::{mpsc, oneshot, Mutex};

use pm_application::bus::AppendFailure;

use super::{is_key_race, NewEvent};
use crate::keys::FreshKey;

/// The batch's rows are inserted unless their sequence is taken, their unclaimed key
/// already has a row, or their claimed key's claim is no longer their replica's (locked,
/// so a take-over waits for this statement or this statement sees it); the key of every
/// written row is written (unclaimed) or completed (claimed) with its position — in one
/// statement, so a durable fact always has its key's answer. The result names every row
/// written, and every row skipped for its key.
///
/// The key check is a scalar sub-select, not `EXISTS`: PostgreSQL may run an `EXISTS` as
/// a hashed subplan over the whole key table (seen: a sequential scan per batch).
/// It reads the statement's snapshot: a key row committed after it makes the
/// key's `INSERT` violate `idempotency_keys_pkey`, the whole statement fails and the batch
/// is written again (the next snapshot sees the row).
const PG_APPEND_SKIPPING_TAKEN: &str = "\
WITH input AS (
  SELECT * FROM UNNEST($1::text[], $2::text[], $3::bigint[], $4::text[], $5::text[], $6::text[], $7::text[], $8::uuid[], $9::text[], $10::text[], $11::text[], $12::bool[], $13::text[], $14::text[], $15::uuid[], $16::bytea[], $17::bool[])
    AS i(aggregate_type, aggregate_id, sequence, event_type, event_version, payload, metadata, conversation_id, key_role, key, key_hash, key_claimed, key_owner, dk_scope, dk_id, dk_material, dk_wrapped)
), checked AS (
  SELECT i.*, CASE WHEN i.key_claimed
    THEN COALESCE((SELECT false FROM idempotency_keys k WHERE k.role = i.key_role AND k.key = i.key
      AND k.status IS NULL AND k.owner = i.key_owner FOR UPDATE), true)
    ELSE COALESCE((SELECT true FROM idempotency_keys k WHERE k.role = i.key_role AND k.key = i.key), false)
  END AS key_taken
  FROM input i
), made AS (
  INSERT INTO pm_keys (scope, id, material, wrapped, created_at)
  SELECT dk_scope, dk_id, dk_material, dk_wrapped, now() FROM checked
  WHERE dk_scope IS NOT NULL AND key_taken IS NOT TRUE
  ON CONFLICT (scope, id) DO NOTHING
  RETURNING scope, id
), ins AS (
  INSERT INTO events (aggregate_type, aggregate_id, sequence, event_type, event_version, payload, metadata, conversation_id)
  SELECT aggregate_type, aggregate_id, sequence, event_type, event_version, payload::json, metadata::json, conversation_id
  FROM checked c WHERE key_taken IS NOT TRUE
    AND (dk_scope IS NULL OR EXISTS (SELECT 1 FROM made m WHERE m.scope = c.dk_scope AND m.id = c.dk_id))
  ON CONFLICT (aggregate_type, aggregate_id, sequence) DO NOTHING
  RETURNING aggregate_type, aggregate_id, sequence, global_position
), done AS (
  UPDATE idempotency_keys k SET status = 201, position = ins.global_position::text
  FROM ins JOIN input i USING (aggregate_type, aggregate_id, sequence)
  WHERE i.key_claimed AND k.role = i.key_role AND k.key = i.key AND k.status IS NULL
    AND k.owner = i.key_owner
), fresh AS (
  INSERT INTO idempotency_keys (role, key, request_hash, created_at, claimed_at, status, position)
  SELECT i.key_role, i.key, i.key_hash, now(), now(), 201, ins.global_position::text
  FROM ins JOIN input i USING (aggregate_type, aggregate_id, sequence)
  WHERE i.key IS NOT NULL AND NOT i.key_claimed
)
SELECT aggregate_type, aggregate_id, sequence, global_position FROM ins
UNION ALL
SELECT aggregate_type, aggregate_id, sequence, NULL FROM checked WHERE key_taken";

/// A row of the result: aggregate type, aggregate id, sequence, and the global position
/// it was written at (`None`: skipped, its key has a row).
type WrittenRow = (String, String, i64, Option<i64>);

/// How often a batch is written again after a key row appeared under its snapshot.
const KEY_RACE_ATTEMPTS: usize = 3;

/// A row waiting for its batch, with the command's key and the command's reply.
struct Job {
    row: NewEvent,
    key: Option<IdempotencyKey>,
    /// The key of the party whose first fact `row` is, stored with it (the row is written
    /// only if its key was: a key there already makes it a [`AppendFailure::Conflict`]).
    fresh: Option<FreshKey>,
    reply: oneshot::Sender<Result<LogPosition, AppendFailure>>,
}

impl Job {
    /// Answers the command waiting for this row (one that went away is not an error).
    fn answer(self, answer: Result<LogPosition, AppendFailure>) {
        let _ = self.reply.send(answer);
    }
}

/// The handle commands append through.
#[derive(Clone)]
pub(super) struct GroupCommit {
    jobs: mpsc::Sender<Job>,
}

impl GroupCommit {
    /// Starts `workers` batch writers on `pool`, each writing at most `max_batch` rows per
    /// statement.
    pub(super) fn start(pool: PgPool, workers: usize, max_batch: usize) -> Self {
        let (jobs, queue) = mpsc::channel::<Job>(8192);
        let queue = Arc::new(Mutex::new(queue));
        for _ in 0..workers.max(1) {
            tokio::spawn(worker(pool.clone(), queue.clone(), max_batch.max(1)));
        }
        Self { jobs }
    }

    /// Appends one fact (writing `key`'s row with it, or completing it when claimed);
    /// returns its log position once its batch has committed.
    ///
    /// # Errors
    /// [`AppendFailure::Conflict`] when the sequence is taken, [`AppendFailure::KeyTaken`]
    /// when the unclaimed key already has a record, otherwise the batch's error.
    pub(super) async fn append(
        &self,
        row: NewEvent,
        key: Option<IdempotencyKey>,
        fresh: Option<FreshKey>,
    ) -> Result<LogPosition, AppendFailure> {
        let (reply, answer) = oneshot::channel();
        let gone = || AppendFailure::Unavailable("the append workers stopped".into());
        self.jobs
            .send(Job {
                row,
                key,
                fresh,
                reply,
            })
            .await
            .map_err(|_| gone())?;
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
        if let Some(away) = write(&pool, jobs).await {
            // The batch waited the whole acquire timeout for a connection: the database is
            // away. Commands that queued meanwhile are answered the same at once rather
            // than after a second timeout of their own, so an outage answers every command
            // within one acquire timeout. Nothing of theirs was written; a retry may pass.
            let mut queue = queue.lock().await;
            while let Ok(job) = queue.try_recv() {
                job.answer(Err(away.clone()));
            }
        }
    }
}

/// Writes one batch and answers its commands; answers the failure when the batch waited
/// in vain for a connection (the database is away).
async fn write(pool: &PgPool, jobs: Vec<Job>) -> Option<AppendFailure> {
    metrics::histogram!("pm_append_batch_events").record(jobs.len() as f64);
    // Two unclaimed rows with one key cannot both be written: the second is skipped, as
    // if the first had committed before it (one replica runs one request per key at a
    // time, so this is a safeguard).
    let mut seen = std::collections::HashSet::new();
    let (jobs, repeats): (Vec<Job>, Vec<Job>) = jobs.into_iter().partition(|job| match &job.key {
        Some(k) if !k.claimed => seen.insert((k.role.clone(), k.key.clone())),
        _ => true,
    });
    for job in repeats {
        job.answer(Err(AppendFailure::KeyTaken));
    }
    // Two rows for one stream's sequence cannot both be written, and the statement's result
    // names the row written, not which job's it was: the second is a lost race, as if the
    // first had committed before it. (One replica's commands on one aggregate take turns, so
    // this only happens between writers that do not.)
    let mut seen = std::collections::HashSet::new();
    let (jobs, raced): (Vec<Job>, Vec<Job>) = jobs.into_iter().partition(|job| {
        seen.insert((
            job.row.aggregate_type,
            job.row.aggregate_id.clone(),
            job.row.sequence,
        ))
    });
    for job in raced {
        job.answer(Err(AppendFailure::Conflict));
    }
    let mut attempt = 1;
    let result = loop {
        match statement(pool, &jobs).await {
            Err(e) if attempt < KEY_RACE_ATTEMPTS && is_key_race(&e) => attempt += 1,
            result => break result,
        }
    };
    match result {
        Ok(rows) => {
            for job in jobs {
                let row = &job.row;
                let written = rows.iter().find(|(t, id, seq, _)| {
                    t == row.aggregate_type && *id == row.aggregate_id && *seq == row.sequence
                });
                let answer = match written {
                    Some((_, _, _, Some(position))) => Ok(LogPosition(*position)),
                    Some((_, _, _, None)) => Err(AppendFailure::KeyTaken),
                    None => Err(AppendFailure::Conflict),
                };
                job.answer(answer);
            }
        }
        Err(e) => {
            // Key rows still colliding after every attempt: nothing was written, and a
            // retry of each command will see the rows that collided — try again, as when
            // the database is away. (A taken sequence cannot fail the statement: those rows
            // are skipped.)
            let error = match super::failure_of(&e) {
                AppendFailure::KeyTaken | AppendFailure::Conflict => {
                    AppendFailure::Unavailable(e.to_string())
                }
                other => other,
            };
            for job in jobs {
                job.answer(Err(error.clone()));
            }
            return matches!(e, sqlx::Error::PoolTimedOut).then_some(error);
        }
    }
    None
}

/// The batch's one statement.
async fn statement(pool: &PgPool, jobs: &[Job]) -> Result<Vec<WrittenRow>, sqlx::Error> {
    let keys = || jobs.iter().map(|j| j.key.as_ref());
    let fresh = || jobs.iter().map(|j| j.fresh.as_ref());
    super::bind_rows(
        sqlx::query_as(PG_APPEND_SKIPPING_TAKEN),
        jobs.iter().map(|j| &j.row),
    )
    .bind(
        keys()
            .map(|k| k.map(|k| k.role.as_str()))
            .collect::<Vec<_>>(),
    )
    .bind(
        keys()
            .map(|k| k.map(|k| k.key.as_str()))
            .collect::<Vec<_>>(),
    )
    .bind(
        keys()
            .map(|k| k.map(|k| k.request_hash.as_str()))
            .collect::<Vec<_>>(),
    )
    .bind(
        keys()
            .map(|k| k.is_some_and(|k| k.claimed))
            .collect::<Vec<_>>(),
    )
    .bind(
        keys()
            .map(|k| k.map(|k| k.owner.as_str()))
            .collect::<Vec<_>>(),
    )
    .bind(
        fresh()
            .map(|f| f.map(|f| f.scope.as_str()))
            .collect::<Vec<_>>(),
    )
    .bind(fresh().map(|f| f.map(|f| f.id)).collect::<Vec<_>>())
    .bind(
        fresh()
            .map(|f| f.map(|f| f.material.as_slice()))
            .collect::<Vec<_>>(),
    )
    .bind(fresh().map(|f| f.map(|f| f.wrapped)).collect::<Vec<_>>())
    .fetch_all(pool)
    .await
}
