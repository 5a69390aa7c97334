#!/usr/bin/env python3
"""A principals file of N entries for pm-bench (issue 28's measurement): N-1 principals of
random tokens spread over organizations, and one admin for every organization whose
token is the second argument — the one pm-bench signs in with (PM_BENCH_TOKEN). With a
third argument, that admin is of that one organization only (a scoped principal: every
read, list and log read of the run goes through the organizations' scope), and pm-bench
must start its conversations there (PM_BENCH_ORGANIZATION).

    python3 bench/principals.py 1000 "$TOKEN" > /tmp/principals.json
    PM_PRINCIPALS_FILE=/tmp/principals.json PM_BENCH_TOKEN="$TOKEN" bench/run.sh
    python3 bench/principals.py 1000 "$TOKEN" org-7 > /tmp/scoped.json
    PM_PRINCIPALS_FILE=/tmp/scoped.json PM_BENCH_TOKEN="$TOKEN" PM_BENCH_ORGANIZATION=org-7 \
        bench/run.sh
"""
import hashlib
import json
import secrets
import sys

count, token = int(sys.argv[1]), sys.argv[2]
scope = [sys.argv[3]] if len(sys.argv) > 3 else ["*"]
roles = [["ingress"], ["llm"], ["analyst"], ["ingress", "llm"]]
principals = [
    {
        "name": f"svc-{i:05d}@org-{i % 50}",
        "token_sha256": hashlib.sha256(secrets.token_urlsafe(32).encode()).hexdigest(),
        "roles": roles[i % len(roles)],
        "organizations": [f"org-{i % 50}"],
    }
    for i in range(count - 1)
]
principals.append(
    {
        "name": "bench-admin",
        "token_sha256": hashlib.sha256(token.encode()).hexdigest(),
        "roles": ["admin"],
        "organizations": scope,
    }
)
json.dump({"principals": principals}, sys.stdout)
