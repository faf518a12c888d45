#!/usr/bin/env python3
"""The benchmarks across GPUs through umd's API, on a host with two GPUs or more, against the
plain CUDA loops of tests/gpu/reference_multi run in the same session (the 2% rule), then the
isolation checks: a job on one GPU survives the other GPU's worker being killed, and a job on
the node worker survives a GPU worker being killed.

  multi-gpu.py --url http://127.0.0.1:8470 --umd-pid PID --reference-multi PATH --out DIR
               [--size 256MiB] [--iterations 20]

Writes DIR/multi-gpu-jobs.json (every job as umd answered it), DIR/topology.txt and
DIR/peer.txt (the text view), and prints the fidelity table and the checks. Python 3 stdlib
only. Exit 0 when every job succeeded with verified data, each isolation check held and every
copy measurement is within 2% of its reference (managed on-demand and managed prefetch between
GPUs, whose rates swing from pass to pass in the plain loop too, are reported but not held)."""
import argparse
import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

TOLERANCE = 0.02
# Reported, never held to 2%: page-fault migration, and managed prefetch between GPUs, which
# the plain loop itself does not repeat (on two H200s it measured 112 against 159 GB/s, and in
# another run 101 against 135, for the two directions of one symmetric NVLink pair).
NOT_HELD = ("on_demand@", "prefetch@")


