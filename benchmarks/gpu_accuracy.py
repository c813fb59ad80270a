"""ResNet-50 FP16 accuracy on natural-image-like inputs: `trtprof compare --inputs` on the torch backend.

Why this set-up (issue 23): accuracy measured on N(0, 1) noise says little, and torchvision's
``resnet50(weights=None)`` is useless for accuracy: its BatchNorm layers hold the initial running
statistics (mean 0, variance 1), so activations drift in scale layer after layer and the logits come
out nearly flat or dominated by one class; top-1 agreement of a flat output is meaningless. Nothing is
downloaded here (no pretrained weights, no dataset), so instead:

* images: smooth random images (low-frequency colour fields, correlated across RGB, plus mid-frequency
  texture and a little pixel noise; values in [0, 1]), normalised with ImageNet's mean and std, as a
  torchvision preprocessing pipeline would;
* weights: torchvision's seeded init, then the BatchNorm running statistics estimated from a separate
  set of such images (train-mode forward passes with ``momentum=None``: a cumulative average, no
  weight changes) — what training leaves in them — so every layer sees normalised activations; then
  the fc layer scaled so the logits' standard deviation is ``LOGIT_STD`` (a trained ImageNet
  ResNet-50's logits spread over several units), so the top-1/top-5 ranking is neither flat nor
  trivially one class. The script prints how many distinct top-1 classes the samples get and the
  median top-1/top-2 margin, so the reader can judge whether top-1 agreement means anything.

Then, through the real CLI: ``trtprof compare MODEL --backend torch --precisions fp32,tf32,fp16
--inputs images.npz --accuracy-samples all --batch-sizes 32`` (accuracy on all samples, timing on the first batch, the
accuracy verdict beside the speed verdict) and ``trtprof report`` for the HTML page. Nothing here
times anything itself.

Usage (device machine, repository root; about 2–3 minutes on an H200):
    python3 benchmarks/gpu_accuracy.py --out-dir benchmarks/results/gpu_accuracy-2026-12-01
CPU smoke run of the same pipeline with a small CNN on ONNX Runtime (tests/project/test_gpu_accuracy_script.py):
    python3 benchmarks/gpu_accuracy.py --smoke --out-dir /tmp/acc-smoke
"""
from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
LOGIT_STD = 4.0  # spread of the logits after rescaling the fc layer (see the module docstring)


