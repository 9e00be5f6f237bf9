#!/usr/bin/env python3
"""Short table of a harness JSON: failed checks, then per GEMM shape the TFLOP/s of each kernel, then attention."""
import json
import sys
from collections import defaultdict

doc = json.load(open(sys.argv[1]))
entries = doc["entries"]
checks = [e for e in entries if "check" in e]
bad = [e for e in checks if not e["ok"]]
print(f"{doc['device']}: {len(checks)} checks, {len(bad)} failed")
for e in bad:
    print("  FAIL", e["check"], e["max_abs"])
worst = defaultdict(float)
for e in checks:
    kernel = e["check"].split()[0]
    worst[kernel] = max(worst[kernel], e["max_abs"])
print("  worst max_abs per kernel: " + ", ".join(f"{k} {v:.1e}" for k, v in sorted(worst.items())))
shapes = defaultdict(dict)
kernels = []
for e in entries:
    if e.get("bench") == "gemm":
        shapes[(e["M"], e["N"], e["K"])][e["kernel"]] = e["tflops"]
        if e["kernel"] not in kernels:
            kernels.append(e["kernel"])
short = [k.replace("gemm_", "") for k in kernels]
widths = [max(10, len(k)) for k in short]
print("GEMM TFLOP/s      " + " ".join(f"{k:>{w}}" for k, w in zip(short, widths)))
for (m, n, k), row in shapes.items():
    print(f"{m:>6}x{n:>5}x{k:>5} " + " ".join(f"{row[x]:>{w}.1f}" if x in row else " " * (w - 1) + "-"
                                          for x, w in zip(kernels, widths)))
for e in entries:
    if e.get("bench") == "attention":
        mask = f" mask{e['mask']}" if "mask" in e else ""
        print(f"attention {e['kernel']:>32} B{e['B']:<3} S{e['S']:<4}{mask} {e['ms']:8.4f} ms {e['tflops']:6.1f} TFLOP/s")
