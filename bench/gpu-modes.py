#!/usr/bin/env python3
"""Every host<->device mode umd measures, at one size, as one table.

    bench/gpu-modes.py --driver build/tests/gpu/bench-driver [--reference .../reference]
                       [--size 1GiB] [--iterations 5] [--warmup 2] [--out FILE]

Runs umd's benchmark code through tests/gpu/bench-driver (one warm process, like a worker) and,
with --reference, the plain cudaMemcpyAsync loop at the same size for the fidelity ratios.
Prints: the command, date and machine; one row per mode (GB/s at the median sample, the GB/s
range over the samples, CV, verified); the ratios. Standard library only.
"""
import argparse
import datetime
import json
import platform
import shlex
import subprocess
import sys

# (row label, driver job, measurement name)
MODES = [
    ("copy pinned h2d", "copy direction=h2d", "h2d"),
    ("copy pinned d2h", "copy direction=d2h", "d2h"),
    ("copy pinned bidir (sum)", "copy direction=bidir", "bidir"),
    ("copy pageable h2d", "copy direction=h2d host_memory=pageable", "h2d"),
    ("copy pageable d2h", "copy direction=d2h host_memory=pageable", "d2h"),
    ("copy pageable bidir (sum)", "copy direction=bidir host_memory=pageable", "bidir"),
    ("copy_overlap 4 streams, copy+kernel", "copy_overlap", "overlapped"),
    ("copy_overlap serial copy then kernel", "copy_overlap", "serial"),
    ("zero_copy kernel read", "zero_copy", "read"),
    ("zero_copy kernel read+write (r+w bytes)", "zero_copy", "read_write"),
    ("zero_copy kernel read+write, random pages", "zero_copy access=random", "read_write"),
    ("managed on-demand, GPU faults in", "managed_on_demand", "gpu_on_demand"),
    ("managed on-demand, random pages", "managed_on_demand access=random", "gpu_on_demand"),
    ("managed on-demand, CPU touches back", "managed_on_demand", "cpu_on_demand"),
    ("managed prefetch + kernel", "managed_prefetch", "prefetch_kernel"),
    ("managed prefetch alone", "managed_prefetch", "prefetch"),
    ("managed prefetch to host", "managed_prefetch", "prefetch_to_host"),
    ("managed read_mostly, kernel reads", "managed_advise advice=read_mostly", "read"),
    ("managed read_mostly, kernel writes", "managed_advise advice=read_mostly", "write"),
    ("managed preferred=host, kernel reads", "managed_advise advice=preferred_location_host",
     "read"),
    ("managed preferred=host, kernel writes", "managed_advise advice=preferred_location_host",
     "write"),
    ("managed preferred=device, kernel reads",
     "managed_advise advice=preferred_location_device", "read"),
    ("managed preferred=device, kernel writes",
     "managed_advise advice=preferred_location_device", "write"),
    ("managed accessed_by, kernel reads", "managed_advise advice=accessed_by", "read"),
    ("managed accessed_by, kernel writes", "managed_advise advice=accessed_by", "write"),
    ("system memory (HMM) kernel", "system_memory", "read_write"),
]
LATENCY = ["pinned_h2d", "pinned_d2h", "pageable_h2d", "pageable_d2h", "managed_fault_single",
           "managed_fault_bulk", "managed_resident"]


