"""Issue 35 on a GPU: each precision's timeline side by side, and checks of what the timelines claim.

Cases (torch backend, fp32 vs fp16, autotuned; models nobody here wrote plus the report's literal net):
  torchvision ResNet-50 (exported here, BN folded by the exporter) at batch 1, eager and CUDA graph;
  the report's net ``report_conv_elu_k32_256`` (models/conv_elu.py) at batch 10 and 256, CUDA graph.
Each case runs ``trtprof profile MODEL --backend torch --precisions fp32,fp16 --batch-size B --timeline
--trace-dir … [--cuda-graph]`` as a user would, then reads the timelines it wrote and checks:
  1. under CUDA graphs, the sum of kernel times (copies excluded, one iteration) against the event-timed
     compute of the same profiled iteration and of an unprofiled one (target: within 5 %);
  2. the idle share against an independent figure: ``trtprof bench`` of the same engines (eager and
     graph) gives the host enqueue and the GPU compute medians; host-bound eager runs have enqueue ≈
     compute and a large idle share, graph replays a small one;
  3. every trace file passes ``check_trace`` (the trace-event format).
Writes OUT_DIR/summary.json, summary.txt and each case's PNG/page/traces.

    python3 benchmarks/gpu_timeline.py --out-dir /tmp/tl
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from trtprof.layers.timeline import Timeline, check_trace  # noqa: E402

KERNEL_SUM_TARGET = 0.05  # |Σ kernel µs / event-timed compute − 1| under CUDA graphs
CASES = (("resnet50", 1, False), ("resnet50", 1, True), ("report_conv_elu_k32_256", 10, True),
         ("report_conv_elu_k32_256", 256, True))


def log(msg: str) -> None:
    print(msg, flush=True)


def trtprof(*argv: str) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([sys.executable, "-m", "trtprof", *argv], capture_output=True, text=True, cwd=ROOT)
    log(proc.stdout[-3000:] + proc.stderr[-2000:])
    return proc


def bench_stages(model: Path, engines: Path, batch: int, graph: bool, out: Path) -> dict[str, dict[str, float]]:
    """Host enqueue and GPU compute medians per precision from ``trtprof bench`` (the timing loop)."""
    args = ["bench", str(engines), "--batch-sizes", str(batch), "--out", str(out), "--duration-s", "1"]
    args.append("--cuda-graph" if graph else "--eager")  # CUDA graphs are bench's default on a GPU since issue 33
    proc = trtprof(*args)
    if proc.returncode != 0:
        return {}
    data = json.loads(out.read_text())
    stages: dict[str, dict[str, float]] = {}
    for entry in data["results"]:
        stages[str(entry["precision"])] = {k: float(v["p50"]) for k, v in entry["stats"].items()}
    return stages


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out-dir", type=Path, required=True)
    args = ap.parse_args(argv)
    out = args.out_dir
    out.mkdir(parents=True, exist_ok=True)
    from gpu_fidelity import MAKERS

    import torch

    summary: dict = {"device": torch.cuda.get_device_name(0), "date": time.strftime("%Y-%m-%d"), "cases": []}
    lines = [f"{summary['device']}, {summary['date']}, torch {torch.__version__}"]
    for name, batch, graph in CASES:
        case = f"{name}-b{batch}-{'graph' if graph else 'eager'}"
        work = out / case
        work.mkdir(exist_ok=True)
        model = out / f"{name}.onnx"
        if not model.exists():
            MAKERS[name](model)
        engines = out / f"engines-{name}"  # bench reads the whole dir: one model per dir
        t0 = time.perf_counter()
        argv_ = ["profile", str(model), "--backend", "torch", "--precisions", "fp32,fp16", "--batch-size", str(batch),
                 "--engines", str(engines), "--out", str(work / "layers.json"), "--timeline", "--trace-dir",
                 str(work / "traces"), "--iterations", "5", "--top", "5"]
        if graph:
            argv_.append("--cuda-graph")
        proc = trtprof(*argv_)
        row: dict = {"case": case, "rc": proc.returncode, "wall_s": round(time.perf_counter() - t0, 1)}
        if proc.returncode == 0:
            data = json.loads((work / "layers.json").read_text())
            for tj in data["timelines"]:
                t = Timeline.from_json(tj)
                kernels = sum(s.dur_us for s in t.spans if not s.name.startswith(("Memcpy", "Memset")))
                ev_p, ev_u = t.settings.get("event_compute_ms_profiled"), t.settings.get("event_compute_ms_unprofiled")
                row[t.precision] = {"window_ms": t.window_us / 1e3, "idle_share": t.idle_share, "spans": len(t.spans),
                                    "kernel_sum_ms": kernels / 1e3, "event_compute_ms_profiled": ev_p,
                                    "event_compute_ms_unprofiled": ev_u,
                                    "kernel_sum_vs_event": kernels / 1e3 / ev_p - 1 if ev_p else None,
                                    "casts": len(t.of_kind("cast")), "top": t.top(3),
                                    "kinds": {k: len(t.of_kind(k)) for k in ("conv", "gemm", "elementwise", "reformat",
                                                                             "cast", "copy", "other")},
                                    "onnx_node_labels": t.settings.get("onnx_node_labels"),
                                    "labelled_spans": sum(1 for s in t.spans if s.node)}
            for trace in sorted((work / "traces").glob("*.json")):
                check_trace(json.loads(trace.read_text()))
            row["traces_checked"] = len(list((work / "traces").glob("*.json")))
            row["bench"] = bench_stages(model, engines, batch, graph, work / "bench.json")
        summary["cases"].append(row)
        lines.append(f"{case}: rc {row['rc']}, {row['wall_s']} s")
        for p in ("fp32", "fp16"):
            r = row.get(p)
            if r:
                b = row.get("bench", {}).get(p, {})
                lines.append(f"  {p}: iteration {r['window_ms']:.3f} ms, idle {r['idle_share']:.0%}, kernels "
                             f"{r['kernel_sum_ms']:.3f} ms vs event compute {r['event_compute_ms_profiled']:.3f} ms "
                             f"(profiled) / {r['event_compute_ms_unprofiled']:.3f} ms (unprofiled): "
                             f"{r['kernel_sum_vs_event']:+.1%}; casts {r['casts']}; bench enqueue "
                             f"{b.get('enqueue_ms', float('nan')):.3f} ms, compute {b.get('compute_ms', float('nan')):.3f} ms")
        (out / "summary.json").write_text(json.dumps(summary, indent=1, default=str))
        (out / "summary.txt").write_text("\n".join(lines) + "\n")
    log("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
