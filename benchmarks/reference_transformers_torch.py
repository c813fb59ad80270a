"""The independent plain-PyTorch reference of issue 43, written as a user writes it and importing nothing
from trtprof: timm's ViT-B/16 with fused attention off (``timm.layers.set_fused_attn(False)``: attention as
the ONNX export holds it, unfused) and transformers' BERT-base with eager attention (mask None: all ones), random
weights (seed 0, the same constructors as ``export_zoo_models.py``), ``cudnn.benchmark`` on, TF32 off;
fp16 is ``model.half()``. One CUDA graph per precision and batch captures what trtprof's compute stage
holds for the exported model: the fp16 input cast (ViT), the model, and the float32 copy of the output into
a buffer; the median of per-replay CUDA-event times (``reference_graph_timing.graph_replay_ms``).

    python3 benchmarks/reference_transformers_torch.py --batch-sizes 1,64 [--models vit_b16,bert_base] [--copies]
"""
from __future__ import annotations

import argparse
import json

import torch

from reference_graph_timing import graph_replay_ms


def vit():
    import timm
    from timm.layers import set_fused_attn

    set_fused_attn(False)
    return timm.create_model("vit_base_patch16_224", pretrained=False)


def bert():
    from transformers import BertConfig, BertModel

    config = BertConfig()
    config._attn_implementation = "eager"  # transformers: attention as plain matmul + softmax (what the export holds)
    return BertModel(config, add_pooling_layer=False)  # the export returns last_hidden_state only


def inputs(name: str, batch: int) -> tuple:
    if name == "vit_b16":
        return (torch.randn(batch, 3, 224, 224, device="cuda"),)
    return (torch.randint(0, 30000, (batch, 128), device="cuda"), torch.ones(batch, 128, dtype=torch.int64,
                                                                              device="cuda"))


def time_one(name: str, model, precision: str, batch: int, iters: int, copies: bool = False) -> float:
    feeds = inputs(name, batch)
    host_in = [f.cpu().pin_memory() for f in feeds] if copies else []
    host_out: list = []
    out: list = []

    def step():
        for h, d in zip(host_in, feeds):  # --copies: pinned input in, as trtprof's latency holds it
            d.copy_(h, non_blocking=True)
        if name == "vit_b16":
            x = feeds[0].half() if precision == "fp16" else feeds[0]
            y = model(x)
        else:
            # BertModel builds its mask with a host tensor, which a CUDA graph cannot capture: the embeddings and
            # the encoder are called with the additive mask it would build from all-ones (zeros), made outside
            if len(out) < 2:
                dtype = torch.float16 if precision == "fp16" else torch.float32
                out.append(torch.zeros(batch, 1, 1, feeds[0].shape[1], dtype=dtype, device="cuda"))
            y = model.encoder(model.embeddings(input_ids=feeds[0]), attention_mask=out[-1]).last_hidden_state
        if not out or out[0].shape != y.shape:
            out.insert(0, torch.empty(y.shape, dtype=torch.float32, device="cuda"))
        out[0].copy_(y)
        if copies:  # and the float32 output back to pinned host memory
            if not host_out:
                host_out.append(torch.empty(y.shape, dtype=torch.float32).pin_memory())
            host_out[0].copy_(out[0], non_blocking=True)
        return out[0]

    return graph_replay_ms(step, iters)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch-sizes", default="1,64")
    ap.add_argument("--models", default="vit_b16,bert_base")
    ap.add_argument("--iters", type=int, default=200)
    ap.add_argument("--out", default=None)
    ap.add_argument("--copies", action="store_true",
                    help="time the pinned H2D input and D2H output copies too (what trtprof's latency, and so its "
                         "verdict, holds; without it the loop is what trtprof's compute stage holds)")
    args = ap.parse_args()
    torch.backends.cudnn.benchmark = True
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    rows: dict = {}
    for name in args.models.split(","):
        for precision in ("fp32", "fp16"):
            torch.manual_seed(0)
            model = (vit() if name == "vit_b16" else bert()).eval().cuda()
            model = model.half() if precision == "fp16" else model
            for batch in [int(b) for b in args.batch_sizes.split(",")]:
                ms = time_one(name, model, precision, batch, args.iters, args.copies)
                rows.setdefault(name, {}).setdefault(str(batch), {})[precision] = ms
                print(f"ref-torch {name} {precision} b{batch}: {ms:.4f} ms", flush=True)
            del model
            torch.cuda.empty_cache()
    for name, per in rows.items():
        for batch, r in per.items():
            print(f"ref-torch {name} b{batch}: fp16 vs fp32 {r['fp32'] / r['fp16']:.3f}x", flush=True)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            json.dump({"gpu": torch.cuda.get_device_name(0), "torch": torch.__version__, "copies": args.copies,
                   "median_ms": rows}, f,
                      indent=1)


if __name__ == "__main__":
    main()
