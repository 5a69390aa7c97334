#!/usr/bin/env bash
# Read-model lag under a steady command load: the release service on a fresh PostgreSQL
# database (or SQLite with STORE=sqlite), C workers posting messages for T seconds, while
# the load generator samples the read_model processor's lag (events behind the head) and
# times how long a just-acknowledged message takes to be visible through
# `?min_position=`.
#
#   bench/lag.sh                  # C=16 T=20 STORE=postgres
set -euo pipefail
cd "$(dirname "$0")/.."
C=${C:-16}; T=${T:-20}; STORE=${STORE:-postgres}
PG=${PG:-postgres://postgres@127.0.0.1:5432}
PORT=${PORT:-18091}
cargo build --release -q -p project-manager --bin project-manager
cargo build --release -q -p pm-tests --example loadgen
if [ "$STORE" = postgres ]; then
  psql -q "$PG/postgres" -c "DROP DATABASE IF EXISTS pm_bench_lag" -c "CREATE DATABASE pm_bench_lag"
  url="$PG/pm_bench_lag"
else
  dir=$(mktemp -d); url="sqlite://$dir/pm.db"
fi
DATABASE_URL="$url" PM_BIND="127.0.0.1:$PORT" RUST_LOG=warn target/release/project-manager & pid=$!
for _ in $(seq 1 50); do curl -sf "http://127.0.0.1:$PORT/readyz" >/dev/null && break; sleep 0.2; done
target/release/examples/loadgen --base "http://127.0.0.1:$PORT" --concurrency "$C" --seconds "$T" --scenario messages --measure-lag
kill -TERM "$pid"; wait "$pid" || true
[ "$STORE" = postgres ] && psql -q "$PG/postgres" -c "DROP DATABASE IF EXISTS pm_bench_lag"
exit 0
