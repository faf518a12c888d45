#!/usr/bin/env python3
"""End-to-end GPU measurements through a running umd's HTTP API (stdlib only, so it runs on a
bare GPU machine). Prints one table of every mode at a size, the um_vs_explicit comparison as
umd renders it, and the submit-to-result time of health jobs on the warm daemon.

  bench/umd-e2e.py --url http://127.0.0.1:8470 [--size 64MiB] [--device 0]
                   [--health-runs 5] [--cold-reference PROG] [--what modes,um,health]

--cold-reference PROG times a cold process (PROG --size 64MiB) for comparison with the warm
daemon's health job: what a one-shot copy-bandwidth tool pays for each check.
"""
import argparse
import json
import subprocess
import sys
import time
import urllib.error
import urllib.request

MODES = [
    ("copy", {"direction": "h2d", "host_memory": "pinned"}),
    ("copy", {"direction": "d2h", "host_memory": "pinned"}),
    ("copy", {"direction": "bidir", "host_memory": "pinned"}),
    ("copy", {"direction": "h2d", "host_memory": "pageable"}),
    ("copy", {"direction": "d2h", "host_memory": "pageable"}),
    ("copy_overlap", {}),
    ("zero_copy", {}),
    ("managed_on_demand", {}),
    ("managed_on_demand", {"access": "random"}),
    ("managed_prefetch", {}),
    ("managed_advise", {"advice": "read_mostly"}),
    ("managed_advise", {"advice": "preferred_location_host"}),
    ("managed_advise", {"advice": "preferred_location_device"}),
    ("managed_advise", {"advice": "accessed_by"}),
    ("system_memory", {}),
    ("latency", None),
]
FINAL = ("succeeded", "failed", "cancelled", "timed_out", "interrupted")


def call(url, method="GET", body=None, accept="application/json"):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method,
                                 headers={"Content-Type": "application/json", "Accept": accept})
    try:
        with urllib.request.urlopen(req, timeout=600) as r:
            raw = r.read()
    except urllib.error.HTTPError as e:
        raw = e.read()
        raise SystemExit(f"{method} {url}: HTTP {e.code}: {raw.decode(errors='replace')}")
    return raw if accept != "application/json" else json.loads(raw)


def run(base, body, poll=0.01):
    t0 = time.monotonic()
    job = call(base + "/v1/jobs", "POST", body)
    while job["state"] not in FINAL:
        time.sleep(poll)
        job = call(base + "/v1/jobs/" + job["id"])
    return job, time.monotonic() - t0


