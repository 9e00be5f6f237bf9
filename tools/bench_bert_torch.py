#!/usr/bin/env python3
"""PyTorch baseline for gpupool's BERT forward: times transformers' BertModel in eager mode on one GPU.

BERT-base (hidden 768, 12 layers, 12 heads, FFN 3072) with seeded random weights, or the weights of a model
folder (--model DIR, a save_pretrained checkpoint, e.g. the one gpupool serves) so both sides run the same
weights. For each dtype (fp32 with TF32 off, tf32 = fp32 weights with TF32 matmuls on, bf16) and each batch x sequence (1/8/32 x 16/128/512) it reports
the median forward time (CUDA events, after warm-up) of last_hidden_state with an all-ones attention mask.
With --compile it times torch.compile(model, mode="reduce-overhead", dynamic=False) instead of eager (CUDA graphs,
one graph per shape; Dynamo's recompile limit is raised so every shape compiles rather than falling back to eager),
recording each shape's compile-and-capture time too; --budget-s stops starting new shapes once spent, shared fairly
between the dtypes: the i-th of n dtypes starts no shape after i/n of the budget (what an earlier dtype left over
passes on), so the last dtype is not starved by the first.
With --gemm it also times torch.nn.functional.linear (cuBLAS) at the shapes the CUDA harness times
(4096^3 and BERT-base's four linear layers), as the library reference for our GEMM kernels.

Prints one JSON document on stdout (and writes it to --out if given).

  python3 tools/bench_bert_torch.py --gemm --out torch.json
"""
import argparse
import json
import os
import statistics
import sys

import torch


def median_ms(fn, warmup, reps):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        start = torch.cuda.Event(enable_timing=True)
        stop = torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop))
    return statistics.median(times)


def bench_bert(args, results):
    from transformers import BertConfig, BertModel

    torch.manual_seed(args.seed)
    if args.model:
        model = BertModel.from_pretrained(args.model, attn_implementation=args.attn, add_pooling_layer=False)
    else:
        model = BertModel(BertConfig(), add_pooling_layer=False)
        if args.attn:
            model.config._attn_implementation = args.attn
    model = model.cuda().eval()
    vocab = model.config.vocab_size
    for dtype_name in args.dtypes:
        dtype = {"fp32": torch.float32, "tf32": torch.float32, "bf16": torch.bfloat16}[dtype_name]
        torch.backends.cuda.matmul.allow_tf32 = dtype_name == "tf32"
        torch.backends.cudnn.allow_tf32 = dtype_name == "tf32"
        m = model.to(dtype)
        for batch in args.batches:
            for seq in args.seqs:
                g = torch.Generator().manual_seed(args.seed + batch * 1000 + seq)
                ids = torch.randint(0, vocab, (batch, seq), generator=g).cuda()
                mask = torch.ones(batch, seq, dtype=torch.long, device="cuda")
                types = torch.zeros(batch, seq, dtype=torch.long, device="cuda")
                with torch.inference_mode():
                    ms = median_ms(lambda: m(input_ids=ids, attention_mask=mask, token_type_ids=types),
                                   args.warmup, args.reps)
                row = {"bench": "bert_forward", "dtype": dtype_name, "batch": batch, "seq": seq,
                       "ms": round(ms, 4), "attn": m.config._attn_implementation}
                results.append(row)
                print(json.dumps(row), file=sys.stderr, flush=True)
                write_doc(args, results, complete=False)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False


def raise_recompile_limits():
    """dynamic=False compiles one graph per (batch, seq); Dynamo's default limit (8) would send later shapes to eager."""
    import torch._dynamo
    for name in ("cache_size_limit", "recompile_limit"):
        if hasattr(torch._dynamo.config, name):
            setattr(torch._dynamo.config, name, 256)
    if hasattr(torch._dynamo.config, "accumulated_cache_size_limit"):
        torch._dynamo.config.accumulated_cache_size_limit = 4096
    if hasattr(torch._dynamo.config, "accumulated_recompile_limit"):
        torch._dynamo.config.accumulated_recompile_limit = 4096


