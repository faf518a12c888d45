#!/usr/bin/python3
"""Records umd's answers to a fixed set of job requests on fake devices, ids and times masked,
so that a refactoring can be checked byte for byte against the landed tree's answers:

    tests/answers/record.py build-base/umd build-base/kernels/umd-worker > before.txt
    tests/answers/record.py build/umd build/kernels/umd-worker > after.txt
    diff before.txt after.txt

Each request prints its method, path, status, the headers that carry meaning (Content-Type,
Link, Retry-After) and the body. Job ids are replaced by their order of first appearance and
times by a placeholder: two runs differ only where the answers do."""
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

UUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z")
MS = re.compile(r'"(created_ms|finished_ms|ms|time_ms|elapsed_ms|duration_ms)":\s*[0-9.e+-]+')
ids = {}


def mask(text):
    def one(m):
        key = m.group(0).lower()
        if key.startswith("00000000-") or key.endswith("-0000-0000-000000000000"):
            return key
        ids.setdefault(key, f"<id{len(ids)}>")
        return ids[key]
    text = UUID.sub(one, text)
    text = TIME.sub("<time>", text)
    return MS.sub(lambda m: f'"{m.group(1)}":<ms>', text)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def request(base, method, path, body=None, headers=None):
    data = None if body is None else (body if isinstance(body, bytes) else
                                      json.dumps(body).encode())
    req = urllib.request.Request(base + path, data=data, method=method, headers=headers or {})
    if data is not None:
        req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            status, hdrs, text = r.status, r.headers, r.read().decode()
    except urllib.error.HTTPError as e:
        status, hdrs, text = e.code, e.headers, e.read().decode()
    shown = [f"{h}: {hdrs[h]}" for h in ("Content-Type", "Link", "Retry-After") if hdrs.get(h)]
    print(f"== {method} {mask(path)} -> {status}")
    for h in shown:
        print(mask(h))
    print(mask(text))
    return status, text


def main():
    umd, worker = sys.argv[1], sys.argv[2]
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    with tempfile.TemporaryDirectory() as tmp:
        log = open(os.path.join(tmp, "umd.log"), "wb")
        p = subprocess.Popen([umd, "--listen", f"127.0.0.1:{port}", "--state-dir",
                              os.path.join(tmp, "state"), "--worker-path", worker,
                              "--fake-devices", "2"], stdout=log, stderr=subprocess.STDOUT,
                             stdin=subprocess.DEVNULL)
        try:
            for _ in range(200):
                try:
                    urllib.request.urlopen(base + "/v1/version", timeout=1).read()
                    break
                except OSError:
                    time.sleep(0.05)
            run(base)
        finally:
            p.terminate()
            p.wait(20)


def wait_final(base, jid):
    for _ in range(400):
        with urllib.request.urlopen(f"{base}/v1/jobs/{jid}", timeout=10) as r:
            if json.loads(r.read())["state"] not in ("queued", "running"):
                return
        time.sleep(0.05)


def run(base):
    copy = {"benchmark": "copy", "device": 0, "params": {"size": "4MiB"}}
    made = []
    for i in range(4):
        s, t = request(base, "POST", "/v1/jobs", {**copy, "labels": {"n": str(i)}})
        made.append(json.loads(t)["id"])
        wait_final(base, made[-1])
    # Idempotency: a replay, and a different body under the same key.
    request(base, "POST", "/v1/jobs", copy, {"Idempotency-Key": "k1"})
    wait_final(base, list(ids)[-1])
    request(base, "POST", "/v1/jobs", copy, {"Idempotency-Key": "k1"})
    request(base, "POST", "/v1/jobs", {**copy, "device": 1}, {"Idempotency-Key": "k1"})
    # Bad submissions.
    for body in ({"benchmark": "nope"}, {"benchmark": "copy", "device": 9},
                 {"benchmark": "copy", "params": {"size": "huge"}}, b"{", b"[]"):
        request(base, "POST", "/v1/jobs", body)
    # One job.
    request(base, "GET", f"/v1/jobs/{made[0]}")
    request(base, "GET", "/v1/jobs/not-a-uuid")
    request(base, "GET", "/v1/jobs/01890000-0000-7000-8000-000000000000")
    # Cancel: finished, unknown, malformed; and a long job cancelled while it runs or waits.
    request(base, "DELETE", f"/v1/jobs/{made[0]}")
    request(base, "DELETE", "/v1/jobs/01890000-0000-7000-8000-000000000000")
    request(base, "DELETE", "/v1/jobs/zzz")
    _, t = request(base, "POST", "/v1/jobs",
                   {"benchmark": "copy", "device": 1, "params": {"fake_delay_ms": 60000}})
    running = json.loads(t)["id"]
    for _ in range(400):
        with urllib.request.urlopen(f"{base}/v1/jobs/{running}", timeout=10) as r:
            if json.loads(r.read())["state"] == "running":
                break
        time.sleep(0.05)
    _, t = request(base, "POST", "/v1/jobs", {**copy, "device": 1})
    queued = json.loads(t)["id"]
    request(base, "DELETE", f"/v1/jobs/{queued}")
    request(base, "DELETE", f"/v1/jobs/{queued}")
    request(base, "DELETE", f"/v1/jobs/{running}")
    wait_final(base, running)
    request(base, "GET", f"/v1/jobs/{running}")
    # Lists: filters good and bad.
    queries = [
        "", "?limit=2", "?limit=1&label=n:1", "?status=succeeded&limit=3", "?status=nope",
        "?limit=0", "?limit=abc", "?limit=100000", "?limit=", "?before=xyz", "?after=xyz",
        "?include=results&limit=1", "?include=everything", "?benchmark=copy&limit=2",
        "?benchmark=nope", "?label=nocolon", "?label=:v", "?device=0&limit=2", "?device=1",
        "?device=7", "?since=2020-01-01T00:00:00Z&limit=2", "?since=bad", "?until=bad",
        "?until=2020-01-01T00:00:00%2B01:00", "?since=1000&until=99999999999999",
        "?status=succeeded&status=failed", "?bogus=1", "?wait=1", "?wait=abc",
        "?status=cancelled&benchmark=copy&device=1&label=n:1&limit=1",
        "?since=2020-01-01T00:00:00.5Z&limit=1&include=results", "?label=a%20b:c%2Fd&limit=1",
        f"?after={made[0]}&limit=2", f"?before={made[3]}&limit=2",
        f"?before={made[3]}&after={made[0]}&limit=1",
    ]
    for q in queries:
        s, t = request(base, "GET", "/v1/jobs" + q)
    # Follow the next links of a small page to the end.
    path = "/v1/jobs?limit=2&benchmark=copy"
    while path:
        s, t = request(base, "GET", path)
        path = json.loads(t).get("next") if s == 200 else None
    request(base, "GET", "/v1/jobs?format=text&limit=2")


if __name__ == "__main__":
    main()
