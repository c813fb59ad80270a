"""The issue-6 verdict tables on a GPU: `trtprof compare` on ResNet-50 and the 4-layer Conv2D+ELU nets.

The models come from the makers in ``benchmarks/gpu_fidelity.py`` (ResNet-50/MobileNetV2 exported with
torch/torchvision, random seeded weights; the Conv2D+ELU nets from ``models/conv_elu.py``: the
report's literal ``report_conv_elu_k32_256`` and the 3×3 ``conv_elu_3x3_f32_256``), then each goes
through the real CLI: ``trtprof compare MODEL --backend torch --batch-sizes 1,256
--precisions fp32,tf32,fp16`` (fp32 = TF32 off, the baseline; tf32 shows what PyTorch's default
FP32 path already gets), and ``trtprof report`` for the HTML page. Nothing here times anything
itself: every number comes from trtprof's interleaved rounds.

Usage (on the device machine, from the repository root):
    python3 benchmarks/gpu_compare.py --out-dir benchmarks/results/gpu_compare-2026-11-30
"""
from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

MODELS = ("resnet50", "report_conv_elu_k32_256", "conv_elu_3x3_f32_256")


def export(name: str, path: Path) -> Path:
    from gpu_fidelity import MAKERS  # torch + torchvision for the torchvision models, on the device

    return MAKERS[name](path)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out-dir", type=Path, default=ROOT / "benchmarks/results/gpu_compare-2026-11-30")
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--batch-sizes", default="1,256")
    ap.add_argument("--precisions", default="fp32,tf32,fp16")
    ap.add_argument("--time-budget-s", default="20", help="per batch size (trtprof compare --time-budget-s)")
    ap.add_argument("--backend", default="torch")
    ap.add_argument("--extra", default="", help="more compare flags, e.g. '--cuda-graph' or '--no-copies'")
    args = ap.parse_args(argv)

    from trtprof.cli import main as trtprof

    args.out_dir.mkdir(parents=True, exist_ok=True)
    status = 0
    with tempfile.TemporaryDirectory(prefix="gpu-compare-") as tmp:
        work = Path(tmp)
        for name in args.models.split(","):
            model = export(name, work / f"{name}.onnx")
            out = args.out_dir / f"compare-{name}.json"
            print(f"\n===== {name} =====", flush=True)
            rc = trtprof(["compare", str(model), "--backend", args.backend, "--batch-sizes", args.batch_sizes,
                          "--precisions", args.precisions, "--engines", str(work / "engines"),
                          "--time-budget-s", args.time_budget_s, "--out", str(out), *args.extra.split()])
            if rc == 0:
                rc = trtprof(["report", str(out), "-o", str(args.out_dir / f"report-{name}.html")])
            status = status or rc
    return status


if __name__ == "__main__":
    sys.exit(main())