def natural_images(n: int, size: int, seed: int) -> np.ndarray:
    """``n`` smooth random RGB images [n, 3, size, size], ImageNet-normalised float32."""
    import torch
    import torch.nn.functional as F

    g = torch.Generator().manual_seed(seed)
    gray = torch.rand(n, 1, 5, 5, generator=g)  # large shapes, shared by the channels (luminance)
    tint = torch.rand(n, 3, 3, 3, generator=g)  # slow colour variation
    base = 0.6 * F.interpolate(gray, size=size, mode="bicubic", align_corners=False) + \
        0.4 * F.interpolate(tint, size=size, mode="bicubic", align_corners=False)
    texture = F.interpolate(torch.rand(n, 1, size // 8, size // 8, generator=g) - 0.5, size=size, mode="bilinear",
                            align_corners=False)
    images = (base + 0.25 * texture + 0.02 * torch.randn(n, 3, size, size, generator=g)).clamp(0, 1)
    mean = torch.tensor(IMAGENET_MEAN).view(1, 3, 1, 1)
    std = torch.tensor(IMAGENET_STD).view(1, 3, 1, 1)
    return ((images - mean) / std).float().numpy()


def calibrate(model, images: np.ndarray, batch: int = 32) -> dict[str, float]:
    """BatchNorm running statistics from ``images`` (cumulative average over train-mode passes, no
    weight update), then the fc layer scaled to logits of standard deviation ``LOGIT_STD``."""
    import torch

    for m in model.modules():
        if isinstance(m, torch.nn.modules.batchnorm._BatchNorm):
            m.reset_running_stats()
            m.momentum = None
    model.train()
    with torch.no_grad():
        for i in range(0, len(images), batch):
            model(torch.from_numpy(images[i:i + batch]))
    model.eval()
    with torch.no_grad():
        logits = torch.cat([model(torch.from_numpy(images[i:i + batch])) for i in range(0, len(images), batch)])
        before = float(logits.std())
        fc = model.fc
        fc.weight.mul_(LOGIT_STD / before)
        fc.bias.mul_(LOGIT_STD / before)
    return {"logit_std_before": before}


def logits_facts(model, images: np.ndarray) -> dict[str, float]:
    """What makes top-1 agreement meaningful: distinct top-1 classes and the top-1/top-2 margin."""
    import torch

    with torch.no_grad():
        logits = model(torch.from_numpy(images)).numpy()
    top2 = np.sort(logits, axis=1)[:, -2:]
    return {"samples": len(images), "distinct_top1": int(len(np.unique(logits.argmax(1)))),
            "median_top1_top2_margin": float(np.median(top2[:, 1] - top2[:, 0])), "logit_std": float(logits.std())}


class SmallNet:
    """The smoke run's CPU stand-in for ResNet-50: conv-BN-ReLU ×3, pooling, fc (same calibration)."""

    @staticmethod
    def make():
        import torch
        from torch import nn

        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                layers = []
                for cin, cout in ((3, 16), (16, 32), (32, 64)):
                    layers += [nn.Conv2d(cin, cout, 3, 2, 1), nn.BatchNorm2d(cout), nn.ReLU()]
                self.features = nn.Sequential(*layers, nn.AdaptiveAvgPool2d(1), nn.Flatten())
                self.fc = nn.Linear(64, 100)

            def forward(self, x):
                return self.fc(self.features(x))

        torch.manual_seed(0)
        return Net()


def export(model, path: Path, size: int) -> Path:
    import torch

    kwargs = dict(input_names=["input"], output_names=["logits"], opset_version=17,
                  dynamic_axes={"input": {0: "batch"}, "logits": {0: "batch"}})
    with torch.no_grad():
        try:
            torch.onnx.export(model, (torch.zeros(1, 3, size, size),), str(path), dynamo=False, **kwargs)
        except TypeError:
            torch.onnx.export(model, (torch.zeros(1, 3, size, size),), str(path), **kwargs)
    return path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out-dir", type=Path, default=ROOT / "benchmarks/results/gpu_accuracy-2026-12-01")
    ap.add_argument("--samples", type=int, default=128, help="images compared (accuracy uses all)")
    ap.add_argument("--calibration", type=int, default=128, help="images for the BatchNorm statistics")
    ap.add_argument("--batch-sizes", default="32")
    ap.add_argument("--precisions", default="fp32,tf32,fp16")
    ap.add_argument("--time-budget-s", default="20")
    ap.add_argument("--accuracy", default=None, help="compare --accuracy (default: trtprof's)")
    ap.add_argument("--smoke", action="store_true", help="CPU: a small CNN on 64×64 images through onnxruntime")
    args = ap.parse_args(argv)

    import torch

    from trtprof.cli import main as trtprof

    size = 64 if args.smoke else 224
    if args.smoke:
        model = SmallNet.make()
        backend, precisions = "onnxruntime", "fp32,fp16"
    else:
        import torchvision

        torch.manual_seed(0)
        model = torchvision.models.resnet50(weights=None)
        backend, precisions = "torch", args.precisions
    device = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu"
    args.out_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="gpu-accuracy-") as tmp:
        work = Path(tmp)
        scale = calibrate(model, natural_images(args.calibration, size, seed=1))
        images = natural_images(args.samples, size, seed=2)
        facts = logits_facts(model, images)
        print(f"device: {device}; fc rescaled: logit std {scale['logit_std_before']:.3g} → "
              f"{facts['logit_std']:.3g} (on the compared images); on the {facts['samples']} compared images: "
              f"{facts['distinct_top1']} distinct top-1 classes, median top-1/top-2 margin "
              f"{facts['median_top1_top2_margin']:.3g}", flush=True)
        model_path = export(model, work / "resnet50_calibrated.onnx", size)
        npz = work / "images.npz"
        np.savez(npz, input=images)
        out = args.out_dir / "compare.json"
        extra = ["--accuracy", args.accuracy] if args.accuracy else []
        rc = trtprof(["compare", str(model_path), "--backend", backend, "--precisions", precisions,
                      "--batch-sizes", args.batch_sizes, "--inputs", str(npz), "--accuracy-samples", "all",
                      "--engines", str(work / "engines"),
                      "--time-budget-s", args.time_budget_s, "--out", str(out), "--md", *extra])
        if rc == 0:
            rc = trtprof(["report", str(out), "-o", str(args.out_dir / "report.html")])
    return rc


if __name__ == "__main__":
    sys.exit(main())
