#!/bin/bash
# The canonical check's set-up on a GPU machine (issue 23, part 6), before and after, side by
# side in one run: the plain-CUDA probe of the set-up steps, then bench-driver's warm `health`
# six times a round from the base build and the new one alternately (two rounds each), then the
# real umd's check through umdctl (bench/umd-health-h200.sh) for each build, then the changed
# benchmarks' medians from each build (their figures must not move). Programs from
# ../shared/tools/device-bundle: the new build in .gpu-bundle, the base build's bin/ copied to
# .gpu-base/bin (same libraries). Output under $OUT (default gpu-out).
#   bench/health-setup-run.sh
set -u
out=${OUT:-gpu-out}
mkdir -p "$out"
export LD_LIBRARY_PATH=$PWD/.gpu-bundle/lib
nvidia-smi --query-gpu=name,uuid,driver_version,memory.used --format=csv,noheader >"$out/probe.txt"
uname -r >>"$out/probe.txt"
.gpu-bundle/bin/health-setup-probe 64 >>"$out/probe.txt" 2>&1

phases() { # bench-driver's JSON lines -> one line a job: wall time, then each sub-run's
        python3 -c '
import json, sys
for l in open(sys.argv[1]):
    j = json.loads(l); r = j.get("result") or {}
    ph = ", ".join("%s %.0f" % (p["benchmark"], p["elapsed_ms"]) for p in r.get("phases", []))
    print("%s wall %.0f ms: %s" % (sys.argv[2], j["wall_ms"], ph if j["ok"] else j["error"]))
' "$1" "$2"
}
for round in 1 2; do
        for build in base new; do
                d=.gpu-bundle/bin
                [ $build = base ] && d=.gpu-base/bin
                $d/tests/gpu/bench-driver health health health health health health \
                        >/tmp/h-$build-$round.jsonl 2>/tmp/h-$build-$round.err
                echo "round $round $build: exit $?"
                phases /tmp/h-$build-$round.jsonl "round $round $build"
        done
done >"$out/driver-phases.txt" 2>&1

OUT=$out/umd-new bash bench/umd-health-h200.sh >/dev/null 2>&1
cp "$out/umd-new/umd-health.txt" "$out/umd-health-new.txt"
OUT=$out/umd-base B=.gpu-base/bin bash bench/umd-health-h200.sh >/dev/null 2>&1
cp "$out/umd-base/umd-health.txt" "$out/umd-health-base.txt"
rm -rf "$out/umd-new" "$out/umd-base"

# What the samples measure must not move: the benchmarks whose set-up changed, from each build
# alternately, two rounds; each line the medians in GB/s.
medians() {
        python3 -c '
import json, sys
for l in open(sys.argv[1]):
    j = json.loads(l)
    ms = (j.get("result") or {}).get("measurements", [])
    print("%s %s: %s" % (sys.argv[2], j["benchmark"] + " " + " ".join(
        "%s=%s" % kv for kv in sorted(j["params"].items()) if kv[0] in ("direction", "host_memory", "advice")),
        ", ".join("%s %.2f" % (m["name"], m["gbps"]) for m in ms) if j["ok"] else j["error"]))
' "$1" "$2"
}
jobs=("copy direction=h2d host_memory=pageable iterations=10"
        "copy direction=d2h host_memory=pageable iterations=10"
        "managed_prefetch iterations=10" "managed_on_demand iterations=10"
        "managed_advise advice=read_mostly iterations=10")
for round in 1 2; do
        for build in base new; do
                d=.gpu-bundle/bin
                [ $build = base ] && d=.gpu-base/bin
                $d/tests/gpu/bench-driver "${jobs[@]}" >/tmp/m-$build-$round.jsonl 2>/dev/null
                medians /tmp/m-$build-$round.jsonl "round $round $build"
        done
done >"$out/same-measurements.txt" 2>&1
