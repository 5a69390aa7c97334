#!/usr/bin/env bash
# What one command costs, counted rather than timed: a pm-bench mix against the release
# service on a fresh PostgreSQL database, then per command the service's CPU, PostgreSQL's
# CPU (every `postgres` process), the WAL bytes and records written, and the rows the
# database inserted, updated and fetched. Counts do not depend on how busy the machine is,
# so two builds compare in one run each (an A/B of the same mix: `BIN=…` for each build).
#
#   MIX=ingest bench/cost.sh                   # C=32 T=10s, this checkout's release build
#   BIN=/path/to/other/build MIX=ingest bench/cost.sh
set -euo pipefail
cd "$(dirname "$0")/.."
MIX=${MIX:-ingest}; C=${C:-32}; T=${T:-10s}
PG=${PG:-postgres://postgres@127.0.0.1:5432}
PORT=${PORT:-18096}; DB=${DB:-pm_bench_cost}
BIN=${BIN:-}
if [ -z "$BIN" ]; then
  cargo build --release -q -p project-manager --bin project-manager -p pm-bench --bin pm-bench
  BIN=target/release
fi

# CPU seconds of every running process named `postgres` (clock ticks of /proc/PID/stat).
pg_cpu() {
  local tick total=0 pid stat f
  tick=$(getconf CLK_TCK)
  for pid in $(pgrep -x postgres); do
    stat=$(cat "/proc/$pid/stat" 2>/dev/null) || continue
    # Fields after the command's closing parenthesis: utime is the 12th, stime the 13th.
    read -r -a f <<<"${stat##*) }"
    total=$((total + f[11] + f[12]))
  done
  python3 -c "print($total / $tick)"
}
counters() {
  psql -qAt "$PG/postgres" -F' ' -c "SELECT w.wal_bytes, w.wal_records, d.tup_inserted, \
    d.tup_updated, d.tup_fetched, d.xact_commit FROM pg_stat_wal w, pg_stat_database d \
    WHERE d.datname = '$DB'"
}

psql -q "$PG/postgres" -c "DROP DATABASE IF EXISTS $DB" -c "CREATE DATABASE $DB"
DATABASE_URL="$PG/$DB" PM_BIND="127.0.0.1:$PORT" RUST_LOG=warn "$BIN/project-manager" &
pid=$!
for _ in $(seq 1 50); do curl -sf "http://127.0.0.1:$PORT/readyz" >/dev/null && break; sleep 0.2; done
out=$(mktemp)
# The counters are read around the whole run (the world pm-bench sets up first is a few
# dozen commands among thousands). The WAL counters are the cluster's: run it on an
# otherwise idle PostgreSQL.
# With pg_stat_statements loaded (`shared_preload_libraries`), every statement is counted too.
statements=$(psql -qAt "$PG/postgres" -c "SELECT 1 FROM pg_extension WHERE extname = 'pg_stat_statements'" || true)
[ -n "$statements" ] && psql -qAt "$PG/postgres" -c "SELECT pg_stat_statements_reset()" >/dev/null
before=$(counters); pg_before=$(pg_cpu)
"$BIN/pm-bench" --url "http://127.0.0.1:$PORT" --mix "$MIX" --concurrency "$C" \
  --duration "$T" --pid "$pid" --json >"$out"
# Let the sagas and projections catch up (what a command causes is part of its cost), and
# the backends publish their statistics (at most once a second).
sleep 4
after=$(counters); pg_after=$(pg_cpu)
stmts=$(mktemp)
if [ -n "$statements" ]; then
  psql -qAt "$PG/postgres" -F$'\t' -c "SELECT calls, round(total_exec_time::numeric, 1), \
    left(regexp_replace(query, '\s+', ' ', 'g'), 110) FROM pg_stat_statements \
    WHERE dbid = (SELECT oid FROM pg_database WHERE datname = '$DB') \
    ORDER BY total_exec_time DESC LIMIT ${TOP:-25}" >"$stmts"
fi
svc_cpu=$(awk '{print ($14 + $15)}' "/proc/$pid/stat")
kill -TERM "$pid"; wait "$pid" || true
psql -q "$PG/postgres" -c "DROP DATABASE IF EXISTS $DB"
python3 - "$out" "$before" "$after" "$pg_before" "$pg_after" "$svc_cpu" "$(getconf CLK_TCK)" "$stmts" <<'PY'
import json, sys
r = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
b = [int(x) for x in sys.argv[2].split()]
a = [int(x) for x in sys.argv[3].split()]
n = r["commands_per_s"] * r["duration_s"]
names = ["WAL bytes", "WAL records", "rows inserted", "rows updated", "rows fetched", "commits"]
print(f'{r["mix"]}: {n:.0f} commands, {r["commands_per_s"]} commands/s')
print(f'  service CPU ms/command   {1000 * int(sys.argv[6]) / int(sys.argv[7]) / n:.3f} (whole life)')
print(f'  PostgreSQL CPU ms/command {1000 * (float(sys.argv[5]) - float(sys.argv[4])) / n:.3f}')
for name, x, y in zip(names, b, a):
    print(f'  {name:<24} {(y - x) / n:.2f} per command')
rows = [l.split("\t") for l in open(sys.argv[8]).read().splitlines() if l]
if rows:
    print("  statements (calls per command, execution µs per command):")
    for calls, ms, q in rows:
        print(f'  {int(calls) / n:7.3f} {1000 * float(ms) / n:8.1f}  {q}')
PY
rm -f "$out" "$stmts"
