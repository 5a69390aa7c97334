//! [`Appender`]: the one writer of the `events` table — the global log — on both stores.
//! Commands' facts, the sagas' runes and operators' controls all append through it (and
//! workers' reports will), so what an append must do is done in one place:
//!
//! - **Order**: every statement that inserts into `events` first names the floor its
//!   positions will be above, with a shared lock (PostgreSQL: the `BEFORE INSERT … FOR
//!   EACH STATEMENT` trigger of migration `0017_log_horizon.sql`, held until the
//!   transaction ends), so readers can tell how far every position is final
//!   ([`crate::log`]'s horizon) and a reader following `global_position > cursor` misses
//!   nothing. SQLite's single writer hands positions out in commit order.
//! - **Personal texts**: every personal field of a row ([`pm_domain::personal`]) is sealed
//!   under its actor's and conversation's keys before it is stored ([`crate::keys`]); the
//!   keys are made on demand — committed at once, or in the caller's transaction for
//!   [`Appender::append_in`] — so no stored text ever lacks its key.
//! - **Derived columns**: `conversation_id` comes with each row ([`NewEvent`]), so
//!   `?conversation_id=` finds every event of a conversation, task checkpoints and runes
//!   included.
//! - **Doorbell**: the appender rings this replica's readers after every committed append
//!   (the doorbell task relays it to other replicas with `NOTIFY`, outside the append).
//! - **Typed outcome**: the bus's [`AppendFailure`] says what went wrong — a taken sequence, a taken
//!   idempotency key, the store away, anything else — instead of a database error.
//!
//! Three ways in, one per kind of caller:
//! - [`Appender::append`] — one command's facts, atomically, with its `Idempotency-Key`'s
//!   row written or completed in the same statement (PostgreSQL) or transaction (SQLite);
//!   single facts on PostgreSQL are gathered by [group commit](group_commit); a command
//!   fenced by a worker's claim is appended in a transaction that checks the claim still
//!   holds the turn ([fenced]).
//! - [`Appender::append_in`] — rows inside a caller's transaction (a saga write: runes with
//!   their read rows and the processor's cursor), the cursor moved by the same statement on
//!   PostgreSQL; the caller rings with [`Appender::ring`] once it has committed.

mod command;
mod fenced;
mod forgetting;
mod group_commit;
mod within;

use std::borrow::Cow;
use std::sync::Arc;

use pm_application::bus::{AppendFailure, Fence};
use pm_application::idempotency::IdempotencyKey;
use pm_application::log::LogPosition;
use pm_domain::personal::personal_fields;
use tokio::sync::watch;
use uuid::Uuid;

use crate::db::Tx;
use crate::keys::sealing::{Place, SealError};
use crate::keys::{KeyError, KeyStore, Scope};
use crate::Database;
use pm_domain::actor::ActorRegistered;
use pm_domain::conversation::ConversationStarted;

use group_commit::GroupCommit;

/// One row to append, serialized.
#[derive(Debug, Clone, PartialEq)]
pub struct NewEvent {
    /// The aggregate type (`Aggregate::TYPE`, or a saga instance's type).
    pub aggregate_type: &'static str,
    /// The aggregate id.
    pub aggregate_id: String,
    /// The stream sequence (1-based); the primary key makes it the optimistic lock.
    pub sequence: i64,
    /// The fact's (or rune's) name.
    pub event_type: String,
    /// Its version.
    pub event_version: String,
    /// The payload, as JSON text.
    pub payload: String,
    /// The metadata, as JSON text.
    pub metadata: String,
    /// The conversation the event belongs to.
    pub conversation_id: Option<Uuid>,
}

impl NewEvent {
    /// Where the row's sealed texts are bound ([`crate::keys::sealing`]).
    fn place(&self) -> Place<'_> {
        Place {
            event_type: &self.event_type,
            aggregate_type: self.aggregate_type,
            aggregate_id: &self.aggregate_id,
            sequence: self.sequence,
            conversation_id: self.conversation_id,
        }
    }

    fn is_personal(&self) -> bool {
        !personal_fields(&self.event_type).is_empty()
    }
}

/// The party whose first fact `row` is — an actor's registration, a conversation's start —
/// and so whose key it may store ([`Appender::append_first`]).
fn first_of(row: &NewEvent) -> Option<(Scope, Uuid)> {
    if row.sequence != 1 {
        return None;
    }
    let scope = match row.event_type.as_str() {
        ActorRegistered::NAME => Scope::Actor,
        ConversationStarted::NAME => Scope::Conversation,
        _ => return None,
    };
    Some((scope, row.aggregate_id.parse().ok()?))
}