def http(base, method, path, body=None, timeout=60):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(base + path, data=data, method=method,
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            raw = r.read()
            return r.status, raw.decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def submit(base, body):
    st, text = http(base, "POST", "/v1/jobs", body)
    if st != 202:
        raise SystemExit(f"submit {body}: {st} {text}")
    return json.loads(text)["id"]


def wait(base, jid, states=("succeeded", "failed", "cancelled", "timed_out", "interrupted"),
         timeout=300):
    deadline = time.monotonic() + timeout
    while True:
        st, text = http(base, "GET", "/v1/jobs/" + jid)
        j = json.loads(text)
        if j["state"] in states:
            return j
        if time.monotonic() > deadline:
            raise SystemExit(f"job {jid} stuck in {j['state']}")
        time.sleep(0.1)


def workers(umd_pid):
    """{--device value: pid} of umd's children."""
    kids = subprocess.run(["pgrep", "-P", str(umd_pid)], capture_output=True,
                          text=True).stdout.split()
    out = {}
    for pid in map(int, kids):
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except FileNotFoundError:
            continue
        if b"--device" in argv:
            out[argv[argv.index(b"--device") + 1].decode()] = pid
    return out


def all_verified(job):
    ok = job["state"] == "succeeded"
    for p in job["parts"]:
        for m in (p.get("result") or {}).get("measurements", []):
            ok = ok and m.get("verified") is True
    return ok


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", required=True)
    ap.add_argument("--umd-pid", type=int, required=True)
    ap.add_argument("--reference-multi", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--size", default="256MiB")
    ap.add_argument("--iterations", type=int, default=20)
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    base = args.url
    failures = []

    devices = json.loads(http(base, "GET", "/v1/devices")[1])
    print(f"devices: {[(d['index'], d['name'], d['uuid']) for d in devices]}")
    if len(devices) < 2:
        print("needs two GPUs: this host has", len(devices))
        return 77
    size_b = {"256MiB": 256 << 20, "1GiB": 1 << 30, "64MiB": 64 << 20}.get(args.size)

    # The reference first, alone on the GPUs (umd's workers are cold: nothing else runs).
    t0 = time.monotonic()
    ref = subprocess.run([args.reference_multi, "--size", str(size_b), "--iterations",
                          str(args.iterations), "--warmup", "3"], capture_output=True,
                         text=True, timeout=300)
    print(f"reference_multi rc={ref.returncode} in {time.monotonic() - t0:.1f} s")
    if ref.returncode != 0:
        print(ref.stdout, ref.stderr)
        failures.append("reference_multi failed")
        refs = {}
    else:
        refs = json.loads(ref.stdout)["gbps"]
    (out / "reference-multi.json").write_text(ref.stdout)

    params = {"size": args.size, "iterations": args.iterations, "warmup": 3}
    bodies = [
        ("d2d", {"benchmark": "d2d", "devices": "all", "params": params}),
        ("peer", {"benchmark": "peer", "params": params}),
        ("managed_peer", {"benchmark": "managed_peer", "params": dict(params, iterations=10)}),
        ("host_all_h2d", {"benchmark": "host_all", "params": dict(params, direction="h2d")}),
        ("host_all_d2h", {"benchmark": "host_all", "params": dict(params, direction="d2h")}),
        ("topology", {"benchmark": "topology", "params": dict(params, iterations=10)}),
    ]
    # Small copies go behind the spin-kernel gate, several per sample: checked, not compared.
    bodies += [
        ("peer_1MiB", {"benchmark": "peer", "params": {"size": "1MiB", "iterations": 5}}),
        ("d2d_64KiB", {"benchmark": "d2d", "devices": "all",
                       "params": {"size": "64KiB", "iterations": 5}}),
        ("host_all_1MiB", {"benchmark": "host_all", "params": {"size": "1MiB",
                                                                "iterations": 5}}),
    ]
    jobs = {}
    for name, body in bodies:
        t0 = time.monotonic()
        j = wait(base, submit(base, body))
        jobs[name] = j
        ok = all_verified(j)
        print(f"{name}: {j['state']}, verified={ok}, {time.monotonic() - t0:.1f} s"
              + ("" if ok else f"  errors: {[p.get('error') for p in j['parts']]}"))
        if not ok:
            failures.append(f"{name} not succeeded with verified data")
    for name in ("topology", "peer", "managed_peer", "host_all_h2d", "host_all_d2h"):
        if name in jobs:
            st, text = http(base, "GET", f"/v1/jobs/{jobs[name]['id']}?format=text")
            (out / f"{name}.txt").write_text(text)
    print()
    print((out / "topology.txt").read_text() if (out / "topology.txt").exists() else "")

    # umd's figure for every reference key, same names.
    umd = {}
    for name, j in jobs.items():
        for p in j["parts"]:
            res = p.get("result") or {}
            for m in res.get("measurements", []):
                key = m["name"]
                if name == "d2d":
                    if key != "copy_engine":
                        continue
                    key = f"d2d@{p['device']}"
                if name.endswith(("_1MiB", "_64KiB")):
                    continue
                if name in ("host_all_d2h", "topology") and not key.startswith("d2d@"):
                    continue  # the reference times h2d and has one peer table (peer's)
                if name == "topology":
                    key = "topology " + key
                umd[key] = m["gbps"]
    lines = [f"{'measurement':<22} {'umd GB/s':>10} {'reference':>10} {'umd/ref':>8}  rule"]
    for key, r in refs.items():
        u = umd.get(key)
        if u is None:
            lines.append(f"{key:<22} {'-':>10} {r:>10.2f} {'-':>8}  missing")
            failures.append(f"{key}: umd has no such measurement")
            continue
        ratio = u / r if r else 0
        held = not key.startswith(NOT_HELD)
        verdict = ("ok" if abs(1 - ratio) <= TOLERANCE else "OVER 2%") if held else "reported"
        if held and abs(1 - ratio) > TOLERANCE:
            failures.append(f"{key}: umd/ref {ratio:.4f}")
        lines.append(f"{key:<22} {u:>10.2f} {r:>10.2f} {ratio:>8.4f}  {verdict}")
    for key in sorted(k for k in umd if k.startswith("topology d2d@")):
        lines.append(f"{key:<22} {umd[key]:>10.2f}  (topology's d2d, same run)")
    table = "\n".join(lines)
    print(table)
    (out / "fidelity.txt").write_text(table + "\n")

    # The canonical health check (no params): each GPU, and every pair on the node worker.
    t0 = time.monotonic()
    hj = wait(base, submit(base, {"benchmark": "health"}))
    jobs["health"] = hj
    print(f"\ncanonical health: {hj['state']} in {time.monotonic() - t0:.1f} s, parts "
          f"{[p['device'] for p in hj['parts']]}")
    for p in hj["parts"]:
        v = p.get("verdict") or {}
        print(f"  {p['device']}: {v.get('verdict')}")
        for c in v.get("checks", []):
            print(f"    {c['verdict']:<5} {c['reason']}")
    node = [p for p in hj["parts"] if p["uuid"] == "node"]
    if not node or (node[0].get("verdict") or {}).get("verdict") != "pass":
        failures.append("the canonical health check's GPU pairs did not pass")
    else:
        print("  links: " + json.dumps(node[0]["result"]["links"]))

    # Isolation: kill GPU 1's worker while GPU 0 and GPU 1 both run a long copy.
    print("\nisolation: a job on GPU 0 while GPU 1's worker is killed")
    long0 = submit(base, {"benchmark": "copy", "device": 0,
                          "params": {"size": "1GiB", "iterations": 200, "warmup": 1}})
    long1 = submit(base, {"benchmark": "copy", "device": 1,
                          "params": {"size": "1GiB", "iterations": 400, "warmup": 1}})
    wait(base, long0, states=("running",))
    wait(base, long1, states=("running",))
    time.sleep(0.5)
    w = workers(args.umd_pid)
    uuid1 = devices[1]["uuid"]
    if uuid1 not in w:
        failures.append(f"no worker for {uuid1}: {w}")
    else:
        os.kill(w[uuid1], signal.SIGKILL)
        print(f"killed worker {w[uuid1]} of GPU 1 ({uuid1})")
    j1, j0 = wait(base, long1), wait(base, long0)
    print(f"GPU 1 job: {j1['state']} ({j1['parts'][0].get('error')}); GPU 0 job: {j0['state']},"
          f" verified={all_verified(j0)}, {j0['parts'][0]['result']['measurements'][0]['gbps']:.2f}"
          " GB/s" if j0["state"] == "succeeded" else f"GPU 0 job: {j0['state']}")
    if not (j1["state"] == "failed" and all_verified(j0)):
        failures.append("GPU 0's job did not survive GPU 1's worker being killed")
    again = wait(base, submit(base, {"benchmark": "copy", "device": 1,
                                     "params": {"size": "64MiB"}}))
    print(f"next job on GPU 1: {again['state']} (a new worker)")
    if again["state"] != "succeeded":
        failures.append("GPU 1 did not come back")

    print("\nisolation: the node worker's job while GPU 1's worker is killed")
    wait(base, submit(base, {"benchmark": "copy", "device": 1, "params": {"size": "64MiB"}}))
    node = submit(base, {"benchmark": "topology",
                         "params": {"size": "1GiB", "iterations": 60, "warmup": 1,
                                    "methods": ["ce"]}})
    wait(base, node, states=("running",))
    time.sleep(0.3)
    w = workers(args.umd_pid)
    if uuid1 in w:
        os.kill(w[uuid1], signal.SIGKILL)
        print(f"killed worker {w[uuid1]} of GPU 1 while the node worker ({w.get('all')}) ran")
    else:
        failures.append(f"GPU 1's worker was not running: {w}")
    nj = wait(base, node)
    print(f"node job: {nj['state']}, verified={all_verified(nj)}")
    if not all_verified(nj):
        failures.append("the node worker's job did not survive GPU 1's worker being killed")
    (out / "multi-gpu-jobs.json").write_text(json.dumps(
        {"jobs": jobs, "isolation": {"gpu0": j0, "gpu1": j1, "node": nj}}, indent=1))
    (out / "health.txt").write_text(http(base, "GET", f"/v1/jobs/{hj['id']}?format=text")[1])

    print("\nFAILURES:\n  " + "\n  ".join(failures) if failures else "\nall checks passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
