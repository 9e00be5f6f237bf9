#!/usr/bin/env python3
"""Prints the BERT-base comparison table (markdown) from the two JSON files tools/bert-vs-torch.sh writes.

  python3 tools/bert_vs_torch_table.py TORCH_JSON GPUPOOL_JSON

ratio = torch ms / our ms (> 1: we are faster). Pairs, honestly labelled:
  FP32 vs torch fp32      same arithmetic (torch with TF32 off; ours exact FP32 on the CUDA cores)
  TF32X3 vs torch fp32    ours: three TF32 tensor-core products per multiply, near FP32 accuracy (see the accuracy
                          lines) against torch's exact fp32
  TF32 vs torch tf32      both fp32 in memory with TF32 tensor-core matmuls (torch: allow_tf32; its attention
                          (sdpa) may still run in fp32); torch's exact fp32 time is in the table too
  BF16 vs torch bf16      torch with bf16 weights and activations; ours with FP32 in memory, bf16 operands
Our times are "forward" (every layer, only the pooled embedding downloaded) unless the column says "full"
(last_hidden_state downloaded to the host too, which torch's timing does not do). Missing files or rows print as "-".
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
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    torch_doc, ours_doc = load(sys.argv[1]), load(sys.argv[2])
    torch = {(r["dtype"], r["batch"], r["seq"]): r["ms"]
             for r in torch_doc.get("results", []) if r.get("bench") == "bert_forward"}
    ours = {(r["precision"], r["mode"], r["batch"], r["seq"]): r["ms"] for r in ours_doc.get("results", [])}
    shapes = sorted({(b, s) for (_, b, s) in torch} | {(b, s) for (_, _, b, s) in ours})

    print(f"# gpupool BERT-base vs PyTorch eager ({torch_doc.get('device') or ours_doc.get('device', '?')}, "
          f"torch {torch_doc.get('torch', '?')}, java {ours_doc.get('java', '?')})")
    print()
    print("ms per forward (median); ratio = torch / ours, target >= 1.0")
    print()
    print("| B x S | torch fp32 | our FP32 | ratio | our TF32X3 | ratio | torch tf32 | our TF32 | ratio |"
          " torch bf16 | our BF16 | ratio | FP32 full | BF16 full |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    wins = total = 0
    for b, s in shapes:
        t32, ttf32, tb16 = (torch.get((d, b, s)) for d in ("fp32", "tf32", "bf16"))
        f32, x3, tf32, bf16 = (ours.get((p, "forward", b, s)) for p in ("FP32", "TF32X3", "TF32", "BF16"))
        r = [ratio(t32, f32), ratio(ttf32, tf32), ratio(tb16, bf16)]
        for x in r:
            if x is not None:
                total += 1
                wins += x >= 1.0
        print(f"| {b}x{s} | {fmt(t32)} | {fmt(f32)} | {fmt(r[0])} | {fmt(x3)} | {fmt(ratio(t32, x3))} | "
              f"{fmt(ttf32)} | {fmt(tf32)} | {fmt(r[1])} | {fmt(tb16)} | "
              f"{fmt(bf16)} | {fmt(r[2])} | {fmt(ours.get(('FP32', 'full', b, s)))} | "
              f"{fmt(ours.get(('BF16', 'full', b, s)))} |")
    print()
    print(f"like-for-like pairs at ratio >= 1.0: {wins} of {total} (FP32/fp32, TF32/tf32, BF16/bf16; TF32X3 not counted)")
    print("Our BF16 keeps FP32 in memory and rounds operands to bf16 in the kernels; torch's bf16 holds bf16 weights and"
          " activations (half the bytes). Our 'full' columns add the last_hidden_state download, torch's do not.")

    acc = ours_doc.get("accuracy", [])
    if acc:
        print()
        print("last_hidden_state vs transformers FP32 (reference.safetensors, padded batch):")
        for a in acc:
            print(f"- {a['precision']}: max abs diff {a['max_abs_diff']} (max |ref| {fmt(a.get('max_abs_reference'))})")
    for p in ours_doc.get("profile", []):
        dev = p.get("device_ms", {})
        top = sorted(dev.items(), key=lambda kv: -kv[1]["ms"])[:4]
        print(f"- profile {p['precision']} {p['batch']}x{p['seq']}: wall {p['wall_ms']} ms, {p['launches']} ops "
              f"enqueued in {p['enqueue_ms_total']} ms; synced per op: "
              + ", ".join(f"{k} {v['ms']} ms/{v['calls']}" for k, v in top)
              + f"; between ops {p['between_ops_ms']} ms")
    if torch_doc and not torch_doc.get("complete", True):
        print("\ntorch benchmark incomplete (cut short): its missing rows print as '-'")
    for e in ours_doc.get("errors", []):
        print(f"- gpupool error: {e}")
    status = ours_doc.get("status")
    if status and status != "complete":
        print(f"\ngpupool benchmark status: {status}; skipped: {ours_doc.get('skipped')}")


if __name__ == "__main__":
    main()
