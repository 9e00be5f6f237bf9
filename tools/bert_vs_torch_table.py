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
    ours = {(r["precision"], r["mode"], r["batch"], r["seq"]): r["ms"] for r in ours_doc.get("results", [])}
    engines = {(r["precision"]): (r.get("gemm_engine", "?"), r.get("activations", "?"))
               for r in ours_doc.get("results", [])}
    shapes = sorted({(b, s) for (_, b, s) in eager} | {(b, s) for (_, b, s) in compiled}
                    | {(b, s) for (_, _, b, s) in ours})
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
        print("| B x S | torch eager | torch compiled | ours | vs eager | vs compiled | ours full |")
        print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
        wins_e = total_e = wins_c = total_c = 0
        for b, s in shapes:
            te, tc = eager.get((torch_d, b, s)), compiled.get((torch_d, b, s))
            o = ours.get((ours_p, "forward", b, s))
            re, rc = ratio(te, o), ratio(tc, o)
            if re is not None:
                total_e += 1
                wins_e += re >= 1.0
            if rc is not None:
                total_c += 1
                wins_c += rc >= 1.0
            print(f"| {b}x{s} | {fmt(te)} | {fmt(tc)} | {fmt(o)} | {fmt(re)} | {fmt(rc)} | "
                  f"{fmt(ours.get((ours_p, 'full', b, s)))} |")
        print()
        print(f"{label}: ratio >= 1.0 in {wins_e} of {total_e} cells against eager, {wins_c} of {total_c} against "
              f"torch.compile")

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
              f"{p.get('ops', '?')} ops ({p.get('launches', '?')} kernel launches + library calls) "
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
