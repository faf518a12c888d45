#!/bin/bash
# One call on the GPU machine for a session's GPU checks: the named gpu-suite tests, then any
# named bench scripts, each with its output under $OUT. Programs from
# ../shared/tools/device-bundle (.gpu-bundle carried).
#   bench/gpu-run.sh "errors suites" [SCRIPT ARGS...]
# Each test's last lines and its exit status are printed.
set -u
# Everything is written under $OUT/w and packed into $OUT/gpu-run.tgz at the end: the device
# tool brings back at most 8 files.
top=${OUT:-gpu-out}
out=$top/w
mkdir -p "$out"
export LD_LIBRARY_PATH=$PWD/.gpu-bundle/lib
B=.gpu-bundle/bin
progs=(--umd $B/umd --worker $B/kernels/umd-worker --driver $B/tests/gpu/bench-driver
       --reference $B/tests/gpu/reference --xid31 $B/tests/gpu/xid31)
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.free,pcie.link.gen.current,pcie.link.width.current --format=csv; } >"$out/machine.txt" 2>&1
cat "$out/machine.txt"
for t in $1; do
        start=$(date +%s%N)
        timeout 240 python3 tests/gpu/gpu_suite.py "$t" "${progs[@]}" >"$out/gpu-$t.txt" 2>&1
        rc=$?
        # ms from nanoseconds in the shell: the GPU machine has no bc
        echo "=== gpu-$t rc=$rc ($((($(date +%s%N) - start) / 1000000)) ms)" | tee -a "$out/gpu-suite.txt"
        tail -n 12 "$out/gpu-$t.txt" | tee -a "$out/gpu-suite.txt"
done
shift
[ $# -gt 0 ] && OUT=$out "$@"
tar czf "$top/gpu-run.tgz" -C "$top" w && rm -rf "$out"
exit 0
