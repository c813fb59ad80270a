"""An independent reference for issue 33, written as a user writes it: plain PyTorch, importing nothing
from trtprof. torchvision ResNet-50 (random weights, seed 0) with BatchNorm fused into the convs (what
``torch.onnx.export`` writes), cudnn.benchmark on, one CUDA graph per precision and batch capturing
H2D copy (pinned float32 input) + the model (fp16: input cast to half inside) + D2H copy (float32
output), replayed; median of per-replay CUDA-event times. fp32 runs with TF32 off, tf32 with it on.

    python3 benchmarks/reference_resnet50_graph.py --batch-sizes 1,32,256 [--no-copies]
"""
from __future__ import annotations

import argparse
import json

import torch
import torchvision
from torch.fx.experimental.optimization import fuse

from reference_graph_timing import graph_replay_ms


def build(precision: str):
    torch.manual_seed(0)
    model = fuse(torchvision.models.resnet50().eval()).cuda()
    return model.half() if precision == "fp16" else model


def time_one(model, precision: str, batch: int, copies: bool, iters: int = 200) -> float:
    tf32 = precision == "tf32"
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = tf32
    host_in = torch.randn(batch, 3, 224, 224).pin_memory()
    dev_in = host_in.cuda()
    host_out = torch.empty(batch, 1000).pin_memory()

    def step():
        if copies:
            dev_in.copy_(host_in, non_blocking=True)
        x = dev_in.half() if precision == "fp16" else dev_in
        y = model(x)
        if copies:
            host_out.copy_(y.float(), non_blocking=True)
        return y

    return graph_replay_ms(step, iters)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch-sizes", default="1,32,256")
    ap.add_argument("--no-copies", action="store_true")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    torch.backends.cudnn.benchmark = True
    rows = {}
    for precision in ("fp32", "tf32", "fp16"):
        model = build(precision)
        for batch in [int(b) for b in args.batch_sizes.split(",")]:
            rows.setdefault(batch, {})[precision] = time_one(model, precision, batch, not args.no_copies)
        del model
        torch.cuda.empty_cache()
    result = {"gpu": torch.cuda.get_device_name(0), "torch": torch.__version__, "copies": not args.no_copies,
              "median_ms": rows,
              "speedup_vs_fp32": {b: {p: r["fp32"] / r[p] for p in ("tf32", "fp16")} for b, r in rows.items()}}
    for b, r in rows.items():
        print(f"batch {b}: " + "  ".join(f"{p} {ms:.3f} ms" for p, ms in r.items())
              + f"  tf32 {r['fp32'] / r['tf32']:.3f}x  fp16 {r['fp32'] / r['fp16']:.3f}x", flush=True)
    if args.out:
        with open(args.out, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
