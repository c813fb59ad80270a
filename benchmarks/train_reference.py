"""An independent mixed-precision training loop, written the way a PyTorch user writes it.

Nothing here imports trtprof: this is the loop `trtprof train-compare` is checked against
(``benchmarks/train_vs_reference.py``). What a user does for fixed-shape training, and nothing else:

* the model: torchvision's ``resnet50(weights=None)`` (with its BatchNorm, in train mode) or the
  report's Keras net written by hand below (``ReportNet``); ``tiny`` is a small conv net for a CPU
  smoke run;
* ``torch.backends.cudnn.benchmark = True`` (cuDNN times its algorithms on the first step of each
  shape: that happens in the warmup steps);
* arms: ``fp32`` (TF32 off for cuDNN and matmul: true FP32), ``tf32`` (TF32 on), ``amp-fp16``
  (``torch.autocast(dtype=torch.float16)`` + ``torch.amp.GradScaler``), ``amp-bf16`` (autocast
  bfloat16, no scaler); AMP arms with TF32 off, as trtprof runs them;
* Adam (lr 1e-3), loss ``mean(|y - 1|)`` (the report's ``reduce_mean``), fixed random input;
* one ``torch.cuda.Event`` pair per step on the default stream; the arms run back to back in rounds
  (each round: every arm ``--steps`` steps, the order reversed every other round), all arms' models
  alive throughout.

    python3 benchmarks/train_reference.py --model report_net --batches 10,256 --json ref.json
    python3 benchmarks/train_reference.py --model tiny --device cpu --batches 2 --arms fp32,amp-bf16 --json ref.json
"""
from __future__ import annotations

import argparse
import copy
import json
import statistics
import time
from pathlib import Path

import torch
from torch import nn

ARMS = ("fp32", "tf32", "amp-fp16", "amp-bf16")


class ReportNet(nn.Module):
    """The report's Keras net as written: ``Conv2D(3, 32, 2, 'same', activation='elu')``, then kernel
    sizes 64, 128 and 256 — filters=3, kernel_size=k, strides=2, padding='same', ELU — on 128×128×3.
    TF's 'same' padding for these sizes is symmetric, k/2 - 1 on each side (128→64→32→16→8)."""

    def __init__(self) -> None:
        super().__init__()
        self.layers = nn.Sequential(*[m for k in (32, 64, 128, 256)
                                      for m in (nn.Conv2d(3, 3, k, stride=2, padding=k // 2 - 1), nn.ELU())])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layers(x)


class Tiny(nn.Module):
    """A small conv net with BatchNorm, for the CPU smoke run of the driver."""

    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
                                  nn.Conv2d(8, 8, 3, padding=1), nn.ReLU())
        self.head = nn.Linear(8, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.body(x).mean((2, 3)))


def make_tiny() -> tuple[nn.Module, torch.Tensor]:
    """The same tiny net as a factory, for the trtprof side of the smoke run."""
    torch.manual_seed(0)
    return Tiny(), torch.zeros(2, 3, 16, 16)


def build(name: str) -> tuple[nn.Module, tuple[int, ...]]:
    torch.manual_seed(0)
    if name == "resnet50":
        import torchvision

        return torchvision.models.resnet50(weights=None), (3, 224, 224)
    if name == "report_net":
        return ReportNet(), (3, 128, 128)
    if name == "tiny":
        return Tiny(), (3, 16, 16)
    raise SystemExit(f"--model {name!r}: choose resnet50, report_net or tiny")


def set_tf32(on: bool) -> None:
    torch.backends.cuda.matmul.allow_tf32 = on
    torch.backends.cudnn.allow_tf32 = on


def make_arm(arm: str, base: nn.Module, device: str):
    model = copy.deepcopy(base).to(device).train()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    scaler = torch.amp.GradScaler(device, enabled=arm == "amp-fp16")
    dtype = {"amp-fp16": torch.float16, "amp-bf16": torch.bfloat16}.get(arm)

    def step(x: torch.Tensor) -> None:
        opt.zero_grad(set_to_none=True)
        with torch.autocast(device, dtype=dtype or torch.float32, enabled=dtype is not None):
            y = model(x)
        loss = (y.float() - 1.0).abs().mean()
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()

    return step


def timed_steps(step, x: torch.Tensor, n: int, device: str) -> list[float]:
    """``n`` steps, each between two CUDA events (host clock plus a sync on a CPU); ms per step."""
    if device == "cpu":
        out = []
        for _ in range(n):
            t0 = time.perf_counter()
            step(x)
            out.append((time.perf_counter() - t0) * 1e3)
        return out
    events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(n)]
    for a, b in events:
        a.record()
        step(x)
        b.record()
    torch.cuda.synchronize()
    return [a.elapsed_time(b) for a, b in events]


def run_batch(name: str, batch: int, arms: list[str], *, rounds: int, steps: int, warmup: int, device: str) -> dict:
    base, shape = build(name)
    x = torch.randn((batch,) + shape, generator=torch.Generator().manual_seed(0)).to(device)
    loops = {}
    for arm in arms:
        set_tf32(arm == "tf32")
        loops[arm] = make_arm(arm, base, device)
        for _ in range(warmup):  # cuDNN autotuning happens in the first of these
            loops[arm](x)
    if device == "cuda":
        torch.cuda.synchronize()
    samples: dict[str, list[list[float]]] = {a: [] for a in arms}
    for r in range(rounds):
        for arm in (arms if r % 2 == 0 else arms[::-1]):
            set_tf32(arm == "tf32")
            loops[arm](x)  # one untimed step after switching arms (the next arm's caches)
            samples[arm].append(timed_steps(loops[arm], x, steps, device))
    out = {}
    for arm in arms:
        out[arm] = {"median_ms": statistics.median(v for block in samples[arm] for v in block),
                    "round_medians_ms": [statistics.median(b) for b in samples[arm]], "samples_ms": samples[arm]}
    del loops
    if device == "cuda":
        torch.cuda.empty_cache()
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", required=True, help="resnet50, report_net or tiny")
    ap.add_argument("--batches", required=True, help="comma list")
    ap.add_argument("--arms", default=",".join(ARMS))
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--steps", type=int, default=5, help="timed steps per arm per round")
    ap.add_argument("--warmup", type=int, default=5, help="untimed steps per arm before the rounds (autotuning)")
    ap.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    ap.add_argument("--json", type=Path, required=True)
    args = ap.parse_args(argv)
    torch.backends.cudnn.benchmark = True
    arms = args.arms.split(",")
    doc = {"model": args.model, "device": args.device, "torch": torch.__version__, "cudnn_benchmark": True,
           "gpu": torch.cuda.get_device_name(0) if args.device == "cuda" else None,
           "rounds": args.rounds, "steps": args.steps, "warmup": args.warmup, "batches": {}}
    for batch in (int(b) for b in args.batches.split(",")):
        t0 = time.perf_counter()
        doc["batches"][str(batch)] = run_batch(args.model, batch, arms, rounds=args.rounds, steps=args.steps,
                                               warmup=args.warmup, device=args.device)
        meds = ", ".join(f"{a} {v['median_ms']:.3f}" for a, v in doc["batches"][str(batch)].items())
        print(f"reference {args.model} batch {batch}: {meds} ms ({time.perf_counter() - t0:.0f} s)", flush=True)
        args.json.write_text(json.dumps(doc, indent=1) + "\n")  # after every batch: a cut run keeps its rows
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