/// What a payload that could not be sealed means to its append.
fn seal_failure(e: &SealError) -> AppendFailure {
    match e {
        SealError::Store(KeyError::Store(e)) => failure_of(e),
        other => AppendFailure::Other(format!("cannot seal the personal data: {other}")),
    }
}

/// A processor's cursor moved with an append, from where the processor read it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CursorMove<'a> {
    /// The processor.
    pub processor: &'a str,
    /// Where the cursor must still be.
    pub from: LogPosition,
    /// Where it moves.
    pub to: LogPosition,
}

/// What an append in a caller's transaction did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Appended {
    /// The last row's position (`None`: no rows).
    pub last: Option<LogPosition>,
    /// Whether the cursor moved (`true` without one); when it did not, another owner moved
    /// it and the caller must roll back.
    pub cursor_moved: bool,
}

/// What a database error means to an append: a taken sequence (the events' primary key)
/// is a conflict, a taken idempotency key (its primary key) is [`AppendFailure::KeyTaken`],
/// a transient error is the store being unavailable.
fn failure_of(e: &sqlx::Error) -> AppendFailure {
    match e {
        sqlx::Error::Database(db) if db.is_unique_violation() => {
            if db.constraint() == Some("idempotency_keys_pkey") {
                AppendFailure::KeyTaken
            } else {
                AppendFailure::Conflict
            }
        }
        _ if crate::db::is_transient(e) => AppendFailure::Unavailable(e.to_string()),
        _ => AppendFailure::Other(e.to_string()),
    }
}

