//! The keys of personal data (TRUST.md "Forgetting a person"): one AES-256-GCM data key per
//! actor and per conversation, kept in `pm_keys`, each wrapped (sealed) by `PM_MASTER_KEY`
//! when it is set. Forgetting destroys the key in the transaction that appends the
//! `forgotten` fact, so what was sealed under it can never be read again.
//!
//! **The master key.** The first start with `PM_MASTER_KEY` wraps every key stored in the
//! clear and records a check value sealed by it (`pm_master_key_check`); from then on a
//! start without it, or with another one, refuses — naming the setting — rather than
//! running on keys it cannot open. Rotation: start once with the new key in
//! `PM_MASTER_KEY` and the old one in `PM_MASTER_KEY_PREVIOUS`; every key is unwrapped with
//! the old and wrapped with the new in one transaction.
//!
//! **The cache.** Opened keys are kept in memory up to a count ([`KeyStore::open`]); a key
//! destroyed here leaves it at once, and [`KeyStore::evict`] is how a replica drops a key
//! another replica destroyed.

pub mod cipher;
pub mod old_texts;
mod payloads;
pub mod sealing;

use chrono::Utc;
use uuid::Uuid;

pub use cipher::{CipherError, Key, KEY_BYTES};
pub use payloads::OpenError;

use crate::db::{Args, Tx};
use crate::sql::Dialect;
use crate::Database;

/// Whose texts a data key seals.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Scope {
    /// What identifies or was written by a person.
    Actor,
    /// The rest of a conversation's texts.
    Conversation,
}

impl Scope {
    /// The `scope` column's value.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Actor => "actor",
            Self::Conversation => "conversation",
        }
    }

    /// The scope [`Scope::as_str`] names; `None` for any other text.
    pub fn parse(text: &str) -> Option<Self> {
        [Self::Actor, Self::Conversation]
            .into_iter()
            .find(|s| s.as_str() == text)
    }
}

/// A master key: a setting's 32 bytes of base64. Its bytes never print.
#[derive(Debug, Clone)]
pub struct MasterKey {
    key: Key,
}

impl MasterKey {
    /// The key `setting` (`PM_MASTER_KEY`, `PM_MASTER_KEY_PREVIOUS`) holds: 32 bytes in
    /// standard base64.
    ///
    /// # Errors
    /// [`KeyError::BadMasterKey`] naming `setting`.
    pub fn parse(setting: &'static str, value: &str) -> Result<Self, KeyError> {
        use base64::Engine;
        base64::engine::general_purpose::STANDARD
            .decode(value.trim())
            .ok()
            .and_then(|bytes| Key::from_bytes(&bytes))
            .map(|key| Self { key })
            .ok_or(KeyError::BadMasterKey(setting))
    }

    fn wrap(&self, scope: Scope, id: Uuid, key: &Key) -> Result<Vec<u8>, KeyError> {
        Ok(self.key.seal(&wrap_aad(scope, id), key.bytes())?)
    }

    fn unwrap(&self, scope: Scope, id: Uuid, material: &[u8]) -> Option<Key> {
        Key::from_bytes(&self.key.open(&wrap_aad(scope, id), material)?)
    }

    fn check(&self) -> Result<Vec<u8>, KeyError> {
        Ok(self.key.seal(CHECK_AAD, CHECK_TEXT)?)
    }

    fn opens(&self, check: &[u8]) -> bool {
        self.key.open(CHECK_AAD, check).as_deref() == Some(CHECK_TEXT)
    }
}

/// A wrapped key is bound to its row: moved to another actor's row it does not open.
fn wrap_aad(scope: Scope, id: Uuid) -> Vec<u8> {
    format!("pm_keys\n{}\n{id}", scope.as_str()).into_bytes()
}

const CHECK_AAD: &[u8] = b"pm_master_key_check";
const CHECK_TEXT: &[u8] = b"project-manager master key check, form 1";

