"""Is trtprof's serving driver believable on a GPU? Its requests/s next to a plain PyTorch loop, side by side.

Why: the first H200 run of ``gpu_serving.py`` (benchmarks/results/gpu_serving-2026-12-01-defect) had fp16
and tf32 ResNet-50 10x below fp32 and 0 requests/s at 8 in flight. The cause: PyTorch keeps cuDNN's
autotuned plans per thread, and the driver started new threads for every window, so every window
autotuned again inside its measurement (``trtprof/serving/driver.py``'s docstring). This script checks the
fix in one call (~1 min on an H200).

For ResNet-50 (torchvision, weights=None, exported to ONNX, trtprof's torch backend), fp32 (TF32 off),
tf32 and fp16, batch 1 and 32, 1 and 4 in flight, it measures, one after the other at each point:

* **driver**: ``trtprof.serving.driver`` (``gpu_sessions`` + ``run_window``) as ``bench --concurrency`` runs it;
* **plain**: a loop written as a user would, with nothing from trtprof: ``torch.inference_mode``,
  ``cudnn.benchmark = True``, the TF32 flags of the precision, one thread and one ``torch.cuda.Stream``
  per request in flight, each thread warmed up (one at a time) before the clock starts, then each
  request = H2D from pinned memory, the module, D2H, ``stream.synchronize()``; requests/s = requests
  completed inside the window / its length.

Both run the same torch module object (the runner's), so the ratio isolates the driver. Both run on the
same long-lived threads (the driver's ``Workers``) so that cuDNN's per-thread autotuning is paid once
per thread and shape; the driver goes first at each point, so it pays it.

Usage (device machine, repository root):
    python3 benchmarks/gpu_serving_check.py [--out "$OUT/gpu_serving_check.json"] [--max-s 60]
Prints one line per point and the fp16/fp32 and tf32/fp32 ratios of both; driver/plain near 1 (and
the plain loop's fp16 faster than its fp32 at batch 32) means the driver is fixed.
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))


def plain_loop(torch, module, feed, *, half: bool, tf32: bool, n: int, workers, streams, warmup_s: float,
               window_s: float) -> dict:
    """The user's loop (see the module docstring): n threads, each on its own stream."""
    torch.backends.cudnn.benchmark = True
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = tf32
    x_host = torch.from_numpy(feed).pin_memory()
    stop, barrier, warm = threading.Event(), threading.Barrier(n + 1), threading.Lock()
    ends: list[list[float]] = [[] for _ in range(n)]

    def work(i: int) -> None:
        stream = streams[i]
        x_dev = torch.empty(x_host.shape, dtype=x_host.dtype, device="cuda")
        y_host = None
        with torch.cuda.stream(stream), torch.inference_mode():
            def request():
                nonlocal y_host
                x_dev.copy_(x_host, non_blocking=True)
                y = module(x_dev.half() if half else x_dev)
                y = (y if isinstance(y, torch.Tensor) else next(iter(y.values() if isinstance(y, dict) else y))).float()
                if y_host is None:
                    y_host = torch.empty(y.shape, dtype=y.dtype).pin_memory()
                y_host.copy_(y, non_blocking=True)
                stream.synchronize()

            try:
                with warm:
                    for _ in range(3):
                        request()
                barrier.wait()
                while not stop.is_set():
                    request()
                    ends[i].append(time.perf_counter())
            except threading.BrokenBarrierError:
                pass
            except BaseException:
                barrier.abort()
                raise

    jobs = [workers.submit(i, lambda i=i: work(i)) for i in range(n)]
    try:
        barrier.wait()
        time.sleep(warmup_s)
        start = time.perf_counter()
        time.sleep(window_s)
        end = time.perf_counter()
    finally:
        stop.set()
        for job in jobs:
            job.result()
    done = sum(1 for e in ends for t in e if start <= t <= end)
    return {"requests": done, "wall_s": end - start, "requests_per_s": done / (end - start)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, default=None, help="also write the numbers as JSON here")
    ap.add_argument("--precisions", default="fp32,tf32,fp16")
    ap.add_argument("--batch-sizes", default="1,32")
    ap.add_argument("--concurrency", default="1,4")
    ap.add_argument("--window-s", type=float, default=0.3)
    ap.add_argument("--warmup-s", type=float, default=0.1)
    ap.add_argument("--max-s", type=float, default=60.0, help="start no point after this many seconds")
    args = ap.parse_args(argv)
    t0 = time.monotonic()

    import torch
    from gpu_fidelity import MAKERS

    from trtprof.system import cuda
    from trtprof.backends.base import set_autotune
    from trtprof.measure.bench import load_runner
    from trtprof.builder.pipeline import BuildSettings, build_engines
    from trtprof.model.inputs import make_inputs, parse_batch_sizes, resolve_shapes
    from trtprof.serving.driver import Workers, gpu_sessions, run_window
    from trtprof.spec import Precision

    precisions = [Precision.parse(p) for p in args.precisions.split(",")]
    sizes = parse_batch_sizes(args.batch_sizes)
    levels = [int(c) for c in args.concurrency.split(",")]
    rows: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="serving-check-") as tmp:
        model = MAKERS["resnet50"](Path(tmp) / "resnet50.onnx")
        built = {o.record.precision: o.record for o in build_engines(
            model, precisions, sizes, BuildSettings(engines_dir=Path(tmp) / "engines", backend="torch"))}
        runners = {p.value: load_runner(built[p.value]) for p in precisions}
        for r in runners.values():
            set_autotune(r, True)
        print(f"built and loaded in {time.monotonic() - t0:.0f} s on {torch.cuda.get_device_name(0)}, torch "
              f"{torch.__version__}, cuDNN {torch.backends.cudnn.version()}", flush=True)
        first = next(iter(runners.values()))
        feeds = {b: make_inputs(first.inputs, resolve_shapes(first.inputs, b, {}), seed=0) for b in sizes}
        n_max = max(levels)
        drv_streams = [cuda.Stream() for _ in range(n_max)]
        plain_streams = [torch.cuda.Stream() for _ in range(n_max)]
        with Workers(n_max) as workers:
            for b in sizes:
                for n in levels:
                    for p in precisions:
                        if time.monotonic() - t0 > args.max_s:
                            print(f"--max-s {args.max_s:g} reached: batch {b} x{n} {p.value} and later not run")
                            break
                        runner = runners[p.value]
                        with gpu_sessions(runner, n, feeds[b], copies=True, streams=drv_streams) as (sessions, _):
                            w = run_window(sessions, warmup_s=args.warmup_s, window_s=args.window_s, workers=workers)
                        ref = plain_loop(torch, runner.module, next(iter(feeds[b].values())),
                                         half=p == Precision.FP16, tf32=p == Precision.TF32, n=n, workers=workers,
                                         streams=plain_streams, warmup_s=args.warmup_s, window_s=args.window_s)
                        row = {"precision": p.value, "batch_size": b, "concurrency": n,
                               "driver_requests_per_s": w.requests_per_s, "driver_requests": w.requests,
                               "plain_requests_per_s": ref["requests_per_s"], "plain_requests": ref["requests"]}
                        row["driver_over_plain"] = (row["driver_requests_per_s"] / row["plain_requests_per_s"]
                                                    if ref["requests_per_s"] else None)
                        rows.append(row)
                        print(f"{p.value:>5} batch {b:>3} x{n}: driver {w.requests_per_s:8.1f} req/s "
                              f"({w.requests_per_s * b:8.0f} samples/s)   plain {ref['requests_per_s']:8.1f} req/s   "
                              f"driver/plain {row['driver_over_plain'] or float('nan'):.2f}   "
                              f"[{time.monotonic() - t0:.0f} s]", flush=True)
        for s in drv_streams:
            s.close()
        for r in runners.values():
            r.close()
    print_ratios(rows)
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps({"device": torch.cuda.get_device_name(0), "date": dt.date.today().isoformat(),
                                        "torch": torch.__version__, "cudnn": torch.backends.cudnn.version(),
                                        "settings": vars(args) | {"out": str(args.out)}, "points": rows},
                                       indent=1, default=str))
    return 0


def print_ratios(rows: list[dict]) -> None:
    """fp16/fp32 and tf32/fp32 throughput ratios, the driver's next to the plain loop's."""
    by = {(r["precision"], r["batch_size"], r["concurrency"]): r for r in rows}
    for (prec, b, n), r in sorted(by.items(), key=lambda kv: (kv[0][1], kv[0][2], kv[0][0])):
        base = by.get(("fp32", b, n))
        if prec == "fp32" or base is None or not base["driver_requests_per_s"] or not base["plain_requests_per_s"]:
            continue
        print(f"{prec}/fp32 batch {b} x{n}: driver {r['driver_requests_per_s'] / base['driver_requests_per_s']:.2f}x, "
              f"plain {r['plain_requests_per_s'] / base['plain_requests_per_s']:.2f}x")


if __name__ == "__main__":
    sys.exit(main())
