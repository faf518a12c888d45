#!/usr/bin/env python3
"""bench-driver's JSON lines (stdin) as a table: job, wall time, GB/s per measurement."""
import json
import sys

for line in sys.stdin:
    try:
        j = json.loads(line)
    except ValueError:
        print(line.rstrip())
        continue
    ms = [(m["name"], round(m.get("gbps") or 0, 1))
          for m in (j.get("result") or {}).get("measurements", [])]
    params = json.dumps(j.get("params"))[:60]
    print(f"{j.get('benchmark')} {params:60} {j.get('wall_ms', 0):8.1f} ms  {ms}"
          + ("" if j.get("ok", True) else f"  ERROR {j.get('error')}"))
