"""Where one torch-backend load's time goes (issue 33, deliverable 1): in a fresh process, seconds for
importing torch and trtprof's backend, the first CUDA call (context), ``backend.load`` of each engine
(the saved torch.export program: no conversion, ``backends/torch_artifact``), the first run per batch
size (cuDNN autotuning), then a second load in the same process; after them, side by side, the old
path: importing onnx2torch and converting each engine's ONNX graph at load (``runner_from_proto``).

    python3 benchmarks/torch_load_phases.py ENGINES_DIR --batch-sizes 1,32,256
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
T0 = time.perf_counter()
phases: list[tuple[str, float]] = []


def mark(name: str, since: float) -> float:
    now = time.perf_counter()
    phases.append((name, round(now - since, 3)))
    return now


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("engines")
    ap.add_argument("--batch-sizes", default="1,32,256")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    t = time.perf_counter()
    import torch
    t = mark("import torch", t)
    from trtprof.backends.torch import TorchBackend, engine_onnx, import_onnx2torch, runner_from_proto
    t = mark("import trtprof's torch backend (no onnx2torch)", t)
    torch.zeros(1, device="cuda")
    torch.cuda.synchronize()
    t = mark("first CUDA call (context)", t)
    from trtprof.engines.cache import list_engines
    from trtprof.spec import Precision
    backend = TorchBackend()
    records = [r for r in list_engines(Path(args.engines)) if r.backend == "torch"]
    batches = [int(x) for x in args.batch_sizes.split(",")]

    def first_runs(runner, label):
        t = time.perf_counter()
        for b in batches:
            runner.prepare({s.name: (b, *[d for d in s.shape[1:]]) for s in runner.inputs})
            t = mark(f"{label}: prepare batch {b} (first run, autotune)", t)
        runner.close()
        torch.cuda.empty_cache()

    for round_ in ("first", "second"):
        for record in records:
            t = time.perf_counter()
            runner = backend.load(record.artifact_path, record)
            mark(f"{round_} {record.precision}: backend.load ({runner.loaded_by})", t)
            first_runs(runner, f"{round_} {record.precision}")
    t = time.perf_counter()
    import_onnx2torch()
    t = mark("import onnx2torch (the conversion path only)", t)
    for record in records:
        t = time.perf_counter()
        runner = runner_from_proto(engine_onnx(record.artifact_path), Precision(record.precision), tuple(record.inputs),
                                   tuple(record.outputs),
                                   converted=record.backend_metadata.get("fp16_graph") == "converted")
        mark(f"converting {record.precision}: onnx2torch + precision + to GPU", t)
        runner.close()
    for name, s in phases:
        print(f"{s:8.3f} s  {name}")
    print(f"{time.perf_counter() - T0:8.3f} s  total")
    if args.out:
        Path(args.out).write_text(json.dumps({"phases": phases, "gpu": torch.cuda.get_device_name(0)}, indent=1))


if __name__ == "__main__":
    main()
