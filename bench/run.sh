#!/usr/bin/env bash
# Command throughput through HTTP versus the raw PostgreSQL single-INSERT rate, measured
# in the same run on the same machine (machines here are noisy: compare within a run).
#
#   bench/run.sh                 # C=32 T=10 ROUNDS=2
#   C=32 T=20 ROUNDS=3 bench/run.sh
#
# Baseline: pgbench, C clients, one INSERT of a row (text id + jsonb payload) per
# transaction. Service: the release binary (read model and sagas running) on a fresh
# database, driven by the loadgen example (C workers, keep-alive HTTP/1.1) in the
# `messages`, `task-checkpoints` and `conversations` scenarios. Prints each rate and its
# ratio to the baseline of the same round. Then, at half the `messages` rate of the
# round, the dispatch probe: milliseconds from posting a human message to its
# `agent.turn_dispatched` arriving on an SSE stream (p50, p99).
set -euo pipefail
cd "$(dirname "$0")/.."
C=${C:-32}; T=${T:-10}; ROUNDS=${ROUNDS:-2}
PG=${PG:-postgres://postgres@127.0.0.1:5432}
PORT=${PORT:-18090}

cargo build --release -q -p project-manager --bin project-manager
cargo build --release -q -p pm-tests --example loadgen
psql -q "$PG/postgres" -c "DROP DATABASE IF EXISTS pm_bench_base" -c "CREATE DATABASE pm_bench_base"
psql -q "$PG/pm_bench_base" -c "CREATE TABLE baseline (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, aggregate_id text NOT NULL, payload jsonb NOT NULL)"
script=$(mktemp)
echo "INSERT INTO baseline (aggregate_id, payload) VALUES (md5(random()::text), '{\"content\": \"hello from the benchmark\"}');" > "$script"

baseline() {
  pgbench -n -c "$C" -j 2 -T "$T" -f "$script" "$PG/pm_bench_base" 2>/dev/null \
    | awk '/^tps/ {print $3; exit}'
}

service() {
  local scenario=$1; shift
  psql -q "$PG/postgres" -c "DROP DATABASE IF EXISTS pm_bench_svc" -c "CREATE DATABASE pm_bench_svc"
  DATABASE_URL="$PG/pm_bench_svc" PM_BIND="127.0.0.1:$PORT" RUST_LOG=warn \
    target/release/project-manager & local pid=$!
  for _ in $(seq 1 50); do curl -sf "http://127.0.0.1:$PORT/readyz" >/dev/null && break; sleep 0.2; done
  target/release/examples/loadgen --base "http://127.0.0.1:$PORT" --concurrency "$C" --seconds "$T" --scenario "$scenario" "$@"
  kill -TERM "$pid"; wait "$pid" || true
}

for round in $(seq 1 "$ROUNDS"); do
  base=$(baseline)
  echo "round $round: raw PostgreSQL single-INSERT rate (pgbench, c=$C): $base tps"
  for scenario in messages task-checkpoints conversations; do
    line=$(service "$scenario")
    rate=$(echo "$line" | python3 -c 'import json,sys; print(round(json.load(sys.stdin)["rate_per_s"], 1))')
    [ "$scenario" = messages ] && messages_rate=$rate
    echo "round $round: $line"
    echo "round $round: $scenario = $rate/s = $(python3 -c "print(round(100*$rate/$base,1))")% of raw INSERT"
  done
  half=$(python3 -c "print(round($messages_rate/2, 1))")
  line=$(service messages --rate "$half" --measure-dispatch)
  echo "round $round: $line"
  summary=$(echo "$line" | python3 -c 'import json,sys; d=json.load(sys.stdin)["dispatch"]; print("p50 %.1f ms, p99 %.1f ms, max %.1f ms (%d of %d probes)" % (d["p50_ms"], d["p99_ms"], d["max_ms"], d["dispatched"], d["probes"]))')
  echo "round $round: at $half/s (half the messages rate): human message -> dispatched turn on SSE: $summary"
done
rm -f "$script"
psql -q "$PG/postgres" -c "DROP DATABASE IF EXISTS pm_bench_base" -c "DROP DATABASE IF EXISTS pm_bench_svc"
