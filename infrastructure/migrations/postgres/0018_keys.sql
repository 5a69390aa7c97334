-- Keys of personal data (TRUST.md "Forgetting a person"): one data key per actor and per
-- conversation, under which their texts are stored encrypted (AES-256-GCM); forgetting
-- deletes the key's row in the transaction of the `forgotten` fact. `material` is the key
-- itself, or — `wrapped` — the key sealed by PM_MASTER_KEY.
CREATE TABLE IF NOT EXISTS pm_keys
(
    scope      text        NOT NULL CHECK (scope IN ('actor', 'conversation')),
    id         uuid        NOT NULL,
    material   bytea       NOT NULL,
    wrapped    boolean     NOT NULL,
    created_at timestamptz NOT NULL,
    PRIMARY KEY (scope, id)
);

-- What PM_MASTER_KEY must open once it protects the keys: a known text sealed by it, written
-- when the master key is first set (and again when it is rotated). Its row is what makes a
-- start without the master key, or with another one, refuse.
CREATE TABLE IF NOT EXISTS pm_master_key_check
(
    id         smallint PRIMARY KEY CHECK (id = 1),
    sealed     bytea       NOT NULL,
    created_at timestamptz NOT NULL
);
