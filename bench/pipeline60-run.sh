#!/bin/bash
# Issue 60 on the GPU machine, one call: what umd's managed chunked prefetch pays against a plain
# program (tests/gpu/reference_pipeline --managed 1: every issue shape after every reset), umd's
# managed strategies issued both ways, each comparison twice, then the pipeline with the host
# writing each batch (one writer and eight). Writes under $OUT (or ./gpu-out).
#   bench/pipeline60-run.sh [BUNDLE] [experiment|confirm]
# confirm: one round with the defaults (chunk_issue auto: pinned copies on the copy stream,
# managed prefetches round robin), the reference beside it, and each job's sentence; about 100 s
# on an H100 (the experiment's jobs took 11-12.5 s each prepared, 26 s and 14 s host_written,
# and a reference run about 15 s).
b=${1:-.gpu-bundle}
what=${2:-experiment}
out=${OUT:-gpu-out}
mkdir -p "$out"
export LD_LIBRARY_PATH=$PWD/$b/lib
R=$b/bin/tests/gpu/reference_pipeline
D=$b/bin/tests/gpu/bench-driver
{ date -u; nvidia-smi; nvidia-smi --query-gpu=name,memory.free,pcie.link.gen.current,pcie.link.width.current --format=csv; } >"$out/machine.txt" 2>&1
M='"managed_prefetch_chunked","managed_prefetch_batch","managed_discard_prefetch","managed_prefetch"'
A='"pinned_serial","pinned_overlapped","pageable_serial","managed_on_demand","managed_prefetch","managed_prefetch_chunked","zero_copy","managed_prefetch_batch","managed_discard_prefetch"'
managed_round() {
  for c in 16 64; do
    echo "=== round $1 chunks $c: reference" >>"$out/reference.txt"
    timeout 60 $R --size 1073741824 --chunks $c --streams 3 --iterations 3 --warmup 1 --managed 1 >>"$out/reference.txt" 2>&1
    echo "rc=$?" >>"$out/reference.txt"
    jobs=()
    if [ "$what" = experiment ]; then
      for iss in copy_stream round_robin; do
        jobs+=("pipeline size=1GiB chunks=$c streams=3 iterations=5 warmup=1 chunk_issue=$iss strategies=[\"pinned_overlapped\",$M]")
      done
    else
      jobs+=("pipeline size=1GiB chunks=$c streams=3 iterations=5 warmup=1 strategies=[\"pinned_overlapped\",$M]")
    fi
    timeout 60 $D "${jobs[@]}" >>"$out/umd-managed.jsonl" 2>>"$out/driver.err"
    echo "round $1 chunks $c driver rc=$?" >>"$out/driver.err"
  done
}
written() {
  timeout 80 $D "pipeline size=1GiB batch=host_written writers=$1 iterations=2 warmup=1 steps=3 strategies=[$A]" >>"$out/umd-written.jsonl" 2>>"$out/driver.err"
  echo "written writers=$1 driver rc=$?" >>"$out/driver.err"
}
managed_round 1
written 1
[ "$what" = experiment ] && managed_round 2
written 8
cat "$out/reference.txt"; tail -c 2000 "$out/driver.err"
python3 - "$out" <<'PY'
import json, sys, os
for f in ("umd-managed.jsonl", "umd-written.jsonl"):
    p = os.path.join(sys.argv[1], f)
    if not os.path.exists(p): continue
    for l in open(p):
        j = json.loads(l); r = j.get("result") or {}
        ms = {m["name"]: m for m in r.get("measurements", [])}
        def med(n): return (ms.get(n) or {}).get("stats", {}).get("median_ms")
        lim = max(med("copy_alone") or 0, med("kernel_alone") or 0, med("host_write") or 0)
        pr = j["params"]
        print(f, pr.get("chunks"), pr.get("chunk_issue"), pr.get("batch"), pr.get("writers"), "err:", j.get("error"),
              "limit %.2f" % lim, " ".join("%s=%.2f(%.3fx)%s%s" % (n, med(n), med(n) / lim if lim else 0,
              (" hw=%.1f" % m["host_write_ms"]) if m.get("host_write_ms") is not None else "",
              (" " + m["chunk_issue"]) if m.get("chunk_issue") else "")
              for n, m in ms.items() if med(n) is not None))
        print("  ", (r.get("summary") or {}).get("conclusion"))
PY
