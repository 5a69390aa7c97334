#!/usr/bin/env bash
# Read-model and saga lag under a steady command load: the release service on a fresh
# PostgreSQL database (or SQLite with STORE=sqlite), pm-bench posting messages at RATE
# commands/s (0: as fast as it goes) with C workers for T, while it times how long a
# just-acknowledged message takes to be readable through `?min_position=` and how long
# a human message takes to become a dispatched turn on SSE.
#
#   bench/lag.sh                  # C=16 T=20s RATE=0 STORE=postgres
#   RATE=3000 T=10m bench/lag.sh  # the flat-over-time check
set -euo pipefail
cd "$(dirname "$0")/.."
C=${C:-16}; T=${T:-20s}; RATE=${RATE:-0}; STORE=${STORE:-postgres}
PG=${PG:-postgres://postgres@127.0.0.1:5432}
PORT=${PORT:-18091}
cargo build --release -q -p project-manager --bin project-manager -p pm-bench --bin pm-bench
if [ "$STORE" = postgres ]; then
  psql -q "$PG/postgres" -c "DROP DATABASE IF EXISTS pm_bench_lag" -c "CREATE DATABASE pm_bench_lag"
  url="$PG/pm_bench_lag"
else
  dir=$(mktemp -d); url="sqlite://$dir/pm.db"
fi
DATABASE_URL="$url" PM_BIND="127.0.0.1:$PORT" RUST_LOG=warn target/release/project-manager & pid=$!
for _ in $(seq 1 50); do curl -sf "http://127.0.0.1:$PORT/readyz" >/dev/null && break; sleep 0.2; done
target/release/pm-bench --url "http://127.0.0.1:$PORT" --mix messages --concurrency "$C" \
  --duration "$T" --rate "$RATE" --pid "$pid"
kill -TERM "$pid"; wait "$pid" || true
[ "$STORE" = postgres ] && psql -q "$PG/postgres" -c "DROP DATABASE IF EXISTS pm_bench_lag"
exit 0
