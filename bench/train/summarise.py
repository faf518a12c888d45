#!/usr/bin/env python3
"""bench/train/summarise.py OUT: the tables bench/results/train-*/README.md quotes, from what
bench/train/run wrote: each train_step's placement matrix (first / steady step against all in
device memory) beside the plain reference's all-device step, each embedding_gather's factors
and planner block beside the plain reference's HBM and host-mapped gathers."""
import glob
import json
import os
import sys


def lines(path):
    with open(path) as f:
        return [json.loads(x) for x in f if x.strip()]


def train(out):
    refs = lines(os.path.join(out, "ref_train.json"))
    for name in ("train_mlp", "train_tf"):
        path = os.path.join(out, name + ".json")
        if not os.path.exists(path) or not lines(path):
            print(f"## {name}: no result")
            continue
        job = lines(path)[0]
        if not job["ok"]:
            print(f"## {name}: {job['error']}")
            continue
        res = job["result"]
        ctx = res["context"]
        pm = res["placement_matrix"]
        ref = pm["reference"]
        mine = [r for r in refs if r["shape"] == ctx["shape"]]
        print(f"## train_step {ctx['shape']} batch {ctx['batch']} hidden {ctx['hidden']} "
              f"layers {ctx['layers']} ({ctx['gemms']} GEMMs, "
              f"{ctx['flops_per_step'] / 1e9:.1f} GFLOP a step)\n")
        print(f"all-device: first {ref['first_step_ms']:.3f} ms, steady {ref['steady_step_ms']:.3f}"
              f" ms; plain reference_train steady " +
              ", ".join(f"{r['steady_step_ms']:.3f}" for r in mine) + " ms\n")
        pls = pm["placements"]
        print("| class | " + " | ".join(pls) + " |")
        print("|---|" + "---|" * len(pls))
        for row in pm["rows"]:
            cells = [row["cells"].get(p) for p in pls]
            print(f"| {row['class']} | " + " | ".join(
                f"{c['first_vs_device']:.2f}x / {c['steady_vs_device']:.2f}x" if c else "-"
                for c in cells) + " |")
        print(f"\nfree: {', '.join(pm['free']) or 'none'}\n\n{pm['conclusion']}\n")


def embed(out):
    refs = lines(os.path.join(out, "ref_embed.json"))
    for path in sorted(glob.glob(os.path.join(out, "embed_*.json"))):
        ls = lines(path)
        if not ls or not ls[0]["ok"]:
            print(f"## {os.path.basename(path)}: {ls[0]['error'] if ls else 'no result'}")
            continue
        res = ls[0]["result"]
        ctx = res["context"]
        e = res["embedding"]
        mine = [r for r in refs if r["row_bytes"] == ctx["row_bytes"] and
                r["zipf_x100"] == round(ctx["zipf_exponent"] * 100)]
        ms = {m["name"]: m for m in res["measurements"]}
        print(f"## embedding_gather {ctx['rows']} rows x {ctx['row_bytes']} B, zipf "
              f"{ctx['zipf_exponent']}, {ctx['lookups']} lookups\n")
        print("plain reference_embed: device " +
              ", ".join(f"{r['device_ms']:.4f}" for r in mine) + " ms; host_mapped " +
              ", ".join(f"{r['host_mapped_ms']:.4f}" for r in mine) + f" ms; umd "
              f"{ms['device']['stats']['median_ms']:.4f} / "
              f"{ms['host_mapped']['stats']['median_ms']:.4f} ms\n")
        print("| strategy | M rows/s | GB/s | x HBM time |\n|---|---|---|---|")
        for f in e["factors"]:
            extra = ""
            m = ms[f["strategy"]]
            if "hit_rate" in m:
                extra = f" (hit rate {m['hit_rate']:.2f})"
            print(f"| {f['strategy']}{extra} | {f['rows_per_s'] / 1e6:.1f} | {f['gbps']:.2f} | "
                  f"{f['factor_vs_device']:.2f} |")
        pl = e["planner"]
        print("\n| planner | measured | TorchRec | measured / TorchRec |\n|---|---|---|---|")
        for k, label in (("hbm_gbps", "HBM GB/s"), ("host_memory_gbps", "host memory GB/s"),
                         ("pcie_gbps", "PCIe GB/s"), ("uvm_lookup_gbps", "UVM lookup GB/s"),
                         ("uvm_factor", "UVM lookup / HBM")):
            a, b = pl["measured"].get(k), pl["torchrec"].get(k)
            r = a / b if a and b else None
            fmt = lambda v: f"{v:.4g}" if isinstance(v, (int, float)) else "-"
            print(f"| {label} | {fmt(a)} | {fmt(b)} | {fmt(r)} |")
        print()


if __name__ == "__main__":
    out = sys.argv[1]
    with open(os.path.join(out, "node.txt")) as f:
        print("```\n" + f.read().strip() + "\n```\n")
    train(out)
    embed(out)
