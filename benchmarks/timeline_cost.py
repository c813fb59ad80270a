"""What `compare --timeline` costs where it runs: in the comparing process after the workers closed
(what trtprof does), against a worker command after its last round (the alternative it did not take).

The parent path is ``layers.timeline.record_timeline``: load the engine, warm up, record one iteration,
close. A worker after its last round holds the engine loaded and warm, so it would skip the load (and,
on torch, the autotuning warm-up is then already done): its cost is the recording alone. Per arm and
repeat this measures (a) the parent path whole, (b) a load and close alone, (c) the recording with a
runner already loaded and warmed (``timeline_torch_runner`` / ``timeline_onnxruntime``) — (c) is what
the worker path would cost, (a) − (c) what the parent path spends beyond it. Medians over --repeats.

    PYTHONPATH=. python benchmarks/timeline_cost.py MODEL.onnx --backend onnxruntime --batch-size 1 \\
        --engines /tmp/e --out benchmarks/results/timeline_cost-DEVICE-DATE.json
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from trtprof.builder.pipeline import BuildSettings  # noqa: E402
from trtprof.compare.core import resolve_records  # noqa: E402
from trtprof.layers import timeline as tl  # noqa: E402
from trtprof.layers.profile import engine_feeds  # noqa: E402
from trtprof.measure import bench  # noqa: E402
from trtprof.spec import Precision  # noqa: E402


def recording_only(record, runner, batch: int, cuda_graph: bool) -> float:
    """The worker path: the runner is loaded and warm; only the recording runs."""
    _shapes, feeds = engine_feeds(record, runner, batch)
    t0 = time.perf_counter()
    if record.backend == "onnxruntime":
        tl.timeline_onnxruntime(record, feeds, warmup=5, batch_size=batch)
    else:
        tl.timeline_torch_runner(runner, record, feeds, batch, warmup=5, cuda_graph=cuda_graph, copies=True)
    return time.perf_counter() - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model", type=Path)
    ap.add_argument("--backend", default="onnxruntime")
    ap.add_argument("--precisions", default="fp32,fp16")
    ap.add_argument("--batch-size", type=int, default=1)
    ap.add_argument("--engines", type=Path, required=True)
    ap.add_argument("--cuda-graph", action="store_true")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    precisions = [Precision.parse(p) for p in args.precisions.split(",")]
    records, _, _ = resolve_records(args.model, precisions, (args.batch_size,),
                                    BuildSettings(engines_dir=args.engines, backend=args.backend))
    rows = {}
    for name, record in records.items():
        tl.record_timeline(record, args.batch_size, cuda_graph=args.cuda_graph)  # imports and first-call costs once
        parent, load, worker = [], [], []
        for _ in range(args.repeats):
            t0 = time.perf_counter()
            tl.record_timeline(record, args.batch_size, cuda_graph=args.cuda_graph)
            parent.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            runner = bench.load_runner(record)
            load.append(time.perf_counter() - t0)
            try:
                recording_only(record, runner, args.batch_size, args.cuda_graph)  # warm, as after the last round
                worker.append(recording_only(record, runner, args.batch_size, args.cuda_graph))
            finally:
                runner.close()
        rows[name] = {"parent_s": statistics.median(parent), "load_s": statistics.median(load),
                      "worker_s": statistics.median(worker), "repeats": args.repeats}
        print(f"{name}: parent path {rows[name]['parent_s']:.3f} s (load {rows[name]['load_s']:.3f} s), "
              f"worker path (recording only) {rows[name]['worker_s']:.3f} s")
    with open("/proc/loadavg", encoding="ascii") as f:
        load_avg = f.read().split()[:3]
    out = {"model": str(args.model), "backend": args.backend, "batch_size": args.batch_size,
           "cuda_graph": args.cuda_graph, "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
           "loadavg": load_avg, "arms": rows}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=1) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
