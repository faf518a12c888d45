#!/bin/bash
# Device run: optionally the gpu suite (GPU_TESTS), then bench/store/run for each build named in
# BUILDS (label=dir, in order), STORE_BENCH_WAL_SECONDS=${WAL:-30}, 10,000 jobs.
set -u
start=$(date +%s)
export LD_LIBRARY_PATH=$PWD/.gpu-bundle/lib PYTHONPATH=$PWD/.gpu-bundle/py PATH=$PWD/.gpu-bundle/xbin:$PATH
B=.gpu-bundle/bin
left() { echo $(( ${LIMIT:-580} - ($(date +%s) - start) )); }
o=$OUT/${TAG:-run}; mkdir -p $o
{ date -u; hostname; nproc; uptime; nvidia-smi --query-gpu=name,driver_version,memory.used,memory.total --format=csv; nvidia-smi --query-compute-apps=pid,name,used_memory --format=csv; } > $o/host.txt 2>&1
cat $o/host.txt
for t in ${GPU_TESTS:-}; do
  l=$(left); [ $l -gt 60 ] || { echo "skip gpu $t: $l s left"; continue; }
  echo "== gpu $t $(date -u +%T)"
  timeout $((l-30)) python3 tests/gpu/gpu_suite.py $t --umd $B/umd --worker $B/kernels/umd-worker \
    --driver $B/tests/gpu/bench-driver --reference $B/tests/gpu/reference > $o/gpu-$t.txt 2>&1
  echo "gpu $t rc=$?"; tail -2 $o/gpu-$t.txt
done
[ -n "${GPU_TESTS:-}" ] && { nvidia-smi --query-compute-apps=pid,name,used_memory --format=csv > $o/compute-apps-after.txt 2>&1; cat $o/compute-apps-after.txt; }
for spec in ${BUILDS:-new=$B}; do
  label=${spec%%=*}; dir=${spec#*=}; args=""
  case $label in *-t[0-9]*) args="--http-threads ${label##*-t}";; esac
  l=$(left); [ $l -gt 170 ] || { echo "skip store run $label: $l s left"; continue; }
  echo "== store run $label $(date -u +%T)"
  UMD_BIN=$dir/umd UMD_WORKER=$dir/kernels/umd-worker STORE_BENCH_ARGS="$args" STORE_BENCH_JOBS=10000 STORE_BENCH_WAL_SECONDS=${WAL:-30} \
    STORE_BENCH_RESULTS=$o/RESULTS-$label.md timeout $((l-10)) python3 bench/store/run > $o/store-run-$label.txt 2>&1
  echo "store run $label rc=$?"; grep -E "CPU per job|WAL peak during|second ratio|durable submits, [0-9]+ s" $o/RESULTS-$label.md
done
echo "done $(date -u +%T), $(left) s left"
