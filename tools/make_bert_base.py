#!/usr/bin/env python3
"""Writes a BERT-base model folder that both gpupool and tools/bench_bert_torch.py load, plus reference outputs.

The folder (save_pretrained layout, the one gpupool's model repository reads):
  config.json            BertConfig() defaults (hidden 768, 12 layers, 12 heads, FFN 3072, vocab 30522) plus our
                         "gpupool" serving section (batch <= 32, sequence <= 512, output last_hidden_state)
  model.safetensors      seeded random init (torch.manual_seed), no pooler: what the torch benchmark times
  reference.safetensors  one padded request (input_ids, attention_mask, token_type_ids, INT64 [2, 128]; the second
                         row half padding, mixed token types) and transformers' last_hidden_state for it, computed
                         in FP32 with TF32 off (on the GPU if there is one, else the CPU)

  python3 tools/make_bert_base.py --out /tmp/bert-base [--seed 1234]
"""
import argparse
import json
import os
import sys
import time

import torch


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True, help="folder to write (created)")
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--layers", type=int, default=12, help="fewer layers for a quick check")
    args = p.parse_args()

    import numpy as np
    from safetensors.numpy import save_file
    from transformers import BertConfig, BertModel

    started = time.time()
    torch.manual_seed(args.seed)
    config = BertConfig(num_hidden_layers=args.layers)
    model = BertModel(config, add_pooling_layer=False).eval()
    model.save_pretrained(args.out)

    path = os.path.join(args.out, "config.json")
    with open(path) as f:
        doc = json.load(f)
    doc["gpupool"] = {"version": "1", "max_batch_size": 32, "max_sequence_length": 512,
                      "inputs": ["input_ids", "attention_mask", "token_type_ids"],
                      "outputs": ["last_hidden_state", "embedding"], "pooling": "cls"}
    with open(path, "w") as f:
        json.dump(doc, f, indent=2, sort_keys=True)

    g = torch.Generator().manual_seed(args.seed + 7)
    batch, seq = 2, 128
    ids = torch.randint(0, config.vocab_size, (batch, seq), generator=g)
    mask = torch.ones(batch, seq, dtype=torch.long)
    mask[1, seq // 2:] = 0
    types = torch.zeros(batch, seq, dtype=torch.long)
    types[:, seq // 3:] = 1
    device = "cuda" if torch.cuda.is_available() else "cpu"
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    m = model.to(device)
    with torch.inference_mode():
        hidden = m(input_ids=ids.to(device), attention_mask=mask.to(device),
                   token_type_ids=types.to(device)).last_hidden_state.float().cpu()
    def i64(t):
        return np.ascontiguousarray(t.numpy().astype(np.int64))
    save_file({"input_ids": i64(ids), "attention_mask": i64(mask), "token_type_ids": i64(types),
               "last_hidden_state": np.ascontiguousarray(hidden.numpy().astype(np.float32))},
              os.path.join(args.out, "reference.safetensors"))
    print(f"make_bert_base: wrote {args.out} ({config.num_hidden_layers} layers, reference on {device}) "
          f"in {time.time() - started:.1f} s", file=sys.stderr)


if __name__ == "__main__":
    main()
