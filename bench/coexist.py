#!/usr/bin/env python3
"""What idle release costs and what the canonical health check takes, through umd's API on a
real GPU, side by side with a cold process doing the same copies (issue 10's measurements).

    coexist.py --url http://127.0.0.1:8470 --reference PROG [--runs 5] [--device 0]

- canonical health check, submit to result over HTTP: warm worker, and cold (the worker let
  go by a pause and resume first, so the job pays process start, CUDA context and buffers);
- a cold process (PROG --size 64MiB: context, pinned buffers, H2D and D2H) for comparison;
- the price of idle release: a 64 MiB copy job on a cold worker against the same job warm.
Medians of --runs. Standard library only (runs on the GPU machine's python)."""
import argparse
import json
import statistics
import subprocess
import time
import urllib.request


def call(url, method="GET", body=None):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method,
                                 headers={"Content-Type": "application/json"} if data else {})
    with urllib.request.urlopen(req, timeout=120) as r:
        return json.loads(r.read())


def run(base, body):
    t0 = time.monotonic()
    job = call(base + "/v1/jobs", "POST", body)
    while True:
        j = call(base + "/v1/jobs/" + job["id"])
        if j["state"] not in ("queued", "running"):
            return j, time.monotonic() - t0
        time.sleep(0.002)


def make_cold(base, device):
    call(f"{base}/v1/devices/{device}/pause", "POST", {"reason": "bench: drop the worker"})
    while call(base + "/v1/devices")[device]["warm"]:
        time.sleep(0.02)
    call(f"{base}/v1/devices/{device}/resume", "POST")


def ms(xs):
    return f"median {statistics.median(xs) * 1000:7.1f} ms (min {min(xs) * 1000:.1f}, " \
           f"max {max(xs) * 1000:.1f}, n={len(xs)})"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", default="http://127.0.0.1:8470")
    ap.add_argument("--reference", required=True)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--device", type=int, default=0)
    a = ap.parse_args()
    base = a.url
    health = {"benchmark": "health", "device": a.device}
    copy = {"benchmark": "copy", "device": a.device, "params": {"size": "64MiB"}}

    run(base, health)  # first run warms the worker and the pool
    warm, cold, cold_start, verdicts = [], [], [], []
    for _ in range(a.runs):
        j, t = run(base, health)
        assert j["state"] == "succeeded", j
        warm.append(t)
        verdicts.append(j["parts"][0]["verdict"]["verdict"])
    for _ in range(a.runs):
        make_cold(base, a.device)
        j, t = run(base, health)
        assert j["state"] == "succeeded", j
        assert j["parts"][0]["cold_start"]["cold"], j["parts"][0]["cold_start"]
        cold.append(t)
        cold_start.append(j["parts"][0]["cold_start"]["ms"] / 1000)
        verdicts.append(j["parts"][0]["verdict"]["verdict"])
    ref = []
    for _ in range(a.runs):
        t0 = time.monotonic()
        subprocess.run([a.reference, "--size", str(64 << 20), "--iterations", "10",
                        "--warmup", "3"], check=True, capture_output=True)
        ref.append(time.monotonic() - t0)
    print("## canonical health check, submit to result over HTTP\n")
    print(f"warm worker:                   {ms(warm)}")
    print(f"cold worker (after release):   {ms(cold)}")
    print(f"  of which worker start:       {ms(cold_start)}")
    print(f"cold process, pinned H2D+D2H 64 MiB x13 each ({a.reference}): {ms(ref)}")
    print(f"ratio warm check / cold process: {statistics.median(warm) / statistics.median(ref):.2f}")
    print(f"ratio cold check / cold process: {statistics.median(cold) / statistics.median(ref):.2f}")
    print(f"verdicts: {verdicts}")
    last = call(base + "/v1/devices")[a.device]["last_health"]
    print("checks of the last verdict:")
    for c in last["checks"]:
        print(f"  {c['verdict']:4} {c['reason']}")

    cw, cc = [], []
    run(base, copy)
    for _ in range(a.runs):
        j, t = run(base, copy)
        assert not j["parts"][0]["cold_start"]["cold"]
        cw.append(t)
    for _ in range(a.runs):
        make_cold(base, a.device)
        j, t = run(base, copy)
        assert j["parts"][0]["cold_start"]["cold"]
        cc.append(t)
    print("\n## the price of idle release: 64 MiB pinned H2D copy job, submit to result\n")
    print(f"warm worker: {ms(cw)}")
    print(f"cold worker: {ms(cc)}")
    print(f"ratio cold / warm: {statistics.median(cc) / statistics.median(cw):.1f}")


if __name__ == "__main__":
    main()
