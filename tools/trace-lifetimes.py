#!/usr/bin/env python3
"""Reads allocation traces (the CSV of GET /actuator/gpupool/{device}/trace, written by LoadDriver's
--allocation-trace) and prints, per trace: the peak of live requested bytes and what was live then, and per
size band the count and the allocate-to-free time (median, p90, p99) of the blocks.

    python3 tools/trace-lifetimes.py A-trace-cuda_0.csv B-trace-cuda_0.csv [--json OUT.json]

Blocks still live at the end of the trace (or allocated before it started) are left out of the lifetimes;
the peak counts only blocks allocated within the trace."""
import csv, json, sys

BANDS = [(0, 1 << 20, "< 1 MiB"), (1 << 20, 8 << 20, "1-8 MiB"), (8 << 20, 32 << 20, "8-32 MiB"),
         (32 << 20, 64 << 20, "32-64 MiB"), (64 << 20, 1 << 62, ">= 64 MiB")]


def seconds(text):
    if ":" not in text:
        return int(text) / 1e9
    h, m, s = text.split(":")
    return int(h) * 3600 + int(m) * 60 + float(s)


def pct(values, q):
    if not values:
        return None
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def analyse(path):
    live = {}            # pointer -> (start, size, stream)
    lifetimes = {band[2]: [] for band in BANDS}
    current = peak = 0
    peak_at = None
    peak_live = []
    with open(path) as f:
        for row in csv.DictReader(f):
            t, action, pointer, size = seconds(row["Time"]), row["Action"], row["Pointer"], int(row["Size"])
            if action == "allocate":
                live[pointer] = (t, size, row["Stream"])
                current += size
                if current > peak:
                    peak, peak_at = current, t
                    peak_live = sorted((s for (_, s, _) in live.values()), reverse=True)
            elif action == "free" and pointer in live:
                start, size, _ = live.pop(pointer)
                current -= size
                for low, high, name in BANDS:
                    if low <= size < high:
                        lifetimes[name].append((t - start) * 1000)
    mib = 1 << 20
    bands = {name: {"blocks": len(v), "median_ms": pct(v, 0.5), "p90_ms": pct(v, 0.9), "p99_ms": pct(v, 0.99)}
             for name, v in lifetimes.items()}
    return {"trace": path, "peak_live_mib": peak / mib,
            "live_at_peak_mib": [round(s / mib, 1) for s in peak_live if s >= mib],
            "bands": bands}


def main(argv):
    out = None
    if "--json" in argv:
        i = argv.index("--json")
        out = argv[i + 1]
        argv = argv[:i] + argv[i + 2:]
    results = [analyse(p) for p in argv]
    for r in results:
        print(f"{r['trace']}: peak live {r['peak_live_mib']:.0f} MiB (traced blocks); blocks >= 1 MiB live then: "
              f"{r['live_at_peak_mib']}")
        for name, b in r["bands"].items():
            if b["blocks"]:
                print(f"   {name:10s} {b['blocks']:6d} blocks  allocate-to-free median {b['median_ms']:.2f} ms"
                      f"  p90 {b['p90_ms']:.2f}  p99 {b['p99_ms']:.2f}")
    if out:
        with open(out, "w") as f:
            json.dump(results, f, indent=2)


if __name__ == "__main__":
    main(sys.argv[1:])