def sh(cmd):
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=60).stdout.strip()
    except OSError:
        return ""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--driver", required=True)
    ap.add_argument("--reference")
    ap.add_argument("--size", default="1GiB")
    ap.add_argument("--iterations", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--out")
    ap.add_argument("--raw", help="also write the driver's JSON lines here")
    ap.add_argument("--only-um", action="store_true", help="run the um_vs_explicit suite alone")
    ap.add_argument("--um", action="store_true",
                    help="also run the um_vs_explicit suite at this size and print its table")
    a = ap.parse_args()

    common = f" size={a.size} iterations={a.iterations} warmup={a.warmup}"
    jobs = []
    for _, job, _ in MODES:
        if job not in jobs:
            jobs.append(job)
    if a.only_um:
        jobs, a.um = [], True
    names = jobs + ([] if a.only_um else ["latency"]) + (["um_vs_explicit"] if a.um else [])
    cmd = [a.driver] + [j + common for j in jobs] + \
          ([] if a.only_um else [f"latency iterations={a.iterations} warmup={a.warmup}"]) + \
          ([f"um_vs_explicit{common}"] if a.um else [])
    p = subprocess.run(cmd, capture_output=True, text=True)
    lines = [json.loads(l) for l in p.stdout.splitlines() if l.strip()]
    if a.raw:
        with open(a.raw, "w") as f:
            f.write(p.stdout)
    by_job = dict(zip(names, lines))

    out = []
    w = out.append
    w(f"# umd: {'um_vs_explicit' if a.only_um else 'every host<->device mode'} at {a.size}")
    w("command: bench/gpu-modes.py " + " ".join(
        x for x in sys.argv[1:] if not x.startswith(("/", ".gpu-bundle"))))
    w(f"date: {datetime.datetime.now(datetime.timezone.utc).isoformat(timespec='seconds')}")
    gpu = sh(["nvidia-smi", "--query-gpu=name,driver_version,pcie.link.gen.max,"
              "pcie.link.width.max", "--format=csv,noheader"])
    w(f"machine: {platform.node()}, {gpu}")
    ctx = next((l["result"]["context"] for l in lines if l.get("ok")), {})
    if ctx:
        w(f"device: {ctx.get('device_name')} {ctx.get('device_uuid')}, driver "
          f"{ctx.get('driver_version')}, runtime {ctx.get('runtime_version')}, "
          f"pcie {json.dumps(ctx.get('pcie'))}")
    w(f"samples: {a.iterations} timed after {a.warmup} warm-up; GB/s decimal at the median; "
      "range = GB/s at the slowest .. fastest sample")
    w("")
    if not a.only_um:
        w(f"{'mode':44} {'GB/s':>9} {'range GB/s':>19} {'CV':>7}  verified")
        w("-" * 92)
    for label, job, name in ([] if a.only_um else MODES):
        line = by_job.get(job)
        if line is None:
            w(f"{label:44} {'(no result)':>9}")
            continue
        if not line["ok"]:
            w(f"{label:44} {'-':>9} {'':>19} {'':>7}  {line['error']}")
            continue
        m = next(m for m in line["result"]["measurements"] if m["name"] == name)
        st = m["stats"]
        lo = m["bytes"] / (st["max_ms"] * 1e-3) / 1e9
        hi = m["bytes"] / (st["min_ms"] * 1e-3) / 1e9
        w(f"{label:44} {m['gbps']:9.2f} {lo:9.2f} .. {hi:7.2f} {st['cv']:7.4f}  "
          f"{'yes' if m['verified'] else 'NO'}")
    lat = by_job.get("latency")
    if lat and lat["ok"]:
        w("")
        w(f"latency (copy size {lat['params']['size']} B; faults: one word per page, pages "
          "2 MiB apart)")
        w(f"{'measurement':44} {'median us':>9} {'min..max us':>19} {'CV':>7}  verified")
        for name in LATENCY:
            m = next(m for m in lat["result"]["measurements"] if m["name"] == name)
            st = m["stats"]
            w(f"{name:44} {m['latency_us']:9.2f} {st['min_ms'] * 1e3:9.2f} .. "
              f"{st['max_ms'] * 1e3:7.2f} {st['cv']:7.4f}  {'yes' if m['verified'] else 'NO'}")
    elif lat:
        w(f"latency: {lat['error']}")

    um = by_job.get("um_vs_explicit")
    if um and um["ok"]:
        res = um["result"]
        w("")
        w(f"um_vs_explicit: the same {a.size} moved to the GPU and processed once by each mode "
          "(GB/s = size / median time); and back to the host")
        w(f"{'mode':28} {'dir':8} {'GB/s':>9} {'median ms':>10} {'ratio':>8}  source")
        # The ratios are the daemon's (its suite summary, which bench-driver adds too).
        ratio = {x["mode"]: x["ratio_to_pinned"] for x in res["summary"]["modes"]}
        for m in res["measurements"]:
            r = ratio.get(m["name"])
            w(f"{m['name']:28} {m['direction']:8} {m['gbps']:9.2f} {m['time_ms']:10.3f} "
              f"{r if r is not None else float('nan'):8.3f}  {m['source']}")
        w(f"best mode: {res['summary']['best']}")
        w(f"conclusion: {res['summary']['conclusion']}")
    elif um:
        w(f"um_vs_explicit: {um['error']}")

    if a.reference and not a.only_um:
        size = lines[0]["params"]["size"] if lines and lines[0].get("params") else None
        r = subprocess.run([a.reference, "--size", str(size), "--iterations",
                            str(a.iterations), "--warmup", str(a.warmup)],
                           capture_output=True, text=True)
        if r.returncode == 0:
            ref = json.loads(r.stdout)
            w("")
            w("fidelity: umd pinned copy against tests/gpu/reference (plain cudaMemcpyAsync "
              "loop, same size, same run)")
            for d, job in (("h2d", "copy direction=h2d"), ("d2h", "copy direction=d2h")):
                line = by_job.get(job)
                if line and line["ok"]:
                    u = next(m for m in line["result"]["measurements"] if m["name"] == d)["gbps"]
                    w(f"  {d}: umd {u:.2f} GB/s, reference {ref[d + '_gbps']:.2f} GB/s, "
                      f"ratio {u / ref[d + '_gbps']:.4f}")
        else:
            w(f"reference failed: {r.stderr.strip()}")
    text = "\n".join(out) + "\n"
    sys.stdout.write(text)
    if a.out:
        with open(a.out, "w") as f:
            f.write(text)
    return 0 if p.returncode == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
