#!/bin/bash
# One call on the GPU machine: the gpu test suite, then the modes table at 64 MiB and 1 GiB.
# Expects the programs gathered by ../shared/tools/device-bundle in .gpu-bundle/ and writes its
# logs and tables under $OUT (or ./gpu-out). Usage: bench/gpu-modes-run.sh [tests|modes|all]
what=${1:-all}
out=${OUT:-gpu-out}
mkdir -p "$out"
export LD_LIBRARY_PATH=$PWD/.gpu-bundle/lib
B=.gpu-bundle/bin
progs=(--worker $B/kernels/umd-worker --driver $B/tests/gpu/bench-driver
       --reference $B/tests/gpu/reference)
nvidia-smi >"$out/nvidia-smi.txt" 2>&1
nvidia-smi -q | grep -iA12 "PCI$" >>"$out/nvidia-smi.txt" 2>&1
if [ "$what" != modes ]; then
  for t in ${TESTS:-list verify limits fidelity sanity suites}; do
    echo "=== gpu-$t" >>"$out/gpu-tests.log"
    timeout 300 python3 tests/gpu/gpu_suite.py "$t" "${progs[@]}" >>"$out/gpu-tests.log" 2>&1
    echo "gpu-$t rc=$?" | tee -a "$out/gpu-tests.log"
  done
  tail -n 60 "$out/gpu-tests.log"
fi
if [ "$what" != tests ]; then
  for s in 64MiB:20:3 1GiB:5:2; do
    IFS=: read -r size it wu <<<"$s"
    timeout 420 python3 bench/gpu-modes.py --driver $B/tests/gpu/bench-driver \
      --reference $B/tests/gpu/reference --size "$size" --iterations "$it" --warmup "$wu" \
      ${UM:+--um} --out "$out/gpu-modes-$size.txt" --raw "$out/raw-$size.jsonl" 2>"$out/modes-$size.err"
    echo "modes $size rc=$?"
  done
fi
