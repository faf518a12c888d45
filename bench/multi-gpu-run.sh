#!/bin/bash
# One call on the two-GPU machine (nvidia-h200-x2): the gpu suite's list, verify and fidelity
# checks, then the real umd on loopback with both GPUs and bench/multi-gpu.py (every benchmark
# across GPUs through the API, against tests/gpu/reference_multi in the same run, and the
# isolation checks). Programs come from ../shared/tools/device-bundle build-cuda BUNDLE.
#   bench/multi-gpu-run.sh BUNDLE      logs and tables go to $OUT (or ./gpu-out)
set -u
bundle=${1:-.gpu-bundle}
out=${OUT:-gpu-out}
mkdir -p "$out"
export LD_LIBRARY_PATH=$PWD/$bundle/lib
B=$bundle/bin
nvidia-smi topo -m >"$out/nvidia-smi-topo.txt" 2>&1; cat "$out/nvidia-smi-topo.txt"
$B/kernels/umd-worker --list >"$out/umd-worker-list.json" 2>&1
G="python3 tests/gpu/gpu_suite.py --worker $B/kernels/umd-worker --driver $B/tests/gpu/bench-driver --reference $B/tests/gpu/reference"
for t in ${GPU_SUITE_TESTS-list verify fidelity}; do
        timeout 150 $G $t >"$out/gpu-suite-$t.log" 2>&1
        echo "gpu-suite $t rc=$?"; tail -n 4 "$out/gpu-suite-$t.log"
done
state=$(mktemp -d)
$B/umd --listen 127.0.0.1:8470 --state-dir "$state" --worker-path $B/kernels/umd-worker \
        >"$out/umd.log" 2>&1 &
umd=$!
python3 - <<'PY'
import time, urllib.request
for _ in range(150):
    try:
        print(urllib.request.urlopen("http://127.0.0.1:8470/v1/health", timeout=2).read().decode()[:300]); break
    except Exception:
        time.sleep(0.2)
PY
timeout 300 python3 bench/multi-gpu.py --url http://127.0.0.1:8470 --umd-pid $umd \
        --reference-multi $B/tests/gpu/reference_multi --out "$out" --size 256MiB \
        --iterations 20 2>&1 | tee "$out/multi-gpu.txt"
echo "multi-gpu rc=${PIPESTATUS[0]}"
kill -TERM $umd; wait $umd; echo "umd exit $?"
grep -iE "error|warn|crash|node worker" "$out/umd.log" | tail -n 30