def modes_table(base, size, device, iterations, warmup):
    rows = []
    for bench, params in MODES:
        p = dict(params) if params is not None else {}
        if params is not None:
            p.update({"size": size, "iterations": iterations, "warmup": warmup})
        job, _ = run(base, {"benchmark": bench, "device": device, "params": p,
                            "timeout_s": 1800})
        part = job["parts"][0]
        label = bench + ("" if not params else " " + ",".join(f"{k}={v}" for k, v in params.items()))
        if part["state"] != "succeeded":
            rows.append((label, "-", part["state"] + ": " + (part.get("error") or ""), "", "", "", ""))
            continue
        for m in part["result"]["measurements"]:
            st = m.get("stats", {})
            lat = m.get("latency_us")
            rows.append((label, m["name"],
                         f"{m['gbps']:.2f}" if m.get("gbps") is not None else "-",
                         f"{st.get('median_ms', 0):.4f}", f"{st.get('cv', 0) * 100:.2f}",
                         "yes" if m.get("verified") else "NO",
                         f"{lat:.1f}" if isinstance(lat, (int, float)) else "",
                         m.get("bytes_counted", "")))
    out = [f"{'benchmark':48} {'measurement':24} {'GB/s':>9} {'median ms':>10} {'CV%':>6} "
           f"{'verified':>8} {'lat us':>7}  bytes counted"]
    for r in rows:
        r = list(r) + [""] * (8 - len(r))
        out.append(f"{r[0]:48} {r[1]:24} {r[2]:>9} {r[3]:>10} {r[4]:>6} {r[5]:>8} {r[6]:>7}  {r[7]}")
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", default="http://127.0.0.1:8470")
    ap.add_argument("--size", default="64MiB")
    ap.add_argument("--device", type=int, default=0)
    ap.add_argument("--iterations", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--health-runs", type=int, default=5)
    ap.add_argument("--cold-reference")
    ap.add_argument("--what", default="modes,um,health")
    a = ap.parse_args()
    base = a.url.rstrip("/")
    what = a.what.split(",")
    dev = call(base + "/v1/devices")[a.device]
    print(f"# umd end to end: {time.strftime('%Y-%m-%d %H:%M:%S %Z')}")
    print(f"# device {a.device}: {dev['name']} {dev['uuid']} PCIe Gen{dev['pcie']['current_gen']} "
          f"x{dev['pcie']['current_width']} (max Gen{dev['pcie']['max_gen']} x{dev['pcie']['max_width']})"
          f"{' FAKE' if dev.get('fake') else ''}")
    print(f"# umd {call(base + '/v1/version')}")
    print(f"# command: {' '.join(sys.argv)}\n")
    if "modes" in what:
        print(f"## every mode at {a.size} (median of {a.iterations} after {a.warmup} warm-up), "
              f"one job each through POST /v1/jobs\n")
        print(modes_table(base, a.size, a.device, a.iterations, a.warmup))
        print()
    if "um" in what:
        job, secs = run(base, {"benchmark": "um_vs_explicit", "device": a.device,
                               "params": {"size": a.size}, "timeout_s": 3600})
        print(f"## um_vs_explicit at {a.size}: {secs:.1f} s submit to result\n")
        print(call(base + "/v1/jobs/" + job["id"], accept="text/plain").decode())
    if "lifecycle" in what:
        # The real CUDA path under the supervisor: a job past its deadline is killed with its
        # worker (a hung kernel cannot be cancelled in-process), a running job is cancelled,
        # and in both cases the next job runs on a fresh worker.
        slow = {"benchmark": "managed_advise", "device": a.device,
                "params": {"advice": "read_mostly", "size": "1GiB", "iterations": 50}}
        print("## lifecycle on the real GPU\n")
        job, secs = run(base, dict(slow, timeout_s=3))
        print(f"slow job with timeout_s=3: {job['state']} after {secs:.1f} s: "
              f"{job['parts'][0].get('error')}")
        job, secs = run(base, {"benchmark": "copy", "device": a.device})
        print(f"next job: {job['state']} in {secs:.2f} s")
        job = call(base + "/v1/jobs", "POST", slow)
        time.sleep(1.5)
        t0 = time.monotonic()
        call(base + "/v1/jobs/" + job["id"], "DELETE")
        while job["state"] not in FINAL:
            time.sleep(0.05)
            job = call(base + "/v1/jobs/" + job["id"])
        print(f"cancel of a running job: {job['state']} {time.monotonic() - t0:.1f} s after "
              f"DELETE: {job['parts'][0].get('error')}")
        job, secs = run(base, {"benchmark": "copy", "device": a.device})
        print(f"next job: {job['state']} in {secs:.2f} s\n")
    if "health" in what:
        times, verdicts = [], []
        for _ in range(a.health_runs):
            job, secs = run(base, {"benchmark": "health", "device": a.device})
            times.append(secs)
            verdicts.append((job["parts"][0].get("verdict") or {}).get("verdict", job["state"]))
        times.sort()
        med = times[len(times) // 2]
        print(f"## health job, warm daemon, submit to result over HTTP ({a.health_runs} runs)\n")
        print(f"median {med * 1000:.0f} ms, min {times[0] * 1000:.0f} ms, max {times[-1] * 1000:.0f} ms;"
              f" verdicts {verdicts}")
        if a.cold_reference:
            cold = []
            for _ in range(3):
                t0 = time.monotonic()
                subprocess.run([a.cold_reference, "--size", str(64 << 20), "--iterations", "5",
                                "--warmup", "1"], check=True, capture_output=True)
                cold.append(time.monotonic() - t0)
            cold.sort()
            print(f"cold reference process ({a.cold_reference} --size 64MiB, pinned H2D and D2H, "
                  f"5 samples): median {cold[1] * 1000:.0f} ms whole process")
            print(f"ratio warm health job / cold two-direction copy process: {med / cold[1]:.2f}")
        print("\nlast health verdict:")
        print(json.dumps(call(base + "/v1/devices")[a.device]["last_health"], indent=1)[:3000])


if __name__ == "__main__":
    main()
