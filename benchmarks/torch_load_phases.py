"""Where one torch-backend load's time goes (issue 33, deliverable 1): in a fresh process, seconds for
importing torch and onnx2torch, the first CUDA call (context), reading the artifact, onnx2torch's
conversion, moving the module to the GPU in its precision, and the first run per batch size (cuDNN
autotuning), then a second load of the same engine in the same process (what a warm worker pays).

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
    from trtprof.backends.torch import TorchBackend, import_onnx2torch, to_torch_module
    import_onnx2torch()
    t = mark("import onnx2torch (+trtprof)", t)
    torch.zeros(1, device="cuda")
    torch.cuda.synchronize()
    t = mark("first CUDA call (context)", t)
    from trtprof.engines.cache import list_engines
    import onnx
    backend = TorchBackend()
    for round_ in ("first", "second"):
        for record in list_engines(Path(args.engines)):
            if record.backend != "torch":
                continue
            p = record.precision
            t = time.perf_counter()
            proto = onnx.load(str(record.artifact_path))
            t = mark(f"{round_} {p}: onnx.load", t)
            to_torch_module(proto)
            t = mark(f"{round_} {p}: onnx2torch.convert alone", t)
            runner = backend.load(record.artifact_path, record)
            t = mark(f"{round_} {p}: backend.load (read+convert+to GPU)", t)
            name = runner.inputs[0].name
            for b in [int(x) for x in args.batch_sizes.split(",")]:
                shapes = {s.name: (b, *[d for d in s.shape[1:]]) for s in runner.inputs}
                runner.prepare(shapes)
                t = mark(f"{round_} {p}: prepare batch {b} (first run, autotune)", t)
            runner.close()
            del runner
            torch.cuda.empty_cache()
    for name, s in phases:
        print(f"{s:8.3f} s  {name}")
    print(f"{time.perf_counter() - T0:8.3f} s  total")
    if args.out:
        Path(args.out).write_text(json.dumps({"phases": phases, "gpu": torch.cuda.get_device_name(0)}, indent=1))


if __name__ == "__main__":
    main()
