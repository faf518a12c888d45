#!/bin/bash
# The last check of a session on the GPU machine: the gpu suite's list, fidelity and sanity
# checks, then the real umd through its API: the supervisor's lifecycle on the real CUDA path
# and the warm health job's end-to-end time. Programs from ../shared/tools/device-bundle.
set -u
out=${OUT:-gpu-out}
mkdir -p "$out"
export LD_LIBRARY_PATH=$PWD/.gpu-bundle/lib
B=.gpu-bundle/bin
progs=(--worker $B/kernels/umd-worker --driver $B/tests/gpu/bench-driver --reference $B/tests/gpu/reference)
for t in list fidelity sanity; do
        timeout 200 python3 tests/gpu/gpu_suite.py "$t" "${progs[@]}" 2>&1 | tail -n 8
        echo "gpu-$t rc=${PIPESTATUS[0]}"
done
state=$(mktemp -d)
$B/umd --listen 127.0.0.1:8470 --state-dir "$state" --worker-path $B/kernels/umd-worker \
        >"$out/umd-final.log" 2>&1 &
umd=$!
for _ in $(seq 100); do curl -sf localhost:8470/v1/health >/dev/null 2>&1 && break; sleep 0.2; done
timeout 200 python3 bench/umd-e2e.py --url http://127.0.0.1:8470 --what lifecycle,health \
        --health-runs 5 --cold-reference $B/tests/gpu/reference | tee "$out/umd-final-check.txt"
kill -TERM $umd; wait $umd; echo "umd exit $?"
grep -E "timed out|killed|exited|cancel" "$out/umd-final.log" | tail -n 8
