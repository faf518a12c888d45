#!/bin/bash
# One call on the GPU machine: start the real umd (bundled by ../shared/tools/device-bundle into
# .gpu-bundle/) on loopback with the real GPU, then measure through its API with
# bench/umd-e2e.py. Logs and tables go to $OUT (or ./gpu-out).
set -u
out=${OUT:-gpu-out}
mkdir -p "$out"
export LD_LIBRARY_PATH=$PWD/.gpu-bundle/lib
B=.gpu-bundle/bin
state=$(mktemp -d)
$B/kernels/umd-worker --list >"$out/umd-worker-list.json" 2>"$out/umd-worker-list.err"
echo "umd-worker --list rc=$?"; cat "$out/umd-worker-list.json" "$out/umd-worker-list.err"
$B/umd --listen 127.0.0.1:8470 --state-dir "$state" --worker-path $B/kernels/umd-worker \
        >"$out/umd.log" 2>&1 &
umd=$!
for _ in $(seq 100); do curl -sf localhost:8470/v1/health >/dev/null 2>&1 && break; sleep 0.2; done
curl -s localhost:8470/v1/health; echo
e2e() { timeout "$1" python3 bench/umd-e2e.py --url http://127.0.0.1:8470 "${@:2}"; echo "rc=$?"; }
e2e 200 --size 64MiB --iterations 20 --warmup 3 --what health --health-runs 5 \
        --cold-reference $B/tests/gpu/reference | tee "$out/umd-e2e-health.txt"
e2e 200 --size 64MiB --iterations 20 --warmup 3 --what modes,um | tee "$out/umd-e2e-64MiB.txt"
e2e 300 --size 1GiB --iterations 5 --warmup 1 --what modes,um | tee "$out/umd-e2e-1GiB.txt"
kill -TERM $umd; wait $umd; echo "umd exit $?"
tail -n 30 "$out/umd.log"
