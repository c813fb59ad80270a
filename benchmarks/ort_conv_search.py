"""What ORT's cuDNN search mode costs a lone worker's priming, and whether it changes the kernels' speed (issue 42).

ONNX Runtime >= 1.20 on cuDNN 9 builds each Conv's execution plan at a session's first run at a shape, on the host:
``cudnn_conv_algo_search`` EXHAUSTIVE (ORT's default, trtprof's choice) asks cuDNN's heuristics in mode B, HEURISTIC in
mode A (onnxruntime/core/providers/cuda/nn/conv.cc: ``UpdateState``), which cuDNN documents as cheaper on the host and
less often right. Those first runs are most of a life's priming (2026-12-04e: ~2.5 s of ResNet-50's ~5 s a life), the
part that keeps the ResNet-50 defaults command above 60 s. This sizes the trade before trtprof could choose otherwise:
fresh processes, the two modes in turn, each loading the engines with that mode, priming them as a lone compare worker
does (``_WorkerState.prime(alone=True)``), then timing each arm's CUDA-graph replays continuously at each batch size
(``time_device``). Prints per mode the median priming seconds and compute ms per arm and batch size, and HEURISTIC
over EXHAUSTIVE for both: a mode that primes faster but changes an arm's compute would change verdicts.

    python3 benchmarks/ort_conv_search.py ENGINE.onnx:fp32 ENGINE.onnx:tf32 ENGINE.onnx:fp16 [--reps 3]
        [--batch-sizes 1,32,256] [--json out.json]

This measures trtprof's own worker and timing loop, so it imports trtprof; the independent check of a mode's
speed is benchmarks/reference_ort_iobinding.py (ORT's defaults).
"""
from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

MODES = ("EXHAUSTIVE", "HEURISTIC")
# timed replays per arm: ~1 s of GPU time each at ResNet-50's batch sizes on an H200
ITERATIONS = {1: 400, 32: 150, 256: 25}


def child(mode: str, engines: list[str], batch_sizes: list[int]) -> dict:
    from ort_block_costs import labelled_records, shapes_at

    from trtprof import backends
    from trtprof.measure import worker_loop
    from trtprof.measure.timing import TimingConfig, time_device

    state = worker_loop._WorkerState(None)
    started = time.monotonic()
    for label, record in labelled_records(engines).items():
        state.runners[label] = backends.resolve(record.backend).load(
            record.artifact_path, record, log_warnings=True, cuda_options={"cudnn_conv_algo_search": mode})
        state.load_rss[label] = (None, None)
    engines_s = time.monotonic() - started
    first = next(iter(state.runners.values()))
    batches = [(b, shapes_at(first, b)) for b in batch_sizes]
    started = time.monotonic()
    _, answer = state.prime(batches, 0, (0, 100), TimingConfig(cuda_graph=True), alone=True)
    priming_s = time.monotonic() - started
    compute: dict[str, float] = {}
    for batch, shapes in batches:
        feeds = state.made.get(worker_loop.feeds_key(shapes, 0, (0, 100)))
        for label, runner in state.runners.items():
            config = TimingConfig(warmup=20, iterations=ITERATIONS.get(batch, 50), copies=True, cuda_graph=True)
            samples = time_device(runner, feeds, config)
            compute[f"{label} b{batch}"] = round(float(statistics.median(samples.stages["compute_ms"])), 4)
    settings = {label: r.runtime_report()["provider_options"].get("cudnn_conv_algo_search")
                for label, r in state.runners.items()}
    state.close()
    return {"mode": mode, "engines_s": round(engines_s, 4), "priming_s": round(priming_s, 4),
            "parts": answer.get("seconds", {}), "compute_ms": compute, "recorded": settings}


def main() -> None:
    from ort_prime_order import command_line

    parsed = command_line(__doc__, MODES, 3, child)
    if parsed is None:
        return
    args, samples = parsed
    medians = {}
    for mode, runs in samples.items():
        medians[mode] = {"priming_s": statistics.median(r["priming_s"] for r in runs),
                         "compute_ms": {k: statistics.median(r["compute_ms"][k] for r in runs)
                                        for k in runs[0]["compute_ms"]}}
        print(f"{mode}: median of {len(runs)}: priming {medians[mode]['priming_s']:.3f} s; compute "
              + ", ".join(f"{k} {v:.4f} ms" for k, v in medians[mode]["compute_ms"].items()))
    old, new = medians["EXHAUSTIVE"], medians["HEURISTIC"]
    print(f"priming, HEURISTIC / EXHAUSTIVE: {new['priming_s'] / old['priming_s']:.3f} "
          f"({new['priming_s']:.2f} s / {old['priming_s']:.2f} s)")
    print("compute, HEURISTIC / EXHAUSTIVE: " + ", ".join(
        f"{k} {new['compute_ms'][k] / old['compute_ms'][k]:.4f}" for k in old["compute_ms"]))
    if args.json:
        Path(args.json).write_text(json.dumps({"samples": samples, "medians": medians}, indent=1))


if __name__ == "__main__":
    main()
