#!/bin/bash
# Issue 60's open SIGFPE (bench-driver, prepared pipeline jobs, docs/design.md): where it dies,
# under cuda-gdb (the GPU machine has no gdb), then which strategy alone reproduces it.
#   OUT=dir bench/pipeline-sigfpe.sh [BUNDLE]
b=${1:-.gpu-bundle}
out=${OUT:-gpu-out}
mkdir -p "$out"
export LD_LIBRARY_PATH=$PWD/$b/lib
D=$b/bin/tests/gpu/bench-driver
M='"managed_prefetch_chunked","managed_prefetch_batch","managed_discard_prefetch","managed_prefetch"'
job="pipeline size=1GiB chunks=16 streams=3 iterations=5 warmup=1 strategies=[\"pinned_overlapped\",$M]"
timeout 150 cuda-gdb -batch -ex 'set pagination off' -ex 'handle SIGFPE stop' -ex run -ex bt \
        -ex 'info registers rip' -ex 'x/6i $pc-12' --args $D "$job" >"$out/sigfpe-gdb.txt" 2>&1
echo "cuda-gdb rc=$?" >>"$out/sigfpe-gdb.txt"
tail -n 40 "$out/sigfpe-gdb.txt"
for s in pinned_overlapped managed_prefetch_chunked managed_prefetch_batch managed_discard_prefetch managed_prefetch; do
        timeout 60 $D "pipeline size=1GiB chunks=16 streams=3 iterations=2 warmup=1 strategies=[\"$s\"]" \
                >>"$out/sigfpe-alone.jsonl" 2>>"$out/sigfpe-alone.err"
        echo "$s rc=$?" | tee -a "$out/sigfpe-alone.err"
done
