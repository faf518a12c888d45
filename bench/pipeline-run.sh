#!/bin/bash
# Issue 21 on the GPU machine, one call: the plain reference program (the fidelity yardstick and
# the copy_overlap diagnosis), then umd's pipeline at the 1 GiB defaults, copy_overlap and
# um_vs_explicit at 1 GiB, and the pipeline_sweep suite, all through bench-driver (umd's
# benchmark code in one process, no daemon). Writes under $OUT (or ./gpu-out).
#   bench/pipeline-run.sh [quick|full|sweep]
# full: the reference, pipeline at the defaults and four variants, copy_overlap, um_vs_explicit,
# then gpu_suite.py pipeline (the targets); sweep: pipeline_sweep at 1 GiB alone (a few
# minutes: each of its ~14 points is a whole pipeline run). Each fits one 10-minute call.
# Expects ../shared/tools/device-bundle's .gpu-bundle/ in the working tree.
what=${1:-full}
out=${OUT:-gpu-out}
mkdir -p "$out"
export LD_LIBRARY_PATH=$PWD/.gpu-bundle/lib
B=.gpu-bundle/bin
D=$B/tests/gpu/bench-driver
nvidia-smi >"$out/machine.txt" 2>&1
nvidia-smi -q | grep -iA12 "PCI$" >>"$out/machine.txt" 2>&1
[ "$what" = sweep ] || {
  echo "=== reference_pipeline --size 1073741824 (balanced)"
  timeout 120 $B/tests/gpu/reference_pipeline --size 1073741824 --iterations 5
  echo "rc=$?"
} >"$out/reference.txt" 2>&1
jobs=("pipeline" "copy_overlap size=1GiB iterations=5")
case $what in
full)
  jobs+=("pipeline streams=2" "pipeline chunks=16" "pipeline chunks=256"
         "pipeline weights=1GiB writeback=256MiB strategies=[\"pinned_serial\",\"pinned_overlapped\",\"managed_on_demand\",\"managed_prefetch_chunked\"]"
         "um_vs_explicit") ;;
sweep) jobs=("pipeline_sweep") ;;
*) jobs+=("pipeline_sweep size=64MiB iterations=2 warmup=1 steps=2 min_touched=4MiB") ;;
esac
timeout 400 $D "${jobs[@]}" >"$out/pipeline-$what.jsonl" 2>"$out/driver.err"
echo "driver rc=$?" >>"$out/driver.err"
if [ "$what" = full ]; then
  # the targets as a test: overlapped within 1.03x of the limit, >= 1.8x serial,
  # fidelity against reference_pipeline within 2%, copy_overlap/um_vs_explicit not a loss
  timeout 180 python3 tests/gpu/gpu_suite.py pipeline --worker $B/kernels/umd-worker \
    --driver $D --reference $B/tests/gpu/reference >"$out/gpu-pipeline.txt" 2>&1
  echo "gpu-pipeline rc=$?" >>"$out/gpu-pipeline.txt"
  cat "$out/gpu-pipeline.txt"
fi
tail -c 3000 "$out/driver.err"
[ -f "$out/reference.txt" ] && cat "$out/reference.txt"
# the summaries' sentences, one a job
python3 -c 'import json,sys
for l in open(sys.argv[1]):
    j = json.loads(l); s = (j.get("result") or {}).get("summary") or {}
    print(j["benchmark"], j["params"].get("streams"), j["params"].get("chunks"), "|", s.get("conclusion") or j.get("error"))' "$out/pipeline-$what.jsonl"
