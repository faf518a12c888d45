#!/bin/bash
# The real umd's canonical check on a GPU machine (issue 24): the quick tier three times and the
# extended tier twice through umdctl, each timed from umdctl's start, then whether the GPU holds
# anything of umd's once the worker's idle timeout has passed. Programs from
# ../shared/tools/device-bundle; output under $OUT (default gpu-out).
#   bench/umd-health-h200.sh
set -u
out=${OUT:-gpu-out}
mkdir -p "$out"
export LD_LIBRARY_PATH=$PWD/.gpu-bundle/lib
B=${B:-.gpu-bundle/bin}
state=$(mktemp -d)
printf '[umd]\nworker_idle_s = 5\npool_idle_s = 2\n' >"$state/umd.conf"
# The bundle's libraries are umd's: the system curl keeps its own.
curl() { env -u LD_LIBRARY_PATH curl "$@"; }
$B/umd --config "$state/umd.conf" --listen 127.0.0.1:8470 --state-dir "$state/s" \
        --worker-path $B/kernels/umd-worker >"$out/umd.log" 2>&1 &
umd=$!
for _ in $(seq 100); do curl -sf localhost:8470/v1/health >/dev/null 2>&1 && break; sleep 0.2; done
ms() { echo $(( ($(date +%s%N) - $1) / 1000000 )); }
{
        for i in 1 2 3; do
                t=$(date +%s%N); $B/client/umdctl health >"$out/quick-$i.txt" 2>&1; rc=$?
                echo "umdctl health             rc=$rc $(ms $t) ms"
        done
        for i in 1 2; do
                t=$(date +%s%N); $B/client/umdctl health --extended >"$out/extended-$i.txt" 2>&1
                rc=$?
                echo "umdctl health --extended  rc=$rc $(ms $t) ms"
        done
        echo "warm after the checks: $(curl -s localhost:8470/v1/devices |
                python3 -c 'import json,sys; print([d["warm"] for d in json.load(sys.stdin)])')"
        sleep 9
        echo "warm 9 s later (worker_idle_s = 5): $(curl -s localhost:8470/v1/devices |
                python3 -c 'import json,sys; print([d["warm"] for d in json.load(sys.stdin)])')"
        echo "nvidia-smi compute apps 9 s later: [$(nvidia-smi --query-compute-apps=pid,name,used_memory --format=csv,noheader)]"
        curl -s "localhost:8470/v1/jobs?limit=10" | python3 -c '
import json, sys, urllib.request
for j in json.load(sys.stdin)["jobs"]:
    j = json.load(urllib.request.urlopen("http://127.0.0.1:8470/v1/jobs/" + j["id"]))
    r = j["parts"][0].get("result") or {}
    ph = ", ".join("%s %.0f" % (p["benchmark"], p["elapsed_ms"]) for p in r.get("phases", []))
    print(j["benchmark"], r.get("tier", "quick"), j["state"], "phases (ms):", ph)'
} | tee "$out/umd-health.txt"
kill -TERM $umd; wait $umd; echo "umd exit $?"
