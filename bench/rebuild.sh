#!/usr/bin/env bash
# Rebuild rate: the release service on a fresh PostgreSQL database is filled by pm-bench
# (the `llm` mix: checkpoints, tasks, task checkpoints, messages) for T, then the read
# model is rebuilt (blue-green) and the rebuild's own report is printed: events, seconds,
# events/s (GET /v1/admin/processors, `rebuild_detail`).
#
#   bench/rebuild.sh                # T=20s C=32
#   BIN=/path/to/other/build bench/rebuild.sh   # binaries built elsewhere (an A/B)
set -euo pipefail
cd "$(dirname "$0")/.."
C=${C:-32}; T=${T:-20s}
PG=${PG:-postgres://postgres@127.0.0.1:5432}
PORT=${PORT:-18092}
BIN=${BIN:-}
if [ -z "$BIN" ]; then
  cargo build --release -q -p project-manager --bin project-manager -p pm-bench --bin pm-bench
  BIN=target/release
fi
psql -q "$PG/postgres" -c "DROP DATABASE IF EXISTS pm_bench_rebuild" -c "CREATE DATABASE pm_bench_rebuild"
DATABASE_URL="$PG/pm_bench_rebuild" PM_BIND="127.0.0.1:$PORT" RUST_LOG=warn "$BIN/project-manager" & pid=$!
for _ in $(seq 1 50); do curl -sf "http://127.0.0.1:$PORT/readyz" >/dev/null && break; sleep 0.2; done
"$BIN/pm-bench" --url "http://127.0.0.1:$PORT" --mix llm --concurrency "$C" --duration "$T" --pid "$pid" >/dev/null
echo "log: $(psql -tA "$PG/pm_bench_rebuild" -c 'SELECT count(*) FROM events') events"
curl -sf -XPOST "http://127.0.0.1:$PORT/v1/admin/projections/read_model/rebuild" >/dev/null
while :; do
  report=$(curl -sf "http://127.0.0.1:$PORT/v1/admin/processors")
  status=$(echo "$report" | python3 -c 'import json,sys; p=[p for p in json.load(sys.stdin)["processors"] if p["name"]=="read_model"][0]; print(p.get("rebuild_status"), "|", p.get("rebuild_detail"))')
  case "$status" in done*|failed*) echo "rebuild: $status"; break;; esac
  sleep 0.5
done
kill -TERM "$pid"; wait "$pid" || true
psql -q "$PG/postgres" -c "DROP DATABASE IF EXISTS pm_bench_rebuild"