/// The PostgreSQL query of an append: `query` with the rows' eight columns bound as
/// arrays (`$1` to `$8`: aggregate type, id, sequence, event type, version, payload,
/// metadata, conversation), the order every `UNNEST` of the appender reads them in.
fn bind_rows<'q, O, R>(
    query: sqlx::query::QueryAs<'q, sqlx::Postgres, O, sqlx::postgres::PgArguments>,
    rows: R,
) -> sqlx::query::QueryAs<'q, sqlx::Postgres, O, sqlx::postgres::PgArguments>
where
    R: Iterator<Item = &'q NewEvent> + Clone,
{
    let text = |f: fn(&'q NewEvent) -> &'q str| rows.clone().map(f).collect::<Vec<_>>();
    query
        .bind(text(|r| r.aggregate_type))
        .bind(text(|r| &r.aggregate_id))
        .bind(rows.clone().map(|r| r.sequence).collect::<Vec<_>>())
        .bind(text(|r| &r.event_type))
        .bind(text(|r| &r.event_version))
        .bind(text(|r| &r.payload))
        .bind(text(|r| &r.metadata))
        .bind(rows.map(|r| r.conversation_id).collect::<Vec<_>>())
}

/// Whether `e` is an unclaimed key's row colliding with one committed meanwhile.
fn is_key_race(e: &sqlx::Error) -> bool {
    failure_of(e) == AppendFailure::KeyTaken
}

struct Inner {
    db: Database,
    keys: Arc<KeyStore>,
    group_commit: Option<GroupCommit>,
    doorbell: watch::Sender<u64>,
}

/// The writer of the log. Cheap to clone; one per replica (its group commit gathers the
/// replica's single-fact appends).
#[derive(Clone)]
pub struct Appender {
    inner: Arc<Inner>,
}

impl Appender {
    /// The appender of `db`, sealing personal texts with `keys`, ringing `doorbell` after
    /// every append it commits.
    pub fn new(db: Database, keys: Arc<KeyStore>, doorbell: watch::Sender<u64>) -> Self {
        let group_commit = match &db {
            // One writer: while its batch commits, the next one gathers every command that
            // arrives meanwhile (measured when appends were serialized: 1 writer 81–97 % of
            // the raw INSERT rate, 4 writers 69 %). SQLite has one writer anyway.
            Database::Postgres(pool) => Some(GroupCommit::start(pool.clone(), 1, 256)),
            Database::Sqlite(_) => None,
        };
        Self {
            inner: Arc::new(Inner {
                db,
                keys,
                group_commit,
                doorbell,
            }),
        }
    }

    /// Appends one command's `rows` atomically, with `key`'s row written (or completed,
    /// when claimed) with them; answers their positions in row order.
    ///
    /// # Errors
    /// [`AppendFailure`]; nothing is written then.
    pub async fn append(
        &self,
        rows: Vec<NewEvent>,
        key: Option<&IdempotencyKey>,
        fence: Option<&Fence>,
    ) -> Result<Vec<LogPosition>, AppendFailure> {
        if rows.is_empty() {
            return Ok(Vec::new());
        }
        let forgotten: Vec<_> = rows
            .iter()
            .filter_map(crate::forgetting::forgotten_by)
            .collect();
        // A party's first fact is tried with its texts in the clear: it seals them under
        // the key it stores itself. Sealed first, it would find nothing left to seal and
        // make its key in a statement of its own.
        if let ([row], None, true) = (rows.as_slice(), fence, forgotten.is_empty()) {
            if let Some(position) = self.append_first(row, key).await? {
                self.ring();
                return Ok(vec![position]);
            }
        }
        let mut rows = rows;
        for row in rows.iter_mut().filter(|r| r.is_personal()) {
            let mut payload = std::mem::take(&mut row.payload);
            let sealed = self.inner.keys.seal_text(&row.place(), &mut payload).await;
            row.payload = payload;
            sealed.map_err(|e| seal_failure(&e))?;
        }
        let positions = match (&self.inner.group_commit, rows.len()) {
            // The key is destroyed by the transaction that appends the fact.
            _ if !forgotten.is_empty() => {
                forgetting::append(&self.inner.db, &self.inner.keys, &rows, key, &forgotten).await?
            }
            // A fenced command decides on its turn's lease in its own transaction.
            _ if fence.is_some() => {
                let Some(fence) = fence else {
                    return Err(AppendFailure::Other("a fence, and none".into()));
                };
                fenced::append(&self.inner.db, &rows, key, fence).await?
            }
            (Some(group), 1) => {
                let row = rows
                    .into_iter()
                    .next()
                    .ok_or_else(|| AppendFailure::Other("one row to append, and none".into()))?;
                vec![group.append(row, key.cloned(), None).await?]
            }
            _ => command::append(&self.inner.db, &rows, key).await?,
        };
        self.ring();
        Ok(positions)
    }

    /// Appends a party's first fact (an actor's registration, a conversation's start) with
    /// the party's key made in memory and stored by the same statement ([`crate::keys::FreshKey`]):
    /// `None` when `row` is no such fact, or when the key or the sequence was taken — the
    /// caller then appends it the general way, sealed with the stored key.
    async fn append_first(
        &self,
        row: &NewEvent,
        key: Option<&IdempotencyKey>,
    ) -> Result<Option<LogPosition>, AppendFailure> {
        let Some((scope, id)) = first_of(row) else {
            return Ok(None);
        };
        let keys = &self.inner.keys;
        let fresh = keys
            .fresh(scope, id)
            .map_err(|e| seal_failure(&SealError::Store(e)))?;
        let mut sealed = row.clone();
        let place = row.place();
        if !keys
            .seal_text_fresh(&place, &mut sealed.payload, &fresh)
            .map_err(|e| seal_failure(&e))?
        {
            return Ok(None);
        }
        let written = match &self.inner.group_commit {
            Some(group) => {
                group
                    .append(sealed, key.cloned(), Some(fresh.clone()))
                    .await
            }
            None => command::append_first(&self.inner.db, &sealed, key, &fresh).await,
        };
        match written {
            Ok(position) => {
                keys.adopt(&fresh);
                Ok(Some(position))
            }
            Err(AppendFailure::Conflict) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Appends `rows` in `tx` (the caller commits) and, for a processor's batch, moves its
    /// cursor with them if it is still where the batch was read (compare-and-set, in the
    /// same statement on PostgreSQL).
    ///
    /// # Errors
    /// [`AppendFailure`]; the transaction must be rolled back then.
    pub async fn append_in(
        &self,
        tx: &mut Tx,
        rows: &[NewEvent],
        cursor: Option<CursorMove<'_>>,
    ) -> Result<Appended, AppendFailure> {
        let rows = self.sealed_in(tx, rows).await?;
        within::append(tx, &rows, cursor)
            .await
            .map_err(|e| failure_of(&e))
    }

    /// `rows` with their personal texts sealed (copied only when some have any).
    async fn sealed_in<'r>(
        &self,
        tx: &mut Tx,
        rows: &'r [NewEvent],
    ) -> Result<Cow<'r, [NewEvent]>, AppendFailure> {
        if !rows.iter().any(NewEvent::is_personal) {
            return Ok(Cow::Borrowed(rows));
        }
        let mut sealed = rows.to_vec();
        for row in sealed.iter_mut().filter(|r| r.is_personal()) {
            let mut payload = std::mem::take(&mut row.payload);
            let done = self
                .inner
                .keys
                .seal_text_in(tx, &row.place(), &mut payload)
                .await;
            row.payload = payload;
            done.map_err(|e| seal_failure(&e))?;
        }
        Ok(Cow::Owned(sealed))
    }

    /// The keys personal texts are sealed with.
    pub fn keys(&self) -> &Arc<KeyStore> {
        &self.inner.keys
    }

    /// Tells this replica's log readers that new events may be readable (after a caller's
    /// transaction with [`Appender::append_in`] committed).
    pub fn ring(&self) {
        self.inner.doorbell.send_modify(|n| *n = n.wrapping_add(1));
    }
}
