#!/usr/bin/env bash
# The long run: lag and memory flat over time on a large log. The release service on a
# fresh PostgreSQL database is filled with the `messages` mix until the log holds FILL
# events (default a million), then pm-bench posts messages at RATE commands/s for MINUTES
# one-minute rounds against the same service, and each round prints its projection lag
# (X-Event-Position to readable with min_position), saga lag, command latency, and the
# service's peak RSS and CPU — one row per minute, to see that they stay flat.
#
#   bench/long.sh                               # FILL=1000000 RATE=3000 MINUTES=10
#   FILL=200000 RATE=2000 MINUTES=2 bench/long.sh
set -euo pipefail
cd "$(dirname "$0")/.."
FILL=${FILL:-1000000}; RATE=${RATE:-3000}; MINUTES=${MINUTES:-10}; C=${C:-32}
PG=${PG:-postgres://postgres@127.0.0.1:5432}
PORT=${PORT:-18094}
DB=pm_bench_long
cargo build --release -q -p project-manager --bin project-manager -p pm-bench --bin pm-bench
psql -q "$PG/postgres" -c "DROP DATABASE IF EXISTS $DB" -c "CREATE DATABASE $DB"
DATABASE_URL="$PG/$DB" PM_BIND="127.0.0.1:$PORT" RUST_LOG=warn target/release/project-manager & pid=$!
trap 'kill -TERM $pid 2>/dev/null || true' EXIT
for _ in $(seq 1 50); do curl -sf "http://127.0.0.1:$PORT/readyz" >/dev/null && break; sleep 0.2; done
count() { psql -tA "$PG/$DB" -c 'SELECT count(*) FROM events'; }
while [ "$(count)" -lt "$FILL" ]; do
  echo "filling: $(count) of $FILL events" >&2
  target/release/pm-bench --url "http://127.0.0.1:$PORT" --mix messages --concurrency "$C" \
    --duration 30s --no-idempotency-keys >/dev/null 2>&1
done
echo "log: $(count) events; now $MINUTES one-minute rounds at $RATE commands/s" >&2
out=$(mktemp)
for minute in $(seq 1 "$MINUTES"); do
  target/release/pm-bench --url "http://127.0.0.1:$PORT" --mix messages --concurrency "$C" \
    --duration 60s --rate "$RATE" --pid "$pid" --json 2>/dev/null >> "$out"
  echo "minute $minute done" >&2
done
kill -TERM "$pid"; wait "$pid" || true
trap - EXIT
psql -q "$PG/postgres" -c "DROP DATABASE IF EXISTS $DB"
python3 - "$out" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
print("| minute | commands/s | latency p50 / p99 ms | projection lag p50 / p99 ms | saga lag p50 / p99 ms | peak RSS MiB | CPU % |")
print("|---|---|---|---|---|---|---|")
for i, r in enumerate(rows, 1):
    s = r.get("service") or {}
    l, p, g = r["latency_ms"], r["projection_lag_ms"], r.get("saga_lag_ms") or {}
    print(f'| {i} | {r["commands_per_s"]} | {l["p50"]} / {l["p99"]} | {p["p50"]} / {p["p99"]} | '
          f'{g.get("p50", "-")} / {g.get("p99", "-")} | {s.get("peak_rss_mib", "-")} | {s.get("cpu_percent", "-")} |')
PY