/// Why the keys cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    /// A master key setting is not 32 bytes of base64.
    #[error("{0} must be 32 bytes in standard base64 (e.g. `openssl rand -base64 32`)")]
    BadMasterKey(&'static str),
    /// The keys are wrapped, and no master key is set.
    #[error(
        "PM_MASTER_KEY is not set, but the keys of this database are wrapped by a master key: \
         set PM_MASTER_KEY to it"
    )]
    MasterKeyMissing,
    /// The master key set does not open the keys.
    #[error(
        "PM_MASTER_KEY does not open the keys of this database: set the master key they were \
         wrapped with, or rotate — the old one in PM_MASTER_KEY_PREVIOUS, the new one in \
         PM_MASTER_KEY"
    )]
    MasterKeyWrong,
    /// A stored key does not open with the key that should open it.
    #[error("the {0} key of {1} does not open with the master key it was wrapped with")]
    Damaged(&'static str, Uuid),
    /// Nothing could be sealed.
    #[error(transparent)]
    Cipher(#[from] CipherError),
    /// The store.
    #[error("keys: {0}")]
    Store(#[from] sqlx::Error),
}

/// A key made in memory for a party's first fact ([`KeyStore::fresh`]): the append stores
/// it with the fact, and writes the fact only if it stored the key — a key there already
/// (another writer's) makes the append write nothing, and the writer seals again with the
/// stored key. So a text is never stored under a key that is not.
#[derive(Debug, Clone)]
pub struct FreshKey {
    /// Whose.
    pub scope: Scope,
    /// Whose.
    pub id: Uuid,
    /// The key.
    pub key: Key,
    /// What `pm_keys.material` stores (wrapped by the master key when there is one).
    pub material: Vec<u8>,
    /// Whether it is wrapped.
    pub wrapped: bool,
    /// The forgettings heard of when it was made.
    heard: u64,
}

/// The keys of one database.
pub struct KeyStore {
    db: Database,
    master: Option<MasterKey>,
    /// Opened keys, and destroyed ones (`None`: destroyed for good).
    cache: quick_cache::sync::Cache<(Scope, Uuid), Option<Key>>,
    /// Counts the forgettings this replica heard of: whoever keeps opened texts in memory
    /// (the aggregates' slots) drops what it kept before the count moved.
    forgettings: std::sync::atomic::AtomicU64,
}

impl KeyStore {
    /// The keys of `db`, opened with `master` (`PM_MASTER_KEY`) and, to rotate, `previous`
    /// (`PM_MASTER_KEY_PREVIOUS`); at most `cached` keys kept open in memory. Wraps keys
    /// stored in the clear when a master key is set (the first start with one), rotates
    /// when `previous` opens them and `master` does not.
    ///
    /// # Errors
    /// [`KeyError::MasterKeyMissing`] / [`KeyError::MasterKeyWrong`]: the service must not
    /// start; [`KeyError::Store`].
    pub async fn open(
        db: &Database,
        master: Option<MasterKey>,
        previous: Option<MasterKey>,
        cached: usize,
    ) -> Result<Self, KeyError> {
        let mut tx = db.begin().await?;
        if matches!(tx, Tx::Postgres(_)) {
            // Replicas starting together decide one after the other.
            tx.execute(
                "SELECT pg_advisory_xact_lock($1)",
                Args::new().int(KEYS_OPENING),
            )
            .await?;
        }
        let check = tx
            .fetch_optional(
                "SELECT sealed FROM pm_master_key_check WHERE id = 1",
                Args::new(),
            )
            .await?
            .map(|row| row.bytes("sealed").map(<[u8]>::to_vec))
            .transpose()?;
        match (&master, check) {
            (None, None) => {}
            (None, Some(_)) => return Err(KeyError::MasterKeyMissing),
            (Some(master), Some(check)) if master.opens(&check) => {
                // Keys stored in the clear since (none, unless written by an older replica
                // without the master key) are wrapped now.
                rewrap(&mut tx, master, None).await?;
            }
            (Some(master), Some(check)) => match &previous {
                Some(previous) if previous.opens(&check) => {
                    rewrap(&mut tx, master, Some(previous)).await?;
                    write_check(&mut tx, master).await?;
                    tracing::info!("the keys were rewrapped with the new PM_MASTER_KEY; PM_MASTER_KEY_PREVIOUS can go");
                }
                _ => return Err(KeyError::MasterKeyWrong),
            },
            (Some(master), None) => {
                rewrap(&mut tx, master, None).await?;
                write_check(&mut tx, master).await?;
                tracing::info!("PM_MASTER_KEY now protects the keys of personal data");
            }
        }
        tx.commit().await?;
        Ok(Self {
            db: db.clone(),
            master,
            cache: quick_cache::sync::Cache::new(cached.max(16)),
            forgettings: std::sync::atomic::AtomicU64::new(0),
        })
    }

    /// The key of `scope` `id`: `None` when it was never made, `Some(None)` when it was
    /// destroyed.
    ///
    /// # Errors
    /// [`KeyError::Damaged`] for a row that does not open; [`KeyError::Store`].
    pub async fn key(&self, scope: Scope, id: Uuid) -> Result<Option<Option<Key>>, KeyError> {
        if let Some(key) = self.cache.get(&(scope, id)) {
            return Ok(Some(key));
        }
        let heard = self.forgettings();
        let row = self
            .db
            .fetch_optional(SELECT_KEY, Args::new().text(scope.as_str()).uuid(id))
            .await?;
        let Some(row) = row else { return Ok(None) };
        let key = self.decode(scope, id, row.bytes("material")?, row.bool("wrapped")?)?;
        self.remember(scope, id, &key, heard);
        Ok(Some(key))
    }

    /// The key of `scope` `id`, made (committed at once) if there is none yet; `None` when
    /// it was destroyed. A concurrent maker's key wins: the one stored is the one answered.
    /// A key made for an append that then fails is harmless: it seals nothing.
    ///
    /// # Errors
    /// [`KeyError`].
    pub async fn key_made(&self, scope: Scope, id: Uuid) -> Result<Option<Key>, KeyError> {
        if let Some(key) = self.cache.get(&(scope, id)) {
            return Ok(key);
        }
        // Made first, read only when one was there: a new actor's or conversation's key
        // costs one statement.
        let (sql, args) = self.insert(scope, id)?;
        let sql = match self.db.dialect() {
            // Without waiting for its own flush to disk (`set_config(…, true)`: for this
            // statement's transaction): the key is made for an append that commits after
            // it, and a commit's flush takes every earlier WAL record with it — the key is
            // durable before any text sealed under it is. (Lost in a crash before that, it
            // sealed nothing.)
            Dialect::Postgres => "INSERT INTO pm_keys (scope, id, material, wrapped, created_at) \
                 SELECT $1, $2, $3, $4, $5 \
                 FROM (SELECT set_config('synchronous_commit', 'off', true)) AS without_flush \
                 ON CONFLICT (scope, id) DO NOTHING RETURNING material, wrapped"
                .to_string(),
            Dialect::Sqlite => format!("{sql} RETURNING material, wrapped"),
        };
        let heard = self.forgettings();
        let made = self.db.fetch_optional(&sql, args).await?;
        let Some(row) = made else {
            return Ok(self.key(scope, id).await?.flatten());
        };
        made_how(MADE_ALONE);
        let key = self.decode(scope, id, row.bytes("material")?, row.bool("wrapped")?)?;
        self.remember(scope, id, &key, heard);
        Ok(key)
    }

    /// Keeps a key read from the store in memory — unless a forgetting was heard of since
    /// the read began (`heard`): the row read may be the one it destroyed.
    fn remember(&self, scope: Scope, id: Uuid, key: &Option<Key>, heard: u64) {
        if self.forgettings() == heard {
            self.cache.insert((scope, id), key.clone());
            // A forgetting heard of between the check and the insert takes it out again
            // (a forgetting counts first and evicts after).
            if self.forgettings() != heard {
                self.cache.remove(&(scope, id));
            }
        }
    }

    /// The key of `scope` `id`, made in `tx` if there is none yet; `None` when it was
    /// destroyed. For writers that already hold a transaction (on SQLite, its one writer):
    /// a key made here is kept in memory only once read again after the commit.
    ///
    /// # Errors
    /// [`KeyError`].
    pub async fn key_in(
        &self,
        tx: &mut Tx,
        scope: Scope,
        id: Uuid,
    ) -> Result<Option<Key>, KeyError> {
        if let Some(key) = self.cache.get(&(scope, id)) {
            return Ok(key);
        }
        let (sql, args) = self.insert(scope, id)?;
        if tx.execute(sql, args).await? > 0 {
            made_how(MADE_IN_TRANSACTION);
        }
        let row = tx
            .fetch_optional(SELECT_KEY, Args::new().text(scope.as_str()).uuid(id))
            .await?
            .ok_or(sqlx::Error::RowNotFound)?;
        self.decode(scope, id, row.bytes("material")?, row.bool("wrapped")?)
    }

    /// A new key for the first fact of `scope` `id` (an actor's registration, a
    /// conversation's start), made in memory and stored by the statement that appends that
    /// fact — no transaction of its own on the command path. See [`FreshKey`].
    ///
    /// # Errors
    /// [`KeyError::Cipher`].
    pub fn fresh(&self, scope: Scope, id: Uuid) -> Result<FreshKey, KeyError> {
        let heard = self.forgettings();
        let key = Key::generate()?;
        let (material, wrapped) = self.material(scope, id, &key)?;
        Ok(FreshKey {
            scope,
            id,
            key,
            material,
            wrapped,
            heard,
        })
    }

    /// What `pm_keys.material` stores of `key`, and whether it is wrapped (by the master
    /// key, when there is one).
    fn material(&self, scope: Scope, id: Uuid, key: &Key) -> Result<(Vec<u8>, bool), KeyError> {
        Ok(match &self.master {
            Some(master) => (master.wrap(scope, id, key)?, true),
            None => (key.bytes().to_vec(), false),
        })
    }

    /// Keeps a [`FreshKey`] in memory once the append that stored it committed.
    pub fn adopt(&self, fresh: &FreshKey) {
        made_how(MADE_WITH_FACT);
        self.remember(fresh.scope, fresh.id, &Some(fresh.key.clone()), fresh.heard);
    }

    /// The statement storing a new key of `scope` `id` unless one (or its tombstone) is
    /// there.
    fn insert(&self, scope: Scope, id: Uuid) -> Result<(&'static str, Args), KeyError> {
        let made = Key::generate()?;
        let (material, wrapped) = self.material(scope, id, &made)?;
        Ok((
            "INSERT INTO pm_keys (scope, id, material, wrapped, created_at) \
             VALUES ($1, $2, $3, $4, $5) ON CONFLICT (scope, id) DO NOTHING",
            Args::new()
                .text(scope.as_str())
                .uuid(id)
                .bytes(material)
                .bool(wrapped)
                .time(&Utc::now()),
        ))
    }

    /// Destroys the key of `scope` `id` in `tx` — its row keeps no material, a tombstone
    /// that stops a new key being made for a forgotten party — and drops it from this
    /// replica's memory.
    ///
    /// # Errors
    /// [`KeyError::Store`].
    pub async fn destroy_in(&self, tx: &mut Tx, scope: Scope, id: Uuid) -> Result<(), KeyError> {
        self.evict(scope, id);
        tx.execute(
            "INSERT INTO pm_keys (scope, id, material, wrapped, created_at) \
             VALUES ($1, $2, $3, $4, $5) ON CONFLICT (scope, id) \
             DO UPDATE SET material = excluded.material, wrapped = excluded.wrapped",
            Args::new()
                .text(scope.as_str())
                .uuid(id)
                .bytes(Vec::new())
                .bool(false)
                .time(&Utc::now()),
        )
        .await?;
        Ok(())
    }

    /// Drops the key of `scope` `id` from this replica's memory (destroyed elsewhere).
    pub fn evict(&self, scope: Scope, id: Uuid) {
        self.cache.remove(&(scope, id));
    }

    /// Hears that `scope` `id` was forgotten (here, or by another replica): its key leaves
    /// memory and [`KeyStore::forgettings`] moves on.
    pub fn forgotten(&self, scope: Scope, id: Uuid) {
        self.forgettings
            .fetch_add(1, std::sync::atomic::Ordering::AcqRel);
        self.evict(scope, id);
    }

    /// Drops every key from memory, as if every party had been forgotten: for a replica
    /// that may have missed hearing of a forgetting (its listener reconnected).
    pub fn forget_cached(&self) {
        self.forgettings
            .fetch_add(1, std::sync::atomic::Ordering::AcqRel);
        self.cache.clear();
    }

    /// How many forgettings this replica heard of: what was opened before it moved may
    /// hold a forgotten text.
    pub fn forgettings(&self) -> u64 {
        self.forgettings.load(std::sync::atomic::Ordering::Acquire)
    }

    /// The key a row holds; `None` for a destroyed one (no material).
    fn decode(
        &self,
        scope: Scope,
        id: Uuid,
        material: &[u8],
        wrapped: bool,
    ) -> Result<Option<Key>, KeyError> {
        let damaged = || KeyError::Damaged(scope.as_str(), id);
        if material.is_empty() {
            return Ok(None);
        }
        match (wrapped, &self.master) {
            (false, _) => Key::from_bytes(material).ok_or_else(damaged).map(Some),
            (true, Some(master)) => master
                .unwrap(scope, id, material)
                .ok_or_else(damaged)
                .map(Some),
            (true, None) => Err(KeyError::MasterKeyMissing),
        }
    }
}

/// How keys are made (`pm_keys_made_total`'s `how`): by their party's first fact's own
/// statement ([`KeyStore::fresh`], the command path's way), by a statement of their own
/// before a fact that needs one ([`KeyStore::key_made`]), or in a writer's transaction
/// ([`KeyStore::key_in`]).
pub const MADE: &[&str] = &[MADE_WITH_FACT, MADE_ALONE, MADE_IN_TRANSACTION];
const MADE_WITH_FACT: &str = "with_fact";
const MADE_ALONE: &str = "alone";
const MADE_IN_TRANSACTION: &str = "in_transaction";

fn made_how(how: &'static str) {
    metrics::counter!("pm_keys_made_total", "how" => how).increment(1);
}

/// The advisory lock replicas opening the keys take in turn (`pmlk`, beside the log's
/// `pmlb`).
const KEYS_OPENING: i64 = 0x706d_6c6b;

const SELECT_KEY: &str = "SELECT material, wrapped FROM pm_keys WHERE scope = $1 AND id = $2";

/// Wraps every key with `master`: those in the clear, and — when `previous` is given — those
/// wrapped with it.
async fn rewrap(
    tx: &mut Tx,
    master: &MasterKey,
    previous: Option<&MasterKey>,
) -> Result<(), KeyError> {
    // Rotating: every key. Otherwise only those stored in the clear.
    let (sql, args) = match previous {
        Some(_) => (
            "SELECT scope, id, material, wrapped FROM pm_keys",
            Args::new(),
        ),
        None => (
            "SELECT scope, id, material, wrapped FROM pm_keys WHERE wrapped = $1",
            Args::new().bool(false),
        ),
    };
    for row in tx.fetch_all(sql, args).await? {
        let scope = Scope::parse(row.str("scope")?).ok_or_else(|| {
            sqlx::Error::Decode(format!("a key of scope {:?}", row.str("scope")).into())
        })?;
        let id = row.uuid("id")?;
        let material = row.bytes("material")?;
        if material.is_empty() {
            // Destroyed: nothing to wrap.
            continue;
        }
        let key = match (row.bool("wrapped")?, previous) {
            (false, _) => Key::from_bytes(material),
            (true, Some(previous)) => previous.unwrap(scope, id, material),
            (true, None) => continue,
        }
        .ok_or(KeyError::Damaged(scope.as_str(), id))?;
        tx.execute(
            "UPDATE pm_keys SET material = $3, wrapped = $4 WHERE scope = $1 AND id = $2",
            Args::new()
                .text(scope.as_str())
                .uuid(id)
                .bytes(master.wrap(scope, id, &key)?)
                .bool(true),
        )
        .await?;
    }
    Ok(())
}

async fn write_check(tx: &mut Tx, master: &MasterKey) -> Result<(), KeyError> {
    tx.execute(
        "INSERT INTO pm_master_key_check (id, sealed, created_at) VALUES (1, $1, $2) \
         ON CONFLICT (id) DO UPDATE SET sealed = excluded.sealed, created_at = excluded.created_at",
        Args::new().bytes(master.check()?).time(&Utc::now()),
    )
    .await?;
    Ok(())
}