def bench_bert_compiled(args, results):
    import time
    from transformers import BertConfig, BertModel

    raise_recompile_limits()
    started = time.time()
    torch.manual_seed(args.seed)
    if args.model:
        model = BertModel.from_pretrained(args.model, attn_implementation=args.attn, add_pooling_layer=False)
    else:
        model = BertModel(BertConfig(), add_pooling_layer=False)
    model = model.cuda().eval()
    vocab = model.config.vocab_size
    for index, dtype_name in enumerate(args.dtypes):
        deadline = started + args.budget_s * (index + 1) / len(args.dtypes) if args.budget_s else None
        dtype = {"fp32": torch.float32, "tf32": torch.float32, "bf16": torch.bfloat16}[dtype_name]
        torch.backends.cuda.matmul.allow_tf32 = dtype_name == "tf32"
        torch.backends.cudnn.allow_tf32 = dtype_name == "tf32"
        torch._dynamo.reset()
        m = model.to(dtype)
        compiled = torch.compile(m, mode="reduce-overhead", dynamic=False)
        shapes = [tuple(int(v) for v in x.split("x")) for x in args.shapes.split(",")] if args.shapes \
            else [(b, s) for b in args.batches for s in args.seqs]
        for batch, seq in shapes:
            if deadline is not None and time.time() > deadline:
                print(json.dumps({"skipped": f"compile {dtype_name} {batch}x{seq}: budget"}), file=sys.stderr)
                continue
            g = torch.Generator().manual_seed(args.seed + batch * 1000 + seq)
            ids = torch.randint(0, vocab, (batch, seq), generator=g).cuda()
            mask = torch.ones(batch, seq, dtype=torch.long, device="cuda")
            types = torch.zeros(batch, seq, dtype=torch.long, device="cuda")
            with torch.no_grad():
                t0 = time.time()
                for _ in range(3):   # compile, then the warm-up runs that record the CUDA graph
                    compiled(input_ids=ids, attention_mask=mask, token_type_ids=types)
                torch.cuda.synchronize()
                compile_s = time.time() - t0
                ms = median_ms(lambda: compiled(input_ids=ids, attention_mask=mask, token_type_ids=types),
                               args.warmup, args.reps)
            row = {"bench": "bert_forward", "dtype": dtype_name, "batch": batch, "seq": seq,
                   "ms": round(ms, 4), "attn": m.config._attn_implementation,
                   "compile": "reduce-overhead", "compile_s": round(compile_s, 1)}
            results.append(row)
            print(json.dumps(row), file=sys.stderr, flush=True)
            write_doc(args, results, complete=False)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False


def bench_gemm(args, results):
    shapes = [("square", 4096, 4096, 4096)]
    for m in (128, 512, 1024, 4096, 16384):
        for n, k in ((2304, 768), (768, 768), (3072, 768), (768, 3072)):
            shapes.append(("bert", m, n, k))
    for mode in ("fp32", "tf32", "bf16"):
        torch.backends.cuda.matmul.allow_tf32 = mode == "tf32"
        dtype = torch.bfloat16 if mode == "bf16" else torch.float32
        for label, m, n, k in shapes:
            x = torch.randn(m, k, device="cuda", dtype=dtype)
            w = torch.randn(n, k, device="cuda", dtype=dtype) * 0.05
            b = torch.randn(n, device="cuda", dtype=dtype)
            ms = median_ms(lambda: torch.nn.functional.linear(x, w, b), 3, args.reps)
            row = {"bench": "torch_linear", "mode": mode, "label": label, "M": m, "N": n, "K": k,
                   "ms": round(ms, 5), "tflops": round(2.0 * m * n * k / (ms * 1e-3) / 1e12, 2)}
            results.append(row)
    torch.backends.cuda.matmul.allow_tf32 = False


def write_doc(args, results, complete):
    """The JSON document; also written to --out (rewritten after every BERT row, so a run cut short keeps them)."""
    doc = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__, "complete": complete,
           "results": results}
    text = json.dumps(doc, indent=1)
    if args.out:
        with open(args.out + ".tmp", "w") as f:
            f.write(text)
        os.replace(args.out + ".tmp", args.out)
    return text


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", help="save_pretrained folder to load instead of random BERT-base")
    p.add_argument("--attn", default="sdpa", help="transformers attention implementation (sdpa or eager)")
    p.add_argument("--dtypes", nargs="+", default=["fp32", "bf16"], choices=["fp32", "tf32", "bf16"])
    p.add_argument("--batches", nargs="+", type=int, default=[1, 8, 32])
    p.add_argument("--seqs", nargs="+", type=int, default=[16, 128, 512])
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--reps", type=int, default=10)
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--gemm", action="store_true", help="also time torch linear at the harness's GEMM shapes")
    p.add_argument("--no-bert", action="store_true", help="skip the BERT forward")
    p.add_argument("--out", help="also write the JSON here")
    p.add_argument("--compile", action="store_true",
                   help='time torch.compile(mode="reduce-overhead", dynamic=False) instead of eager')
    p.add_argument("--budget-s", type=float, default=0,
                   help="with --compile: start no new shape after this many s (the i-th of n dtypes after i/n of it)")
    p.add_argument("--shapes", help="with --compile: BxS list in this order (default: batches x seqs)")
    args = p.parse_args()
    if not torch.cuda.is_available():
        sys.exit("bench_bert_torch: no CUDA device")
    results = []
    if not args.no_bert:
        (bench_bert_compiled if args.compile else bench_bert)(args, results)
    if args.gemm:
        bench_gemm(args, results)
    print(write_doc(args, results, complete=True))


if __name__ == "__main__":
    main()
