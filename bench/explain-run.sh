#!/bin/bash
# Issue 17's GPU run (bench/explain-h200.txt): bench-driver (one warm process per group) with
# and without the explain pass, then the real umd: um_vs_explicit with explain through HTTP and
# its text view. Put this script beside the programs gathered by
#   ../shared/tools/device-bundle build-cuda DIR/bundle   (plus libcupti.so.13 in DIR/bundle/lib
#   when the GPU machine's toolkit lacks it; the H200 machine has it in /usr/local/cuda/lib64)
# and run DIR/explain-run.sh there; it writes to $OUT. Then, here:
#   bench/explain-table.py OUT [checked.jsonl]; bench/explain-text.c renders checked.jsonl.
# The device tool brings back at most 8 files from $OUT: the umd part's three files were left
# out of the committed run (the job succeeded, as the command's output showed).
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=$PWD/bundle/lib
out=${OUT:-out}; mkdir -p "$out"
B=bundle/bin
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv >"$out/machine.txt" 2>&1
run() { # name timeout jobs...
  local name=$1 t=$2; shift 2
  local s=$SECONDS
  timeout "$t" $B/tests/gpu/bench-driver --device 0 "$@" >"$out/$name.jsonl" 2>"$out/$name.err"
  echo "$name rc=$? $((SECONDS - s)) s" | tee -a "$out/runs.txt"
}
U="um_vs_explicit size=256MiB iterations=5 warmup=1"
run um256 150 "$U" "$U explain=true" "$U" "$U explain=true"
O="managed_on_demand size=1GiB iterations=5 warmup=1"
run ondemand 60 "$O explain=true" "$O kernel=warp_per_chunk explain=true" "$O" "$O kernel=warp_per_chunk"
R="managed_advise advice=read_mostly size=256MiB warmup=1"
run readmostly 80 "$R iterations=3 explain=true" "$R iterations=2 kernel=warp_per_chunk explain=true"
state=$(mktemp -d)
$B/umd --listen 127.0.0.1:8470 --state-dir "$state" --worker-path $B/kernels/umd-worker >"$out/umd.log" 2>&1 &
umd=$!
timeout 60 python3 - "$out" <<'PY'
import json, sys, time, urllib.request
out = sys.argv[1]
base = "http://127.0.0.1:8470"
for _ in range(100):
    try:
        urllib.request.urlopen(base + "/v1/health", timeout=2); break
    except Exception as e:
        if getattr(e, "code", 0) == 503: break
        time.sleep(0.2)
body = json.dumps({"benchmark": "um_vs_explicit", "device": 0,
                   "params": {"size": "64MiB", "iterations": 3, "warmup": 1, "explain": True}}).encode()
req = urllib.request.Request(base + "/v1/jobs", data=body, method="POST",
                             headers={"Content-Type": "application/json"})
with urllib.request.urlopen(req) as r:
    loc = r.headers["Location"]
while True:
    job = json.load(urllib.request.urlopen(base + loc))
    if job["state"] not in ("queued", "running"): break
    time.sleep(0.5)
open(out + "/umd-um-explain.json", "w").write(json.dumps(job, indent=1))
open(out + "/umd-um-explain.txt", "w").write(urllib.request.urlopen(base + loc + "?format=text").read().decode())
print("umd job", job["state"])
PY
echo "umd e2e rc=$?" | tee -a "$out/runs.txt"
kill -TERM $umd; wait $umd
