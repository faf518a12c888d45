#!/usr/bin/env python3
"""Issue 17's tables from bench/explain-run.sh's JSON lines (bench-driver output): the timed
numbers of um_vs_explicit with and without the explain pass, run alternately in one process;
the counters of each managed mode; the two on-demand kernel shapes; ReadMostly then GPU writes
under both shapes. Usage: bench/explain-table.py DIR (holding um256.jsonl, ondemand.jsonl,
readmostly.jsonl)."""
import json
import statistics
import sys
from pathlib import Path


def load(path):
    return [json.loads(l) for l in Path(path).read_text().splitlines() if l.strip()]


def mib(b):
    return f"{b / 2**20:.0f} MiB" if b >= 2**20 else f"{b / 1024:.0f} KiB"


# The bytes each measurement's pass must move (to the GPU, to the host): kernels/bench_managed.cu
# passes the same to explain_check. Results from before that check get it applied here.
MUST_MOVE = {"managed_on_demand": (1, 0), "gpu_on_demand": (1, 0), "managed_prefetch": (1, 0),
             "prefetch_kernel": (1, 0), "prefetch": (1, 0), "managed_read_mostly": (1, 0),
             "managed_preferred_device": (1, 0), "managed_prefetch_to_host": (0, 1),
             "prefetch_to_host": (0, 1), "managed_cpu_on_demand": (0, 1),
             "cpu_on_demand": (0, 1)}


def check(x, name, size, advice=None):
    """Adds complete / expected_bytes_* to x as explain_check would, where x lacks them."""
    if not x or not x.get("available") or "complete" in x:
        return x
    h, d = MUST_MOVE.get(name, (0, 0))
    if advice in ("read_mostly", "preferred_location_device") and name in ("read", "write"):
        h, d = 1, 0
    x["expected_bytes_htod"], x["expected_bytes_dtoh"] = h * size, d * size
    x["complete"] = (x["bytes_htod"] >= h * size and x["bytes_dtoh"] >= d * size) if h or d else None
    x["complete_checked_by"] = "bench/explain-table.py"
    return x


def counters(x):
    if not x:
        return "-"
    if not x.get("available"):
        return x.get("why", "unavailable")
    done = {True: "complete", False: "INCOMPLETE", None: "n/a"}[x.get("complete")]
    return (f"htod {mib(x['bytes_htod']):>8} in {x['migrations_htod']:>5} x "
            f"{x['mean_migration_htod_bytes'] / 1024:5.1f} KiB | dtoh {mib(x['bytes_dtoh']):>8} "
            f"in {x['migrations_dtoh']:>5} | gpu faults {x['gpu_page_faults']:>5} "
            f"(w {x['gpu_faults_by_access']['write']:>5}) | cpu faults {x['cpu_page_faults']:>5} "
            f"| thrash {x['thrashing_events']:>3} throttle {x['throttling_events']:>2} "
            f"remote {x['remote_map_events']:>2} | pass {x['pass_ms']:7.1f} ms | {done}")


def main():
    d = Path(sys.argv[1])
    um = load(d / "um256.jsonl")
    checked = {}
    for f in ("um256", "ondemand", "readmostly"):
        checked[f] = um if f == "um256" else load(d / f"{f}.jsonl")
        for j in checked[f]:
            for m in j["result"]["measurements"]:
                check(m.get("explain"), m["name"], j["params"]["size"], j["params"].get("advice"))
    print("# umd: issue 17, the explain pass on an H200")
    print("command: bench/explain-run.sh (in a folder holding the device bundle as bundle/), "
          "then bench/explain-table.py on its output (bench/results/explain-h200/)")
    ctx = um[0]["result"]["context"]
    c = ctx.get("conditions", {})
    g = c.get("gpu_before", {})
    print(f"device: {ctx['device_name']} {ctx['device_uuid']}, driver {ctx['driver_version']}, "
          f"runtime {ctx['runtime_version']}, pcie {json.dumps(ctx['pcie'])}")
    print(f"conditions: SM {g.get('sm_clock_mhz')} MHz (max {g.get('max_sm_clock_mhz')}), "
          f"memory {g.get('memory_clock_mhz')} MHz, throttle reasons {g.get('throttle_reasons')}, "
          f"HMM usable: {c.get('hmm', {}).get('could_use_hmm')} ({c.get('hmm', {}).get('why')}), "
          f"nvidia_uvm parameters recorded: {len(c.get('nvidia_uvm') or {})}")
    print()
    size = um[0]["params"]["size"]
    print(f"## um_vs_explicit at {mib(size)}: timed GB/s without (A) and with (B) explain, "
          f"run A B A B in one process ({um[0]['params']['iterations']} samples after "
          f"{um[0]['params']['warmup']} warm-up each)")
    names = [m["name"] for m in um[0]["result"]["measurements"]]
    runs = [{m["name"]: m for m in j["result"]["measurements"]} for j in um]
    flags = ["B" if j["params"].get("explain") else "A" for j in um]
    print(f"{'mode':26} " + " ".join(f"{f + str(i // 2 + 1):>7}" for i, f in enumerate(flags)) +
          f" {'mean A':>7} {'mean B':>7} {'B/A':>6} {'max CV':>6}")
    for n in names:
        g = [r[n]["gbps"] for r in runs]
        a = statistics.mean(x for x, f in zip(g, flags) if f == "A")
        b = statistics.mean(x for x, f in zip(g, flags) if f == "B")
        cv = max(r[n]["stats"]["cv"] for r in runs)
        print(f"{n:26} " + " ".join(f"{x:7.2f}" for x in g) +
              f" {a:7.2f} {b:7.2f} {b / a:6.3f} {cv:6.3f}")
    print()
    print("## um_vs_explicit with explain: what the driver did in each managed mode's untimed pass")
    for i, (j, f) in enumerate(zip(um, flags)):
        if f != "B":
            continue
        print(f"-- explained run {i // 2 + 1}")
        for m in j["result"]["measurements"]:
            if "explain" in m:
                print(f"{m['name']:26} {counters(m['explain'])}")
    print()
    od = checked["ondemand"]
    print("## managed_on_demand at 1 GiB: the two kernel shapes (GPU faults the pages in; "
          "then the CPU touches them back)")
    for j in od:
        p = j["params"]
        for m in j["result"]["measurements"]:
            print(f"{p['kernel']:15} explain={str(p['explain']).lower():5} {m['name']:14} "
                  f"{m['gbps']:6.2f} GB/s (median {m['stats']['median_ms']:8.2f} ms, "
                  f"CV {m['stats']['cv']:.3f})  {counters(m.get('explain')) if p['explain'] else ''}")
    for j in od[:2]:
        print(f"  pattern: {j['result']['context']['kernel_pattern']}")
    print()
    rm = checked["readmostly"]
    print("## managed_advise read_mostly at 256 MiB: GPU reads, then GPU read-modify-writes "
          "(each sample starts from host-resident pages with the advice set again)")
    for j in rm:
        p = j["params"]
        for m in j["result"]["measurements"]:
            print(f"{p['kernel']:15} {m['name']:6} {m['gbps']:6.2f} GB/s (median "
                  f"{m['stats']['median_ms']:9.2f} ms)  {counters(m.get('explain'))}")
        print(f"  pattern: {j['result']['context']['kernel_pattern']}")


    if len(sys.argv) > 2:
        # The explained um_vs_explicit results as checked here, for api/text.c's rendering.
        Path(sys.argv[2]).write_text("\n".join(json.dumps(j) for j in um) + "\n")


if __name__ == "__main__":
    main()
