"""An independent reference for the report's net (issue 33: "the report's net still matches"), written as a
user writes it: plain PyTorch, importing nothing from trtprof. The network of the "mixed precision is slower"
report read literally (Keras order ``Conv2D(3, k, 2, 'same', activation='elu')`` for k in 32, 64, 128, 256 on
a 128×128×3 NHWC input): ``x.permute(0, 3, 1, 2)``, four ``nn.Conv2d(3, 3, k, 2, padding=…)`` + ELU
(TensorFlow's 'same' padding is symmetric for these kernels: totals 30, 62, 126, 254), ``permute`` back.
Random weights (seed 0; the time does not depend on them), ``cudnn.benchmark = True``, one CUDA graph per
precision and batch (fp16: ``model.half()``, the input cast to half inside the graph), replayed; the median
of per-replay CUDA-event times. fp32 runs with TF32 off (as trtprof's fp32 does), tf32 with it on.
``--copies`` adds the H2D copy of a pinned float32 input and the D2H copy of the float32 output.

    python3 benchmarks/reference_report_net.py --batch-sizes 10,256 [--copies] [--out ref.json]
"""
from __future__ import annotations

import argparse
import json
import math

import torch
from torch import nn

from reference_graph_timing import graph_replay_ms

KERNELS = (32, 64, 128, 256)
IMAGE, CHANNELS, STRIDE = 128, 3, 2


class ReportNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        layers, size = [], IMAGE
        for k in KERNELS:
            total = max((math.ceil(size / STRIDE) - 1) * STRIDE + k - size, 0)
            assert total % 2 == 0  # symmetric for these kernels: nn.Conv2d's padding says it
            layers += [nn.Conv2d(CHANNELS, CHANNELS, k, STRIDE, padding=total // 2), nn.ELU()]
            size = math.ceil(size / STRIDE)
        self.body = nn.Sequential(*layers)
        self.out_size = size

    def forward(self, x):
        return self.body(x.permute(0, 3, 1, 2)).permute(0, 2, 3, 1)


def median_ms(model, precision: str, batch: int, copies: bool, iters: int) -> float:
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = precision == "tf32"
    host_in = torch.randn(batch, IMAGE, IMAGE, CHANNELS).pin_memory()
    dev_in = host_in.cuda()
    host_out = torch.empty(batch, model.out_size, model.out_size, CHANNELS).pin_memory()

    def step():
        if copies:
            dev_in.copy_(host_in, non_blocking=True)
        y = model(dev_in.half() if precision == "fp16" else dev_in)
        if copies:
            host_out.copy_(y.float(), non_blocking=True)
        return y

    return graph_replay_ms(step, iters)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch-sizes", default="10,256")
    ap.add_argument("--copies", action="store_true")
    ap.add_argument("--iters", type=int, default=200)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    torch.backends.cudnn.benchmark = True
    rows: dict[int, dict[str, float]] = {}
    for precision in ("fp32", "tf32", "fp16"):
        torch.manual_seed(0)
        model = ReportNet().eval().cuda()
        model = model.half() if precision == "fp16" else model
        for batch in [int(b) for b in args.batch_sizes.split(",")]:
            rows.setdefault(batch, {})[precision] = median_ms(model, precision, batch, args.copies, args.iters)
        del model
        torch.cuda.empty_cache()
    result = {"gpu": torch.cuda.get_device_name(0), "torch": torch.__version__, "cudnn": torch.backends.cudnn.version(),
              "copies": args.copies, "median_ms": rows,
              "speedup_vs_fp32": {b: {p: r["fp32"] / r[p] for p in ("tf32", "fp16")} for b, r in rows.items()}}
    for b, r in rows.items():
        print(f"batch {b}: " + "  ".join(f"{p} {ms:.3f} ms" for p, ms in r.items())
              + f"  tf32 {r['fp32'] / r['tf32']:.3f}x  fp16 {r['fp32'] / r['fp16']:.3f}x", flush=True)
    if args.out:
        with open(args.out, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
