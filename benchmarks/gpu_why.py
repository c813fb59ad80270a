"""Issue 15 on a GPU, one call: verdicts, per-layer tables and the "why" for four models, checked
against an independent autotuned plain-PyTorch loop.

1. Models: ResNet-50 and MobileNetV2 (torchvision, random seeded weights, ``torch.onnx.export`` here;
   the torch backend folds the exporter's Identity-behind-weights, FACTS.md), the report's literal
   network ``report_conv_elu_k32_256`` and the 3×3 ``conv_elu_3x3_f32_256`` (``models/conv_elu.py``).
2. ``trtprof compare MODEL --backend torch --precisions fp32,tf32,fp16 --batch-sizes 1,8,64,256``,
   eager (with ``--layers``: the per-layer tables and layer rules) and ``--cuda-graph``; ``trtprof
   report`` renders each JSON to HTML. Autotuned (the default).
3. Independent check of the verdicts (the conv nets): a hand-written ``torch.nn`` module with the same
   weights (no onnx2torch, no trtprof runner), ``cudnn.benchmark = True``, timed by
   ``gpu_fidelity.reference_loop`` (torch.cuda.Event, own stream) in rounds alternating the
   precisions; speedup = ratio of medians with the same CI/verdict rule. Agreement per batch size.
4. ``summary.json``: verdict agreement, per-layer sums vs the measured GPU compute medians (target
   within 10 %), ResNet-50's top-5 layers at the largest batch, every kernel name seen with its
   tensor-core flag (to check the name rule on this GPU).

5. ``--parts fidelity``: ``benchmarks/gpu_fidelity.py`` (trtprof's loop against a plain-PyTorch
   loop on the same modules, both autotuned) into ``OUT_DIR/gpu_fidelity.json``.

Usage (device machine, repository root; one call each, the whole set is longer than one 10-minute
call: the compare part took 330 s for three models with --time-budget-s 1, the fidelity part about
150 s for three models with the default --fidelity-args):
    python3 benchmarks/gpu_why.py --out-dir /tmp/why --parts compare --time-budget-s 1
    python3 benchmarks/gpu_why.py --out-dir /tmp/why --parts fidelity
then tar /tmp/why into $OUT (results come back as at most 8 files).
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
import traceback
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT / "models"))

MODELS = ("report_conv_elu_k32_256", "resnet50", "conv_elu_3x3_f32_256", "mobilenetv2")
PRECISIONS = ("fp32", "tf32", "fp16")
SUM_TARGET = 0.10  # |Σ layer medians / measured compute median − 1|


def log(msg: str) -> None:
    print(msg, flush=True)


# --------------------------------------------------------------------- the independent reference
def reference_module(name: str):
    """The conv net as plain torch.nn, as a PyTorch user writes it: weights from models/conv_elu.py,
    TF 'same' padding as ``nn.Conv2d(padding=p)`` where it is symmetric (the report's network) and an
    ``F.pad`` before the conv only where it is not (the 3×3 net's 0/1). A first version padded every
    layer with F.pad: the same function, but a different cuDNN problem (a larger input, no padding)
    for which the autotuner picked other kernels — measured on the H200, TF32 3× slower at batch 64 —
    so it compared implementations, not trtprof's measurement."""
    import torch
    import torch.nn.functional as F

    import conv_elu

    weights = conv_elu.seeded_weights(name)
    filters, kernels = conv_elu.NETWORKS[name]

    class Net(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.convs = torch.nn.ModuleList()
            self.pads = []
            size, cin = conv_elu.IMAGE, conv_elu.CHANNELS
            for i, (f, k) in enumerate(zip(filters, kernels)):
                before, after = conv_elu.tf_same_pads(size, k, conv_elu.STRIDE)
                symmetric = before == after
                conv = torch.nn.Conv2d(cin, f, k, stride=conv_elu.STRIDE, padding=before if symmetric else 0)
                conv.weight.data = torch.from_numpy(np.ascontiguousarray(weights[2 * i].transpose(3, 2, 0, 1)))
                conv.bias.data = torch.from_numpy(weights[2 * i + 1])
                self.convs.append(conv)
                self.pads.append(None if symmetric else (before, after, before, after))
                size, cin = -(-size // conv_elu.STRIDE), f

        def forward(self, x):
            x = x.permute(0, 3, 1, 2)
            for conv, pad in zip(self.convs, self.pads):
                x = F.elu(conv(x if pad is None else F.pad(x, pad)))
            return x.permute(0, 2, 3, 1)

    return Net().eval().cuda()


def independent_verdicts(name: str, batches: list[int], *, graph: bool, rounds: int, iterations: int) -> list[dict]:
    import torch

    from gpu_fidelity import reference_loop
    from trtprof.stats.speedup import speedup_ci

    base = reference_module(name)
    modules = {"fp32": base, "tf32": base, "fp16": reference_module(name).half()}
    rows = []
    for batch in batches:
        x = np.random.default_rng(0).standard_normal((batch, 128, 128, 3), dtype=np.float32)
        with torch.inference_mode():
            out_shape = tuple(base(torch.from_numpy(x).cuda()).shape)
        samples: dict[str, list[np.ndarray]] = {p: [] for p in PRECISIONS}
        for r in range(rounds):
            order = PRECISIONS if r % 2 == 0 else PRECISIONS[::-1]
            for p in order:
                samples[p].append(reference_loop(modules[p], x, out_shape, half=p == "fp16", tf32=p == "tf32",
                                                 warmup=5, iterations=iterations, graph=graph, copies=False,
                                                 autotune=True))
        medians = {p: float(np.median(np.concatenate(v))) for p, v in samples.items()}
        for cand in PRECISIONS[1:]:
            s = speedup_ci(np.concatenate(samples["fp32"]), np.concatenate(samples[cand]),
                           rounds=(samples["fp32"], samples[cand]))
            rows.append({"batch_size": batch, "candidate": cand, "baseline": "fp32", "speedup": s.estimate,
                         "ci_low": s.ci_low, "ci_high": s.ci_high, "verdict": s.verdict, "medians_ms": medians})
        s = speedup_ci(np.concatenate(samples["tf32"]), np.concatenate(samples["fp16"]),
                       rounds=(samples["tf32"], samples["fp16"]))
        rows.append({"batch_size": batch, "candidate": "fp16", "baseline": "tf32", "speedup": s.estimate,
                     "ci_low": s.ci_low, "ci_high": s.ci_high, "verdict": s.verdict, "medians_ms": medians})
        log(f"  independent {name} b{batch} graph={int(graph)}: " +
            ", ".join(f"{p} {m:.4g} ms" for p, m in medians.items()))
    return rows


def trtprof_verdicts(compare_json: dict) -> list[dict]:
    """trtprof's own rows, plus fp16 vs tf32 derived from them: the ratio of the two speedups over fp32
    (the same rounds measured all three; compare's JSON keeps pooled samples only, and its CI needs
    the loads/rounds structure, so the derived row has an estimate and no CI or verdict of its own)."""
    rows = []
    for c in compare_json["comparisons"]:
        rows.append({"batch_size": c["batch_size"], "candidate": c["candidate"], "baseline": c["baseline"],
                     "speedup": c["speedup"]["estimate"], "ci_low": c["speedup"]["ci_low"],
                     "ci_high": c["speedup"]["ci_high"], "verdict": c["verdict"]})
    by = {(r["batch_size"], r["candidate"]): r for r in rows if r["baseline"] == "fp32"}
    for batch in sorted({b for b, _ in by}):
        if (batch, "tf32") in by and (batch, "fp16") in by:
            rows.append({"batch_size": batch, "candidate": "fp16", "baseline": "tf32",
                         "speedup": by[(batch, "fp16")]["speedup"] / by[(batch, "tf32")]["speedup"],
                         "ci_low": None, "ci_high": None, "verdict": None, "derived": True})
    return rows


# ------------------------------------------------------------------------------------ summaries
def layer_sums(compare_json: dict) -> list[dict]:
    """Per batch and precision: Σ layer medians and the profiled per-iteration kernel total against
    the measured GPU compute median of the latency run."""
    out = []
    medians = {}
    for c in compare_json["comparisons"]:
        for side in ("baseline", "candidate"):
            lat = c["latency"][side]
            medians[(c["batch_size"], lat["precision"])] = lat["stage_medians_ms"].get("compute_ms")
    for batch, table in (compare_json.get("layers") or {}).items():
        for p, total in table["totals_ms"].items():
            measured = medians.get((int(batch), p))
            it_total = table["profiles"][p].get("iteration_total_ms")
            out.append({"batch_size": int(batch), "precision": p, "sum_layer_medians_ms": total,
                        "kernel_total_per_iteration_ms": it_total, "measured_compute_median_ms": measured,
                        "profiled_elapsed_ms_per_iteration":
                            table["profiles"][p]["config"].get("profiled_elapsed_ms_per_iteration"),
                        "unprofiled_elapsed_ms_per_iteration":
                            table["profiles"][p]["config"].get("unprofiled_elapsed_ms_per_iteration"),
                        "attribution": table["profiles"][p]["config"].get("attribution"),
                        "ratio": (total / measured) if measured else None,
                        "within_target": (abs(total / measured - 1) <= SUM_TARGET) if measured else None})
    return out


def top_layers(compare_json: dict, batch: int, precision: str, n: int = 5) -> list[dict]:
    table = (compare_json.get("layers") or {}).get(str(batch))
    if not table:
        return []
    rows = [r for r in table["rows"] if r["time_ms"].get(precision) is not None]
    rows.sort(key=lambda r: -r["time_ms"][precision])
    return [{"name": r["name"], "op_type": r["op_type"], "kind": r["kind"], "ms": r["time_ms"][precision],
             "share": r["share"][precision], "ratio_vs_fp32": r["ratio_vs_baseline"].get(precision),
             "tensor_core": r["tensor_core"].get(precision),
             "kernels": [k["name"][:90] for k in r["kernels"].get(precision, [])][:3]} for r in rows[:n]]


def kernel_names(compare_json: dict) -> dict[str, bool | None]:
    seen: dict[str, bool | None] = {}
    for table in (compare_json.get("layers") or {}).values():
        for r in table["rows"]:
            for ks in r["kernels"].values():
                for k in ks:
                    seen.setdefault(k["name"], k["tensor_core"])
    return seen


# ------------------------------------------------------------------------------------------ main
def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out-dir", type=Path, required=True)
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--batch-sizes", default="1,8,64,256")
    ap.add_argument("--time-budget-s", default="1.5", help="trtprof compare --time-budget-s (per batch size)")
    ap.add_argument("--modes", default="eager,cuda_graph")
    ap.add_argument("--reference-models", default="report_conv_elu_k32_256,conv_elu_3x3_f32_256",
                    help="models checked against the independent autotuned loop")
    ap.add_argument("--reference-rounds", type=int, default=6)
    ap.add_argument("--reference-iterations", type=int, default=30)
    ap.add_argument("--parts", default="compare,fidelity",
                    help="compare (verdicts, layer tables, reports, independent loop) and/or fidelity "
                         "(benchmarks/gpu_fidelity.py, autotuned, into OUT_DIR/gpu_fidelity.json)")
    ap.add_argument("--fidelity-args", default="--models report_conv_elu_k32_256,conv_elu_3x3_f32_256,resnet50 "
                                               "--configs eager,graph --iterations 30 --rounds 2",
                    help="arguments for gpu_fidelity.py")
    args = ap.parse_args(argv)
    parts = set(args.parts.split(","))

    from gpu_fidelity import MAKERS
    from trtprof.cli import main as trtprof

    out = args.out_dir
    out.mkdir(parents=True, exist_ok=True)
    batches = [int(b) for b in args.batch_sizes.split(",")]
    summary: dict = {"date": time.strftime("%Y-%m-%d"), "models": {}, "errors": []}
    started = time.time()
    with tempfile.TemporaryDirectory(prefix="gpu-why-") as tmp:
        work = Path(tmp)
        for name in (args.models.split(",") if "compare" in parts else []):
            entry: dict = summary["models"].setdefault(name, {})
            try:
                model = MAKERS[name](work / f"{name}.onnx")
            except Exception as err:  # noqa: BLE001 - one model failing must not lose the others
                summary["errors"].append(f"{name}: export failed: {err}")
                traceback.print_exc()
                continue
            for mode in args.modes.split(","):
                t0 = time.time()
                path = out / f"compare-{name}-{mode}.json"
                log(f"\n===== {name} {mode} =====")
                flags = ["--cuda-graph"] if mode == "cuda_graph" else ["--layers"]
                try:
                    rc = trtprof(["compare", str(model), "--backend", "torch", "--batch-sizes", args.batch_sizes,
                                  "--precisions", ",".join(PRECISIONS), "--engines", str(work / "engines"),
                                  "--time-budget-s", args.time_budget_s, "--out", str(path), *flags])
                    if rc == 0:
                        trtprof(["report", str(path), "-o", str(out / f"report-{name}-{mode}.html")])
                    else:
                        summary["errors"].append(f"{name} {mode}: trtprof compare exited {rc}")
                        continue
                except Exception as err:  # noqa: BLE001
                    summary["errors"].append(f"{name} {mode}: {type(err).__name__}: {err}")
                    traceback.print_exc()
                    continue
                data = json.loads(path.read_text())
                entry[mode] = {"seconds": round(time.time() - t0, 1), "verdicts": trtprof_verdicts(data),
                               "why": {f"{c['batch_size']}:{c['candidate']}": [f"[{f['rule']}] {f['message']}"
                                                                               for f in c["diagnosis"]]
                                       for c in data["comparisons"]}}
                if data.get("layers"):
                    entry[mode]["layer_sums"] = layer_sums(data)
                    entry[mode]["top5"] = {p: top_layers(data, max(batches), p) for p in PRECISIONS}
                    entry[mode]["kernels"] = kernel_names(data)
            eager, graph = entry.get("eager", {}), entry.get("cuda_graph", {})
            if eager.get("layer_sums") and graph:
                path = out / f"compare-{name}-cuda_graph.json"
                data = json.loads(path.read_text())
                measured = {(c["batch_size"], c["latency"][s]["precision"]): c["latency"][s]["stage_medians_ms"].get("compute_ms")
                            for c in data["comparisons"] for s in ("baseline", "candidate")}
                for row in eager["layer_sums"]:
                    m = measured.get((row["batch_size"], row["precision"]))
                    row["cuda_graph_compute_median_ms"] = m
                    row["ratio_vs_cuda_graph"] = row["sum_layer_medians_ms"] / m if m else None
            if name in args.reference_models.split(","):
                for mode in args.modes.split(","):
                    try:
                        ref = independent_verdicts(name, batches, graph=mode == "cuda_graph",
                                                   rounds=args.reference_rounds, iterations=args.reference_iterations)
                    except Exception as err:  # noqa: BLE001
                        summary["errors"].append(f"{name} reference {mode}: {type(err).__name__}: {err}")
                        traceback.print_exc()
                        continue
                    mine = {(r["batch_size"], r["candidate"], r["baseline"]): r
                            for r in entry.get(mode, {}).get("verdicts", [])}
                    agree = []
                    for r in ref:
                        t = mine.get((r["batch_size"], r["candidate"], r["baseline"]))
                        agree.append({"batch_size": r["batch_size"], "pair": f"{r['candidate']} vs {r['baseline']}",
                                      "trtprof": None if t is None else f"{t['speedup']:.3f} {t['verdict'] or '(derived)'}",
                                      "independent": f"{r['speedup']:.3f} {r['verdict']}",
                                      "agree": None if t is None or t["verdict"] is None else t["verdict"] == r["verdict"],
                                      "ratio_of_speedups": None if t is None else t["speedup"] / r["speedup"]})
                    entry.setdefault("reference", {})[mode] = {"rows": ref, "agreement": agree}
                    for a in agree:
                        log(f"  b{a['batch_size']:<4} {a['pair']:13s} trtprof {a['trtprof']}  independent "
                            f"{a['independent']}  agree={a['agree']}")
            (out / "summary.json").write_text(json.dumps(summary, indent=1, default=str))
    if "fidelity" in parts:
        import gpu_fidelity

        try:
            rc = gpu_fidelity.main(["--out", str(out / "gpu_fidelity.json"), *args.fidelity_args.split()])
            if rc:
                summary["errors"].append(f"gpu_fidelity exited {rc}")
            else:
                summary["fidelity"] = json.loads((out / "gpu_fidelity.json").read_text())["summary"]
        except Exception as err:  # noqa: BLE001
            summary["errors"].append(f"gpu_fidelity: {type(err).__name__}: {err}")
            traceback.print_exc()
    summary["seconds"] = round(time.time() - started, 1)
    try:
        import torch

        summary["device"] = {"name": torch.cuda.get_device_name(0), "torch": torch.__version__,
                             "cuda": torch.version.cuda, "cudnn": torch.backends.cudnn.version()}
    except Exception:  # noqa: BLE001
        pass
    (out / "summary.json").write_text(json.dumps(summary, indent=1, default=str))
    log(json.dumps({k: v for k, v in summary.items() if k != "models"}, default=str))
    return 1 if summary["errors"] else 0


if __name__ == "__main__":
    sys.exit(main())
