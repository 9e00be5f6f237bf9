#!/usr/bin/env python3
"""Prints the BERT-base comparison table (markdown) from the JSON files tools/bert-vs-torch.sh writes.

  python3 tools/bert_vs_torch_table.py TORCH_JSON GPUPOOL_JSON [MORE_TORCH_JSON ...]

Torch rows are eager unless they carry "compile" (tools/bench_bert_torch.py --compile: torch.compile with
mode="reduce-overhead", dynamic=False, i.e. CUDA graphs); extra torch files (e.g. a compile run made in another
call) are merged in. Per cell: torch eager, torch compiled, ours, and ratio = torch ms / our ms against each
(> 1: we are faster). Pairs:
  FP32 vs torch fp32   same arithmetic (torch with TF32 off; ours exact FP32: cuBLASLt COMPUTE_32F or own kernels)
  BF16 vs torch bf16   both with bf16 weights and activations when our rows say activations "bf16" (cuBLASLt);
                       rows with "fp32" activations (own kernels) keep FP32 in memory and round operands
  TF32 vs torch tf32   printed as well when present
Our times are "forward" (every layer, only the pooled embedding downloaded) unless the column says "full"
(last_hidden_state downloaded to the host too, which torch's timing does not do). Missing rows print as "-".
Our columns, one per variant the gpupool file holds (BertGpuBench --variants; rows without one are eager):
  eager         the forward as the server runs it with graphs off
  tuned         gpupool.kernels.gemm-tuning on (each GEMM shape measured at warm-up, fastest kept)
  graphs        the server's CUDA graphs, one per cell (torch.compile reduce-overhead also replays CUDA graphs)
  tuned-graphs  both
each with its ratio against torch eager and torch compiled. A graph cell whose graph was not captured is marked *.
"""
import json
import sys


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        print(f"(cannot read {path}: {e})")
        return {}


def fmt(x, digits=2):
    return "-" if x is None else f"{x:.{digits}f}"


