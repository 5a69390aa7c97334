#!/usr/bin/env python3
"""One long conversation: a person posts N messages into one conversation with an AI
(each message a turn queued in the AI agent's inbox), then the service is restarted and
one more message is posted.

Prints, per thousand messages, the rate (messages/s) and the saga lag (ms from a sampled
message's answer until the `sagas` processor's cursor has passed its position, read from
GET /v1/admin/processors), and the first message's saga lag after the restart.

    bench/conversation.py --binary target/release/project-manager \
        --database-url postgres://postgres@127.0.0.1:5432/pm_bench_conv [--messages 20000]

Standard library only; the database is created fresh (PostgreSQL) by the caller.
"""
import argparse
import http.client
import json
import os
import signal
import statistics
import subprocess
import threading
import time

TOKEN = "admin-secret-1"


class Client:
    def __init__(self, port):
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)

    def call(self, method, path, body=None):
        headers = {"authorization": f"Bearer {TOKEN}", "content-type": "application/json"}
        self.conn.request(method, path, json.dumps(body) if body is not None else None, headers)
        r = self.conn.getresponse()
        data = r.read()
        if r.status >= 300:
            raise RuntimeError(f"{method} {path}: {r.status} {data[:200]!r}")
        return json.loads(data) if data else None, r.getheader("x-event-position")


def start(binary, url, port):
    env = dict(os.environ, DATABASE_URL=url, PM_BIND=f"127.0.0.1:{port}",
               PM_AUTH_TOKENS=f"admin:{TOKEN}", RUST_LOG="warn")
    proc = subprocess.Popen([binary], env=env)
    for _ in range(200):
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=1)
            c.request("GET", "/readyz")
            if c.getresponse().status == 200:
                return proc
        except OSError:
            pass
        time.sleep(0.05)
    raise RuntimeError("the service did not become ready")


def saga_cursor(client):
    body, _ = client.call("GET", "/v1/admin/processors")
    return next(int(p["position"]) for p in body["processors"] if p["name"] == "sagas")


def lag(client, position, since, timeout=30.0):
    """ms from `since` (a perf_counter time) until the sagas cursor has passed `position`."""
    while time.perf_counter() - since < timeout:
        if saga_cursor(client) >= position:
            return (time.perf_counter() - since) * 1000
        time.sleep(0.002)
    return float("inf")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", required=True)
    ap.add_argument("--database-url", required=True)
    ap.add_argument("--messages", type=int, default=20000)
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--port", type=int, default=18094)
    a = ap.parse_args()

    proc = start(a.binary, a.database_url, a.port)
    c = Client(a.port)
    human, _ = c.call("POST", "/v1/actors", {"kind": "human", "display_name": "a person", "external_identity": "h-conv"})
    ai, _ = c.call("POST", "/v1/actors", {"kind": "ai", "display_name": "the llm", "external_identity": "ai-conv"})
    conv, _ = c.call("POST", "/v1/conversations", {"actor_ids": [human["id"], ai["id"]], "title": "a long one"})
    path = f"/v1/conversations/{conv['id']}/messages"

    done = []  # (index, time answered)
    lags = {}  # thousand -> [ms]
    lock = threading.Lock()
    counter = iter(range(a.messages))
    probe = Client(a.port)
    probing = threading.Lock()

    def worker():
        cl = Client(a.port)
        while True:
            with lock:
                i = next(counter, None)
            if i is None:
                return
            _, position = cl.call("POST", path, {"actor_id": human["id"], "content": f"message {i}"})
            t = time.perf_counter()
            with lock:
                done.append((i, t))
                answered = len(done) - 1  # the thousands below count answers in order
            if answered % 100 == 50:
                with probing:
                    ms = lag(probe, int(position), t)
                with lock:
                    lags.setdefault(answered // 1000, []).append(ms)

    t0 = time.perf_counter()
    threads = [threading.Thread(target=worker) for _ in range(a.concurrency)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    done.sort(key=lambda d: d[1])
    print("| thousand | messages/s | saga lag p50 / max ms |")
    print("|---|---|---|")
    prev = t0
    for k in range(0, len(done), 1000):
        chunk = done[k:k + 1000]
        end = chunk[-1][1]
        rate = len(chunk) / (end - prev)
        prev = end
        ls = lags.get(k // 1000, [])
        l50 = f"{statistics.median(ls):.1f} / {max(ls):.1f}" if ls else "-"
        print(f"| {k // 1000 + 1} | {rate:.0f} | {l50} |")

    proc.send_signal(signal.SIGTERM)
    proc.wait()
    proc = start(a.binary, a.database_url, a.port)
    c = Client(a.port)
    saga_cursor(c)
    _, position = c.call("POST", path, {"actor_id": human["id"], "content": "after the restart"})
    first = lag(c, int(position), time.perf_counter())
    print(f"first message after the restart: saga lag {first:.1f} ms")
    proc.send_signal(signal.SIGTERM)
    proc.wait()


if __name__ == "__main__":
    main()
