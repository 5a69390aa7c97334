#!/usr/bin/env bash
# What a turn costs, from the database: one `workers` run of pm-bench against the release
# service on a fresh PostgreSQL database, then
#   - the rows written per completed turn, by table (pg_stat_user_tables);
#   - where a turn's time goes: the commit times of its facts and runes, step by step (p50,
#     p90 in ms). This needs `track_commit_timestamp = on` (a server setting: ALTER SYSTEM
#     and a restart); without it only the row counts are printed.
#
#   bench/turns.sh                       # C=32 T=6s, binaries of target/release
#   BIN=/tmp/other C=16 bench/turns.sh   # another build, 16 workers
#   ENVS="PM_DB_POOL_SIZE=8" bench/turns.sh
set -euo pipefail
cd "$(dirname "$0")/.."
C=${C:-32}; T=${T:-6s}; PORT=${PORT:-18093}; DB=${DB:-pm_bench_turns}
PG=${PG:-postgres://postgres@127.0.0.1:5432}; BIN=${BIN:-target/release}; ENVS=${ENVS:-}

psql -q "$PG/postgres" -c "DROP DATABASE IF EXISTS $DB" -c "CREATE DATABASE $DB"
# shellcheck disable=SC2086
env DATABASE_URL="$PG/$DB" PM_BIND="127.0.0.1:$PORT" RUST_LOG=warn $ENVS \
  "$BIN/project-manager" & pid=$!
for _ in $(seq 1 50); do curl -sf "http://127.0.0.1:$PORT/readyz" >/dev/null && break; sleep 0.2; done
"$BIN/pm-bench" --url "http://127.0.0.1:$PORT" --mix workers --concurrency "$C" \
  --duration "$T" --pid "$pid" | grep -v " requests " || true
kill -TERM "$pid"; wait "$pid" || true

psql -q "$PG/$DB" -c "\
WITH turns AS (SELECT count(*)::numeric AS n FROM events WHERE event_type = 'turn.completed')
SELECT * FROM (
SELECT relname AS \"table\", round(n_tup_ins / n, 2) AS inserted, round(n_tup_upd / n, 2) AS updated,
       round(n_tup_del / n, 2) AS deleted
FROM pg_stat_user_tables, turns
WHERE n_tup_ins + n_tup_upd + n_tup_del > 0 AND relname <> '_sqlx_migrations'
UNION ALL
SELECT 'in all (' || (SELECT n FROM turns) || ' turns)', round(sum(n_tup_ins) / n, 2),
       round(sum(n_tup_upd) / n, 2), round(sum(n_tup_del) / n, 2)
FROM pg_stat_user_tables, turns WHERE relname <> '_sqlx_migrations' GROUP BY n
) per_turn ORDER BY \"table\" LIKE 'in all%', \"table\""

if [ "$(psql -Atq "$PG/$DB" -c 'show track_commit_timestamp')" != on ]; then
  echo "track_commit_timestamp is off: no timeline" >&2
  exit 0
fi
psql -q "$PG/$DB" <<'SQL'
CREATE TEMP TABLE ev AS
  SELECT event_type, coalesce(payload->>'turn_id', metadata->>'turn_id') AS turn,
         payload->>'id' AS id, payload->'input'->>'message_id' AS msg,
         pg_xact_commit_timestamp(transaction_id::xid) AS ct,
         (metadata->>'recorded_at')::timestamptz AS rt
  FROM events WHERE conversation_id IS NOT NULL;
CREATE INDEX ON ev (turn, event_type);
CREATE INDEX ON ev (id);
-- Per turn: its human message (received, committed), its runes' commits, and the worker's
-- fenced message and checkpoint (received, committed).
CREATE TEMP TABLE steps AS
SELECT m.rt AS h_rt, m.ct AS h_ct, q.ct AS queued,
  (SELECT min(ct) FROM ev d WHERE d.turn = q.turn AND d.event_type = 'turn.dispatched') AS dispatched,
  (SELECT min(ct) FROM ev d WHERE d.turn = q.turn AND d.event_type = 'turn.claimed') AS claimed,
  (SELECT min(rt) FROM ev d WHERE d.turn = q.turn AND d.event_type = 'project_manager.message.added') AS ai_rt,
  (SELECT min(ct) FROM ev d WHERE d.turn = q.turn AND d.event_type = 'project_manager.message.added') AS ai_ct,
  (SELECT min(rt) FROM ev d WHERE d.turn = q.turn AND d.event_type = 'project_manager.conversation.checkpoint.created') AS cp_rt,
  (SELECT min(ct) FROM ev d WHERE d.turn = q.turn AND d.event_type = 'project_manager.conversation.checkpoint.created') AS cp_ct,
  (SELECT min(ct) FROM ev d WHERE d.turn = q.turn AND d.event_type = 'turn.completed') AS completed
FROM ev q JOIN ev m ON m.id = q.msg AND m.event_type = 'project_manager.message.added'
WHERE q.event_type = 'turn.queued';
WITH x AS (
  SELECT unnest(array[1, 2, 3, 4, 5, 6, 7, 8, 9]) AS i,
         unnest(array['human message received -> committed', 'committed -> turn.queued',
                      'turn.queued -> turn.dispatched', 'turn.dispatched -> turn.claimed',
                      'turn.claimed -> fenced message received', 'fenced message received -> committed',
                      'committed -> checkpoint received', 'checkpoint received -> committed',
                      'checkpoint committed -> turn.completed']) AS step,
         unnest(array[h_ct - h_rt, queued - h_ct, dispatched - queued, claimed - dispatched,
                      ai_rt - claimed, ai_ct - ai_rt, cp_rt - ai_ct, cp_ct - cp_rt,
                      completed - cp_ct]) AS d
  FROM steps WHERE completed IS NOT NULL
)
SELECT step,
       round((percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM d) * 1000))::numeric, 1) AS p50_ms,
       round((percentile_cont(0.9) WITHIN GROUP (ORDER BY extract(epoch FROM d) * 1000))::numeric, 1) AS p90_ms,
       count(d) AS turns
FROM x GROUP BY i, step ORDER BY i;
SQL
