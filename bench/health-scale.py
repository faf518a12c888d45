#!/usr/bin/env python3
"""How the canonical health check's time grows with the number of GPUs and pairs (issue 24,
part 5), on fake GPUs: for each N, start the real umd with --fake-devices N on loopback and a
temporary state directory, warm every worker with one canonical check, then time R more: submit
to final answer over HTTP (?wait=), and from the job document the span of the GPU parts and of
the node's part (the GPU pairs: N(N-1) ordered). Also the cached reads a scheduler's health
check makes (GET /v1/health, GET /v1/devices/node, umdctl health --cached).

Fake GPUs sleep at most FAKE_MAX_SLEEP_MS (50 ms) a part whatever their model says, so these
figures are umd's own cost (dispatch, workers, IPC, verdicts, store commits) plus that sleep,
never a GPU's: docs/health-scale.md turns them into an estimate for real GPUs.

usage: bench/health-scale.py --umd build/umd --worker build/kernels/umd-worker
                             [--umdctl build/client/umdctl] [--gpus 1,2,4,8] [--runs 5]
       bench/health-scale.py ... --real --gpus 8      (a GPU node: its own GPUs)"""
import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import tempfile
import time
import urllib.request
from datetime import datetime


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http(base, method, path, body=None, timeout=120):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(base + path, data=data, method=method,
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, json.loads(r.read() or b"null")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null")


def ts(s):
    return datetime.fromisoformat(s.replace("Z", "+00:00")).timestamp()


def check(base):
    """One canonical check over every GPU: (wall s, job)."""
    t0 = time.monotonic()
    st, job = http(base, "POST", "/v1/jobs", {"benchmark": "health"})
    assert st == 202, (st, job)
    while job["state"] not in ("succeeded", "failed", "cancelled", "timed_out", "interrupted"):
        st, job = http(base, "GET", f"/v1/jobs/{job['id']}?wait=60s")
    return time.monotonic() - t0, job


def spans(job):
    gpus = [p for p in job["parts"] if p["uuid"] != "node"]
    node = [p for p in job["parts"] if p["uuid"] == "node"]
    g = max(ts(p["finished"]) for p in gpus) - min(ts(p["started"]) for p in gpus)
    n = ts(node[0]["finished"]) - ts(node[0]["started"]) if node else 0.0
    pairs = node[0]["verdict"]["pairs"] if node and node[0].get("verdict") else 0
    return g, n, pairs


def timed(fn, runs):
    out = []
    for _ in range(runs):
        t0 = time.monotonic()
        fn()
        out.append(time.monotonic() - t0)
    return statistics.median(out)


def one(args, n):
    state = tempfile.mkdtemp(prefix="umd-health-scale-")
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    log = open(os.path.join(state, "umd.log"), "wb")
    conf = os.path.join(state, "empty.conf")  # no /etc/umd/umd.conf: the defaults alone
    open(conf, "w").close()
    env = {k: v for k, v in os.environ.items() if not k.startswith("UMD_")}
    fake = [] if args.real else ["--fake-devices", str(n)]
    p = subprocess.Popen([args.umd, "--listen", f"127.0.0.1:{port}", "--state-dir", state,
                          "--worker-path", args.worker, *fake, "--config", conf],
                         stdout=log, stderr=subprocess.STDOUT, env=env)
    try:
        for _ in range(400):
            try:
                if http(base, "GET", "/v1/version", timeout=1)[0] == 200:
                    break
            except OSError:
                if p.poll() is not None:
                    raise SystemExit(f"umd exited with {p.returncode}; see its log")
                time.sleep(0.05)
        cold, job = check(base)
        assert job["state"] == "succeeded", job
        walls, gs, ns, pairs = [], [], [], 0
        for _ in range(args.runs):
            w, job = check(base)
            assert job["state"] == "succeeded", job
            g, nn, pairs = spans(job)
            walls.append(w)
            gs.append(g)
            ns.append(nn)
        health = timed(lambda: http(base, "GET", "/v1/health"), 20)
        node = timed(lambda: http(base, "GET", "/v1/devices/node"), 20) if n >= 2 else None
        cached = None
        if args.umdctl:
            cached = timed(lambda: subprocess.run(
                [args.umdctl, "--url", base, "health", "--cached", "--max-age", "1h"],
                capture_output=True, env=env), 5)
        verdicts = sorted({p["verdict"]["verdict"] for p in job["parts"]})
        return {"gpus": n, "pairs": pairs, "cold_s": cold,
                "wall_s": statistics.median(walls), "wall_min_s": min(walls),
                "wall_max_s": max(walls), "gpu_parts_s": statistics.median(gs),
                "node_part_s": statistics.median(ns), "health_get_s": health,
                "node_get_s": node, "umdctl_cached_s": cached, "verdicts": verdicts}
    finally:
        p.terminate()
        p.wait(30)
        log.close()
        shutil.rmtree(state, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--umd", required=True)
    ap.add_argument("--worker", required=True)
    ap.add_argument("--umdctl")
    ap.add_argument("--gpus", default="1,2,4,8")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--real", action="store_true",
                    help="the host's GPUs, not fake ones (give --gpus as their count)")
    args = ap.parse_args()
    print(f"# {datetime.utcnow():%Y-%m-%d %H:%M} UTC, {os.cpu_count()} CPUs, "
          f"{'real' if args.real else 'fake'} GPUs, "
          f"{args.runs} warm runs each (median; min..max)")
    print(f"{'GPUs':>4} {'pairs':>5} {'cold s':>7} {'warm s':>7} {'min..max':>13} "
          f"{'GPU parts':>9} {'node part':>9} {'/v1/health':>10} {'node GET':>8} "
          f"{'--cached':>8}  verdicts")
    for n in [int(x) for x in args.gpus.split(",")]:
        r = one(args, n)
        ms = lambda v: f"{v * 1000:.1f}ms" if v is not None else "-"
        print(f"{r['gpus']:>4} {r['pairs']:>5} {r['cold_s']:>7.3f} {r['wall_s']:>7.3f} "
              f"{r['wall_min_s']:>6.3f}..{r['wall_max_s']:<6.3f} {r['gpu_parts_s']:>9.3f} "
              f"{r['node_part_s']:>9.3f} {ms(r['health_get_s']):>10} {ms(r['node_get_s']):>8} "
              f"{ms(r['umdctl_cached_s']):>8}  {','.join(r['verdicts'])}", flush=True)


if __name__ == "__main__":
    main()
