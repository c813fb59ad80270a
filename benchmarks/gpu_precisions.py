"""BF16 vs FP16 vs TF32 (against true FP32) on the torch backend of an H200, through the real CLI.

Models: ResNet-50 (torchvision, random seeded weights, exported to ONNX as in gpu_fidelity.py), one
transformer encoder block (self-attention + GELU feed-forward + LayerNorms, d_model 512, 8 heads,
sequence 128, written out op by op so the exporter emits plain ONNX ops onnx2torch converts), and an
MLP (1024→4096→1024) for fp8, which the torch backend runs only for MLPs (torch._scaled_mm).

Each goes through ``trtprof compare MODEL --backend torch --precisions fp32,tf32,fp16,bf16`` (the MLP:
``fp32,bf16,fp8``): verdicts with their CIs, accuracy against FP32 (BF16's error is expected to be
several times FP16's: 8 significant bits against 11), then ``trtprof report``. Nothing here times
anything itself. About 3 minutes on an H200 with the defaults.

Usage (on the device machine, from the repository root; onnx2torch installed with --no-deps):
    python3 benchmarks/gpu_precisions.py --out-dir benchmarks/results/gpu_precisions-$(date +%F)
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

D_MODEL, HEADS, SEQ, FFN = 512, 8, 128, 2048


def export_encoder_block(path: Path) -> Path:
    import torch
    from gpu_fidelity import _export

    class EncoderBlock(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.qkv = torch.nn.Linear(D_MODEL, 3 * D_MODEL)
            self.proj = torch.nn.Linear(D_MODEL, D_MODEL)
            self.ln1 = torch.nn.LayerNorm(D_MODEL)
            self.ff1 = torch.nn.Linear(D_MODEL, FFN)
            self.ff2 = torch.nn.Linear(FFN, D_MODEL)
            self.ln2 = torch.nn.LayerNorm(D_MODEL)

        def forward(self, x):
            b, s, _ = x.shape
            q, k, v = self.qkv(x).reshape(b, s, 3, HEADS, D_MODEL // HEADS).permute(2, 0, 3, 1, 4)
            att = torch.softmax(q @ k.transpose(-1, -2) / (D_MODEL // HEADS) ** 0.5, dim=-1)
            y = (att @ v).transpose(1, 2).reshape(b, s, D_MODEL)
            x = self.ln1(x + self.proj(y))
            return self.ln2(x + self.ff2(torch.nn.functional.gelu(self.ff1(x))))

    torch.manual_seed(0)
    return _export(EncoderBlock().eval(), torch.randn(1, SEQ, D_MODEL), path)


def export_mlp(path: Path) -> Path:
    import torch
    from gpu_fidelity import _export

    torch.manual_seed(0)
    mlp = torch.nn.Sequential(torch.nn.Linear(1024, 4096), torch.nn.ReLU(), torch.nn.Linear(4096, 1024)).eval()
    return _export(mlp, torch.randn(1, 1024), path)


def export_resnet50(path: Path) -> Path:
    from gpu_fidelity import export_resnet50 as make

    return make(path)


# name → (maker, batch sizes, precisions)
RUNS = {
    "resnet50": (export_resnet50, "1,32", "fp32,tf32,fp16,bf16"),
    "encoder_block": (export_encoder_block, "1,32", "fp32,tf32,fp16,bf16"),
    "mlp_fp8": (export_mlp, "256", "fp32,bf16,fp8"),
}


def summarize(path: Path) -> list[str]:
    data = json.loads(path.read_text())
    lines = []
    for c in data["comparisons"]:
        s, acc = c["speedup"], c["accuracy"]
        lines.append(f"{data['model']} batch {c['batch_size']}: {c['candidate']} vs {c['baseline']} "
                     f"{s['estimate']:.3f}x [{s['ci_low']:.3f}, {s['ci_high']:.3f}] {c['verdict']}; max abs err "
                     f"{acc['max_abs_err']:.3g}, max rel {acc['max_rel_err']:.3g}, non-finite {acc['nonfinite']}")
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out-dir", type=Path, required=True)
    ap.add_argument("--models", default=",".join(RUNS))
    ap.add_argument("--time-budget-s", default="12", help="per batch size (trtprof compare --time-budget-s)")
    args = ap.parse_args(argv)

    from trtprof.cli import main as trtprof

    args.out_dir.mkdir(parents=True, exist_ok=True)
    status, lines = 0, []
    with tempfile.TemporaryDirectory(prefix="gpu-precisions-") as tmp:
        work = Path(tmp)
        for name in args.models.split(","):
            maker, sizes, precisions = RUNS[name]
            model = maker(work / f"{name}.onnx")
            out = args.out_dir / f"compare-{name}.json"
            print(f"\n===== {name} =====", flush=True)
            rc = trtprof(["compare", str(model), "--backend", "torch", "--batch-sizes", sizes, "--precisions",
                          precisions, "--engines", str(work / "engines"), "--time-budget-s", args.time_budget_s,
                          "--out", str(out)])
            if rc == 0:
                lines += summarize(out)
                rc = trtprof(["report", str(out), "-o", str(args.out_dir / f"report-{name}.html")])
            status = status or rc
    (args.out_dir / "summary.txt").write_text("\n".join(lines) + "\n")
    print("\n".join(["", "===== summary ====="] + lines))
    return status


if __name__ == "__main__":
    sys.exit(main())
