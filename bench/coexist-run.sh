#!/bin/bash
# One call on the GPU machine (issue 10): the gpu suite's coexist test against the real umd,
# where the canonical health check spends its time (each of its modes alone, warm, through
# bench-driver), then bench/coexist.py. Needs the bundle from ../shared/tools/device-bundle.
# Logs and tables go to $OUT (or ./gpu-out).
set -u
out=${OUT:-gpu-out}
mkdir -p "$out"
export LD_LIBRARY_PATH=$PWD/.gpu-bundle/lib
B=.gpu-bundle/bin
nvidia-smi --query-gpu=name,pci.bus_id,compute_mode,pcie.link.gen.current,pcie.link.width.current --format=csv
echo "== gpu suite: coexist"
python3 tests/gpu/gpu_suite.py coexist --umd $B/umd --worker $B/kernels/umd-worker \
        --driver $B/tests/gpu/bench-driver --reference $B/tests/gpu/reference 2>"$out/coexist.err" \
        | tee "$out/gpu-coexist.txt"
echo "gpu-coexist rc=${PIPESTATUS[0]}"; tail -20 "$out/coexist.err"
echo "== health modes alone (warm, one process; wall_ms per job)"
$B/tests/gpu/bench-driver "health" "health" "health iterations=5" \
        "copy direction=h2d size=64MiB iterations=10" "copy direction=d2h size=64MiB iterations=10" \
        "copy direction=h2d host_memory=pageable size=64MiB iterations=10" \
        "managed_prefetch size=64MiB iterations=10" "latency size=4 repeats=20 pages=8" \
        2>&1 | python3 bench/driver-table.py | tee "$out/health-modes.txt"
echo "== bench/coexist.py"
state=$(mktemp -d)
$B/umd --listen 127.0.0.1:8470 --state-dir "$state" --worker-path $B/kernels/umd-worker \
        --devices 0 >"$out/umd.log" 2>&1 &
umd=$!
for _ in $(seq 100); do curl -sf localhost:8470/v1/health >/dev/null 2>&1 && break; sleep 0.2; done
timeout 300 python3 bench/coexist.py --url http://127.0.0.1:8470 --reference $B/tests/gpu/reference \
        --runs 5 | tee "$out/coexist.txt"
echo "coexist.py rc=${PIPESTATUS[0]}"
kill -TERM $umd; wait $umd; echo "umd exit $?"
tail -n 15 "$out/umd.log"