def ratio(theirs, ours):
    return None if theirs is None or ours is None or ours <= 0 else theirs / ours


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    torch_docs = [load(sys.argv[1])] + [load(p) for p in sys.argv[3:]]
    ours_doc = load(sys.argv[2])
    eager, compiled = {}, {}
    for doc in torch_docs:
        for r in doc.get("results", []):
            if r.get("bench") != "bert_forward":
                continue
            (compiled if r.get("compile") else eager)[(r["dtype"], r["batch"], r["seq"])] = r["ms"]
    variants = ["eager", "tuned", "graphs", "tuned-graphs"]
    ours = {(r["precision"], r.get("variant", "eager"), r["mode"], r["batch"], r["seq"]): r["ms"]
            for r in ours_doc.get("results", [])}
    uncaptured = {(r["precision"], r.get("variant"), r["batch"], r["seq"]) for r in ours_doc.get("results", [])
                  if r.get("variant", "eager").endswith("graphs") and not r.get("captured", True)}
    engines = {(r["precision"]): (r.get("gemm_engine", "?"), r.get("activations", "?"))
               for r in ours_doc.get("results", [])}
    shapes = sorted({(b, s) for (_, b, s) in eager} | {(b, s) for (_, b, s) in compiled}
                    | {(b, s) for (_, _, _, b, s) in ours})
    device = next((d.get("device") for d in torch_docs if d.get("device")), ours_doc.get("device", "?"))
    version = next((d.get("torch") for d in torch_docs if d.get("torch")), "?")

    print(f"# gpupool BERT-base vs PyTorch eager and torch.compile(reduce-overhead) ({device}, torch {version}, "
          f"java {ours_doc.get('java', '?')})")
    print()
    print("ms per forward (median); ratio = torch / ours, target >= 1.0. Engines: "
          + ", ".join(f"{p} on {e[0]} ({e[1]} activations)" for p, e in engines.items()))
    for label, ours_p, torch_d in (("FP32", "FP32", "fp32"), ("BF16", "BF16", "bf16"), ("TF32", "TF32", "tf32")):
        if not any(k[0] == ours_p for k in ours) and not any(k[0] == torch_d for k in eager):
            continue
        print()
        print(f"## {label}")
        print()
        present = [v for v in variants if any(k[0] == ours_p and k[1] == v for k in ours)] or ["eager"]
        head = "| B x S | torch eager | torch compiled | " + " | ".join(
            f"ours {v} | x eager | x compiled" for v in present) + " | ours full |"
        print(head)
        print("| --- | ---: | ---: | " + " | ".join("---: | ---: | ---:" for _ in present) + " | ---: |")
        wins = {v: [0, 0, 0, 0] for v in present}   # wins and cells against eager, then against compiled
        for b, s in shapes:
            te, tc = eager.get((torch_d, b, s)), compiled.get((torch_d, b, s))
            cells = []
            for v in present:
                o = ours.get((ours_p, v, "forward", b, s))
                re, rc = ratio(te, o), ratio(tc, o)
                w = wins[v]
                if re is not None:
                    w[0] += re >= 1.0
                    w[1] += 1
                if rc is not None:
                    w[2] += rc >= 1.0
                    w[3] += 1
                mark = "*" if (ours_p, v, b, s) in uncaptured else ""
                cells.append(f"{fmt(o)}{mark} | {fmt(re)} | {fmt(rc)}")
            print(f"| {b}x{s} | {fmt(te)} | {fmt(tc)} | " + " | ".join(cells) + " | "
                  f"{fmt(ours.get((ours_p, 'eager', 'full', b, s)))} |")
        print()
        for v in present:
            w = wins[v]
            print(f"- {label} {v}: ratio >= 1.0 in {w[0]} of {w[1]} cells against eager, {w[2]} of {w[3]} against "
                  f"torch.compile")

    choices = ours_doc.get("gemm_choices", [])
    if choices:
        print()
        print("GEMM shapes measured at warm-up (tuned columns): chosen engine against the heuristic's first choice")
        for p in sorted({c["precision"] for c in choices}):
            mine = [c for c in choices if c["precision"] == p]
            timed = [c for c in mine if c.get("ms") and c.get("heuristic_ms")]
            faster = [c for c in timed if c["ms"] < 0.97 * c["heuristic_ms"]]
            own = [c["shape"] for c in mine if c["engine"].startswith("gpupool kernels")]
            best = max(timed, key=lambda c: c["heuristic_ms"] / c["ms"], default=None)
            print(f"- {p}: {len(mine)} shapes, {len(faster)} more than 3 % faster than the heuristic's first"
                  + (f" (best {best['heuristic_ms'] / best['ms']:.2f}x at {best['shape']}: {best['engine']})"
                     if best else "")
                  + (f"; own kernels at {', '.join(own)}" if own else "; own kernels nowhere"))

    graphs = ours_doc.get("graphs")
    if graphs:
        print()
        print(f"CUDA graphs (graph columns): {graphs.get('captures')} captured, {graphs.get('capture_failures')} "
              f"captures and {graphs.get('replay_failures')} replays failed, {graphs.get('hits')} replays")

    acc = ours_doc.get("accuracy", [])
    if acc:
        print()
        print("last_hidden_state vs transformers FP32 (reference.safetensors, padded batch):")
        for a in acc:
            print(f"- {a['precision']}: max abs diff {a['max_abs_diff']} (max |ref| {fmt(a.get('max_abs_reference'))})")
    for p in ours_doc.get("profile", []):
        dev = p.get("device_ms", {})
        top = sorted(dev.items(), key=lambda kv: -kv[1]["ms"])[:4]
        print(f"- profile {p['precision']} {p['batch']}x{p['seq']}: wall {p['wall_ms']} ms, "
              f"{p.get('ops', '?')} ops ({p.get('launches', '?')} kernel launches + library calls"
              + (f"; {p['launches_tuned']} with the measured GEMM choice" if "launches_tuned" in p else "") + ") "
              f"enqueued in {p['enqueue_ms_total']} ms; synced per op: "
              + ", ".join(f"{k} {v['ms']} ms/{v['calls']}" for k, v in top)
              + f"; between ops {p['between_ops_ms']} ms")
    for doc in torch_docs:
        if doc and not doc.get("complete", True):
            print("\na torch benchmark was cut short: its missing rows print as '-'")
    for e in ours_doc.get("errors", []):
        print(f"- gpupool error: {e}")
    status = ours_doc.get("status")
    if status and status != "complete":
        print(f"\ngpupool benchmark status: {status}; skipped: {ours_doc.get('skipped')}")


if __name__ == "__main__":
    main()
