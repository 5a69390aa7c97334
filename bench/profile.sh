#!/usr/bin/env bash
# Where the CPU goes under a pm-bench mix: `perf record` (the cpu-clock software event,
# which works where hardware cycle counters are not exposed) samples the whole machine
# while pm-bench drives the release service on a fresh PostgreSQL database, then prints
# the time by process (service, PostgreSQL, pm-bench, kernel) and the top symbols of the
# service and of PostgreSQL. The samples stay in bench/profile.data for `perf report`
# (or a flame graph: `perf script -i bench/profile.data | inferno-collapse-perf | inferno-flamegraph`).
#
#   bench/profile.sh                          # MIX=task-checkpoints C=32 T=10s
#   MIX=messages bench/profile.sh
set -euo pipefail
cd "$(dirname "$0")/.."
MIX=${MIX:-task-checkpoints}; C=${C:-32}; T=${T:-10}
PG=${PG:-postgres://postgres@127.0.0.1:5432}
PORT=${PORT:-18095}
DATA=bench/profile.data
command -v perf >/dev/null || { echo "perf is not installed (Debian: linux-perf)" >&2; exit 1; }
cargo build --release -q -p project-manager --bin project-manager -p pm-bench --bin pm-bench
psql -q "$PG/postgres" -c "DROP DATABASE IF EXISTS pm_bench_profile" -c "CREATE DATABASE pm_bench_profile"
DATABASE_URL="$PG/pm_bench_profile" PM_BIND="127.0.0.1:$PORT" RUST_LOG=warn \
  target/release/project-manager & pid=$!
for _ in $(seq 1 50); do curl -sf "http://127.0.0.1:$PORT/readyz" >/dev/null && break; sleep 0.2; done
# Sample the middle of the run (after the world is set up).
(sleep 3; perf record -q -e cpu-clock -F 499 -a -g -o "$DATA" -- sleep $((T - 4)) >/dev/null 2>&1) &
rec=$!
target/release/pm-bench --url "http://127.0.0.1:$PORT" --mix "$MIX" --concurrency "$C" \
  --duration "${T}s" --pid "$pid" 2>/dev/null | tail -n 12
wait "$rec"
kill -TERM "$pid"; wait "$pid" || true
psql -q "$PG/postgres" -c "DROP DATABASE IF EXISTS pm_bench_profile"
echo "== CPU by program (share of all samples, idle included as swapper)"
perf report -i "$DATA" --stdio --no-children -g none --sort comm,dso 2>/dev/null | grep -E '^ +[0-9]' | head -n 15
echo "== project-manager: top symbols"
perf report -i "$DATA" --stdio --no-children -g none --dso project-manager --sort sym 2>/dev/null \
  | grep -E '^ +[0-9]' | head -n 15
echo "== PostgreSQL: top symbols"
perf report -i "$DATA" --stdio --no-children -g none --comm postgres --sort dso,sym 2>/dev/null \
  | grep -E '^ +[0-9]' | head -n 15
