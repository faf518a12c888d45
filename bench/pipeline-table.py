#!/usr/bin/env python3
"""The pipeline_sweep's result as Markdown tables: step time (ms) per strategy at each
intensity with the limit, and the touched sweep (where Unified Memory wins).
  bench/pipeline-table.py bench/results/pipeline-h200/pipeline-sweep.jsonl"""
import json
import sys

for line in open(sys.argv[1]):
    job = json.loads(line)
    s = (job.get("result") or {}).get("summary")
    if not s:
        continue
    points = sorted(s["points"], key=lambda p: p["intensity"])
    names = [x["strategy"] for x in points[0]["strategies"]]
    print("| FMAs a float | copy ms | kernel ms | limit ms | " + " | ".join(names) + " |")
    print("|---" * (4 + len(names)) + "|")
    for p in points:
        by = {x["strategy"]: x for x in p["strategies"]}
        cells = [f"{by[n]['median_ms']:.2f} ({by[n]['ratio_to_limit']:.2f}x)" if n in by else "-"
                 for n in names]
        mark = " (balanced)" if p["intensity"] == s.get("balanced_intensity") else ""
        print(f"| {p['intensity']}{mark} | {p['copy_ms']:.2f} | {p['kernel_ms']:.2f} | "
              f"{p['limit_ms']:.2f} | " + " | ".join(cells) + " |")
    t = s.get("touched") or {}
    rows = t.get("points") or []
    if rows:
        print()
        keys = [k for k in rows[0] if k not in ("touched_bytes", "fraction")]
        print("| touched | share | " + " | ".join(keys) + " |")
        print("|---" * (2 + len(keys)) + "|")
        for r in rows:
            vals = " | ".join(f"{r[k]:.3f}" if isinstance(r[k], float) else str(r[k]) for k in keys)
            print(f"| {r.get('touched_bytes')} | {100 * r.get('fraction', 0):.3f}% | {vals} |")
    print()
    print(s["conclusion"])
