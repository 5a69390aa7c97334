#!/usr/bin/env bash
# The performance figures of docs/PERFORMANCE.md: pm-bench against the release service on
# a fresh PostgreSQL database per mix, each next to the raw single-INSERT rate measured
# by pm-bench in the same run (machines here are noisy: compare within a run).
#
#   bench/run.sh                                   # C=32 T=10s
#   C=32 T=20s MIXES="messages task-checkpoints" bench/run.sh
#   BIN=/path/to/other/build bench/run.sh          # binaries built elsewhere (an A/B against
#                                                  # another commit), not built here
#   MIX=workers bench/run.sh                       # that mix alone (no keyless or lag runs)
#   MIX=workers STORE=sqlite bench/run.sh          # on a fresh SQLite file (no raw rates)
#   MIX=messages MIX_ARGS="--rate 1800 --subscribers 100" bench/run.sh
#                                                  # one run with pm-bench options (a lag
#                                                  # comparison at one fixed rate)
#   PM_NATS_URL=nats://127.0.0.1:4222 bench/run.sh # with the JetStream relay on (and its lag)
#
# The `workers` mix (issue 15) runs C workers over CONVERSATIONS conversations (default
# 2×C) twice: at its peak turn-cycle rate, then rate-limited at half of it (two reports);
# WORKERS_ARGS adds pm-bench options to it (e.g. "--checkpoint need-information"). Its
# anchor beside raw INSERT, measured by pm-bench once before the load: a raw
# FOR UPDATE SKIP LOCKED job queue's cycles/s (claim, then complete) with C connections.
#
# Commands carry an Idempotency-Key (pm-client's default); the mixes of KEYLESS (default
# messages and task-checkpoints) run a second time without one (--no-idempotency-keys).
#
# Then, at half of the `messages` rate, the lag run: projection lag (X-Event-Position to
# readable with min_position) and saga lag (human message to `agent.turn_dispatched` on
# SSE), with SUBSCRIBERS SSE streams (default 100) following the whole log.
# Every pm-bench report (one JSON object per run) is kept in bench/results.jsonl.
set -euo pipefail
cd "$(dirname "$0")/.."
C=${C:-32}; T=${T:-10s}; SUBSCRIBERS=${SUBSCRIBERS:-100}
FANOUT=${FANOUT:-1000}; RATE_LIGHT=${RATE_LIGHT:-20}
MIXES=${MIXES-"messages task-checkpoints ingest llm mixed workers"}
KEYLESS=${KEYLESS-"messages task-checkpoints"}
PG=${PG:-postgres://postgres@127.0.0.1:5432}
PORT=${PORT:-18090}
OUT=${OUT:-bench/results.jsonl}
BIN=${BIN:-}
MIX=${MIX:-}; MIX_ARGS=${MIX_ARGS:-}; STORE=${STORE:-postgres}; DB=${DB:-pm_bench_svc}
CONVERSATIONS=${CONVERSATIONS:-}; WORKERS_ARGS=${WORKERS_ARGS:-}

if [ -z "$BIN" ]; then
  cargo build --release -q -p project-manager --bin project-manager -p pm-bench --bin pm-bench
  BIN=target/release
fi
: > "$OUT"

# bench MIX [pm-bench options…]: one run on a fresh database; appends its report to $OUT.
bench() {
  local mix=$1; shift
  local url raw=() dir=
  if [ "$STORE" = sqlite ]; then
    dir=$(mktemp -d); url="sqlite://$dir/pm.db"
  else
    psql -q "$PG/postgres" -c "DROP DATABASE IF EXISTS $DB" -c "CREATE DATABASE $DB"
    url="$PG/$DB"; raw=(--database-url "$url")
  fi
  local extra=()
  # With the relay on (the service inherits PM_NATS_URL), pm-bench times its lag too.
  if [ -n "${PM_NATS_URL:-}" ]; then
    extra+=(--nats-url "$PM_NATS_URL" --nats-prefix "${PM_NATS_SUBJECT_PREFIX:-pm}")
  fi
  if [ "$mix" = workers ]; then
    [ -n "$CONVERSATIONS" ] && extra+=(--conversations "$CONVERSATIONS")
    # shellcheck disable=SC2206
    extra+=($WORKERS_ARGS)
  fi
  # The lag runs hold up to FANOUT streams under one principal: no per-principal cap here.
  DATABASE_URL="$url" PM_BIND="127.0.0.1:$PORT" RUST_LOG=warn \
    PM_MAX_STREAMS_PER_PRINCIPAL="${PM_MAX_STREAMS_PER_PRINCIPAL:-1000000}" \
    "$BIN/project-manager" & local pid=$!
  for _ in $(seq 1 50); do curl -sf "http://127.0.0.1:$PORT/readyz" >/dev/null && break; sleep 0.2; done
  local rc=0
  "$BIN/pm-bench" --url "http://127.0.0.1:$PORT" "${raw[@]}" \
    --mix "$mix" --concurrency "$C" --duration "$T" --pid "$pid" --json "${extra[@]}" "$@" \
    | tee -a "$OUT" || rc=$?
  kill -TERM "$pid"; wait "$pid" || true
  if [ -n "$dir" ]; then rm -rf "$dir"; fi
  return "$rc"
}

if [ -n "$MIX" ]; then
  # shellcheck disable=SC2086
  bench "$MIX" $MIX_ARGS
else
  for mix in $MIXES; do bench "$mix"; done
  for mix in $KEYLESS; do bench "$mix" --no-idempotency-keys; done
  messages=$(python3 -c 'import json,sys; print(next((json.loads(l)["commands_per_s"] for l in open(sys.argv[1]) if json.loads(l)["mix"]=="messages"), 1000))' "$OUT")
  half=$(python3 -c "print(round($messages / 2, 1))")
  bench messages --rate "$half" --subscribers "$SUBSCRIBERS"
  bench messages --rate "$RATE_LIGHT"
  bench messages --rate "$RATE_LIGHT" --subscribers "$FANOUT"
fi
[ "$STORE" = sqlite ] || psql -q "$PG/postgres" -c "DROP DATABASE IF EXISTS $DB"

python3 - "$OUT" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
print("\n| mix | keys | commands/s | queries/s | raw INSERT/s | % of raw | latency p50 / p99 ms | projection lag p50 / p99 ms | saga lag p50 / p99 ms | SSE p50 / p99 ms (subscribers) | relay lag p50 / p99 ms | errors | peak RSS MiB | CPU % |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
for r in rows:
    s = r.get("service") or {}
    w = r.get("workers")
    if w:
        r = dict(r, mix=f'workers ({w["phase"]})')
    pct = f'{100 * r["ratio"]:.1f}' if r.get("ratio") else "-"
    sse = f'{r["sse_delivery_ms"]["p50"]} / {r["sse_delivery_ms"]["p99"]} ({r["subscribers"]})' if r["subscribers"] else "-"
    keys = "yes" if r.get("idempotency_keys", True) else "no"
    relay = r.get("relay_lag_ms")
    relay = f'{relay["p50"]} / {relay["p99"]}' if relay else "-"
    print(f'| {r["mix"]} | {keys} | {r["commands_per_s"]} | {r["queries_per_s"]} | {r["raw_inserts_per_s"]} | {pct} '
          f'| {r["latency_ms"]["p50"]} / {r["latency_ms"]["p99"]} | {r["projection_lag_ms"]["p50"]} / {r["projection_lag_ms"]["p99"]} '
          f'| {r["saga_lag_ms"]["p50"]} / {r["saga_lag_ms"]["p99"]} | {sse} | {relay} | {sum(r["errors"].values())} '
          f'| {s.get("peak_rss_mib", "-")} | {s.get("cpu_percent", "-")} |')
w = [r for r in rows if r.get("workers")]
if w:
    print("\n| workers phase | workers / conversations | turn cycles/s (aimed) | raw queue cycles/s | % of raw queue | message->claim p50 / p99 ms | answered->claim p50 / p99 ms | cycle p50 / p99 ms | claim p50 / p99 ms | commands/s | raw INSERT/s | % of raw | saga lag p50 / p99 ms | lost | errors | target (p99 < 50 ms at half peak) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in w:
        x = r["workers"]
        pct = f'{100 * r["ratio"]:.1f}' if r.get("ratio") else "-"
        queue = x.get("raw_queue_cycles_per_s") or "-"
        qpct = f'{100 * x["queue_ratio"]:.1f}' if x.get("queue_ratio") is not None else "-"
        aim = f' ({x["target_cycles_per_s"]})' if x.get("target_cycles_per_s") else ""
        met = {True: "met", False: "MISSED", None: "-"}[x.get("target_met")]
        pp = lambda k: f'{x[k]["p50"]} / {x[k]["p99"]}'
        print(f'| {x["phase"]} | {x["workers"]} / {x["conversations"]} | {x["cycles_per_s"]}{aim} | {queue} | {qpct} | {pp("message_to_claim_ms")} '
              f'| {pp("ack_to_claim_ms")} | {pp("cycle_ms")} | {pp("claim_ms")} | {r["commands_per_s"]} | {r["raw_inserts_per_s"]} | {pct} '
              f'| {r["saga_lag_ms"]["p50"]} / {r["saga_lag_ms"]["p99"]} | {x["lost_turns"]} | {sum(r["errors"].values())} | {met} |')
PY
