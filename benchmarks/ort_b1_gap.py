"""Where the batch-1 gap between trtprof's onnxruntime-cuda compute time and the independent ORT loop comes from
(issue 42): at batch 1 every arm measured 0.06-0.14 ms lower in trtprof than in reference_ort_iobinding.py, serial
or back to back (2026-12-03), so the fp16/fp32 ratios came out 6-8 % higher.

Default mode (no torch in the process), per engine file: one session as a user opens it (ORT's own stream, graph
on, device OrtValues bound), run three ways taking turns: ``default`` (no run options), ``no_sync`` (the
reference's back-to-back option ``disable_synchronize_execution_providers``), ``no_sync_graph_id`` (that and an
explicit ``gpu_graph_id``, as trtprof's runner sets them). For each, the host time of one call (a call that returns
in microseconds did not wait for the GPU: ORT's graph replay synchronises its stream unless told not to) and the
time per run back to back; then trtprof's own ``time_device`` on the file (``trtprof``: compute medians). A graph ORT
refuses as exported (ViT, BERT: shape nodes on the CPU EP) gets the named dims fixed at the batch, as the reference
does (reference_ort_iobinding.py's ``named_dims``, its feeds too). ``--user-stream`` adds the same three modes on a
second session given a stream of the caller's (``user_compute_stream``, made with cuda-python, non-blocking as
trtprof's is): ``user_default``, ``user_no_sync``, ``user_no_sync_graph_id``.

``--torch`` mode: the same file timed with torch's events and copies around each run on a user stream, and the
kernels' GPU time per run (torch.profiler): ``own_wall``, ``user_wall``, ``user_event``, ``user_h2d``, ``kernels``.
With torch in the process every ORT run took ~0.2 ms more (2026-12-03), so its numbers compare only with each other.

    python3 benchmarks/ort_b1_gap.py --batch 1 a.onnx:fp32 b.onnx:fp16 [--rounds 6 --iters 200] [--torch]
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import onnxruntime as ort

torch = None  # imported by the torch mode only: with torch in the process ORT's runs took 0.2 ms more (2026-12-03)

sys.path[:0] = [str(Path(__file__).resolve().parent), str(Path(__file__).resolve().parents[1])]
DTYPES = {"tensor(float)": np.float32, "tensor(float16)": np.float16, "tensor(int64)": np.int64,
          "tensor(int32)": np.int32}


def session(path: str, tf32: bool, stream: int | None, dims: dict | None = None) -> ort.InferenceSession:
    options = {"enable_cuda_graph": "1", "use_tf32": "1" if tf32 else "0"}
    if stream is not None:
        options["user_compute_stream"] = str(stream)
    so = ort.SessionOptions()
    so.log_severity_level = 4
    for name, value in (dims or {}).items():
        so.add_free_dimension_override_by_name(name, value)
    return ort.InferenceSession(path, so, providers=[("CUDAExecutionProvider", options), "CPUExecutionProvider"])


def bound(sess: ort.InferenceSession, batch: int) -> tuple:
    """IO binding on torch CUDA tensors (inputs seeded, as ORT's docs bind torch tensors: ``bind_input`` with the
    tensor's ``data_ptr``), and a pinned host twin of the first input and of the first output."""
    rng = np.random.default_rng(0)
    host = {}
    for i in sess.get_inputs():
        shape = [batch if not isinstance(d, int) else d for d in i.shape]
        dtype = DTYPES[i.type]
        host[i.name] = (rng.integers(0, 1000, shape).astype(dtype) if np.issubdtype(dtype, np.integer)
                        else rng.standard_normal(shape).astype(dtype))
    plain = sess.run(None, host)
    binding = sess.io_binding()
    ins = {n: torch.from_numpy(a).cuda() for n, a in host.items()}
    for n, t in ins.items():
        binding.bind_input(n, "cuda", 0, host[n].dtype, list(t.shape), t.data_ptr())
    outs = [torch.from_numpy(o).cuda() for o in plain]
    for meta, o, t in zip(sess.get_outputs(), plain, outs):
        binding.bind_output(meta.name, "cuda", 0, o.dtype, list(t.shape), t.data_ptr())
    torch.cuda.synchronize()
    pinned_in = next(iter(ins.values())).cpu().pin_memory()
    pinned_out = outs[0].cpu().pin_memory()
    return binding, ins, outs, pinned_in, pinned_out


def wall(sess, binding, iters: int) -> list[float]:
    out = []
    for _ in range(iters):
        t0 = time.perf_counter()
        sess.run_with_iobinding(binding)
        out.append(1e3 * (time.perf_counter() - t0))
    return out


def events(sess, binding, stream: torch.cuda.Stream, iters: int, copies: tuple | None) -> list[float]:
    """Per run: the ms between the events right around it; with ``copies`` ((pinned_in, dev_in), (pinned_out,
    dev_out)) an H2D copy before and a D2H copy after, inside events of their own, as trtprof's loop enqueues them."""
    out = []
    with torch.cuda.stream(stream):
        for _ in range(iters):
            e = [torch.cuda.Event(enable_timing=True) for _ in range(4)]
            if copies:
                e[0].record(stream)
                copies[0][1].copy_(copies[0][0], non_blocking=True)
            e[1].record(stream)
            sess.run_with_iobinding(binding)
            e[2].record(stream)
            if copies:
                copies[1][0].copy_(copies[1][1], non_blocking=True)
                e[3].record(stream)
            e[3 if copies else 2].synchronize()
            out.append(e[1].elapsed_time(e[2]))
    return out


def kernel_ms(sess, binding, runs: int = 50) -> float:
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(runs):
            sess.run_with_iobinding(binding)
        torch.cuda.synchronize()
    total_us = sum(e.device_time_total for e in prof.key_averages() if e.device_time_total > 0
                   and "memcpy" not in e.key.lower() and "memset" not in e.key.lower())
    return total_us / 1e3 / runs


def trtprof_compute(path: str, batch: int) -> dict:
    """trtprof's own loop on the engine file (its record beside it): compute medians with and without copies."""
    from ort_block_costs import record_for, shapes_at

    from trtprof.measure.bench import load_runner
    from trtprof.measure.timing import TimingConfig, time_device
    from trtprof.model.inputs import make_inputs

    runner = load_runner(record_for(Path(path)))
    try:
        feeds = make_inputs(runner.inputs, shapes_at(runner, batch), seed=0)
        out = {}
        for copies in (True, False):
            s = time_device(runner, feeds, TimingConfig(warmup=50, iterations=600, copies=copies, cuda_graph=True))
            out["copies" if copies else "no_copies"] = round(float(np.median(s.stages["compute_ms"])), 4)
        return out
    finally:
        runner.close()


def open_fixed(path: str, tf32: bool, batch: int, stream: int | None) -> tuple[ort.InferenceSession, dict]:
    """A session with ORT's graph as a user opens it (``session``); where ORT refuses the graph, with the named dims
    fixed at the batch (the reference's ``named_dims``): the session and the dims fixed."""
    from reference_ort_iobinding import named_dims

    try:
        return session(path, tf32, stream), {}
    except Exception:  # noqa: BLE001 - ORT refuses a graph where a node is not on the CUDA EP
        dims = named_dims(path, batch)
        return session(path, tf32, stream, dims), dims


def host_modes(path: str, tf32: bool, batch: int, rounds: int, iters: int, stream: int | None = None,
               prefix: str = "") -> dict:
    """Without torch in the process: graph on, outputs and inputs on ORT's device OrtValues; ORT's own stream, or
    ``stream`` (``user_compute_stream``) with the keys prefixed by ``prefix``.
    Per mode, the host time per run (median of single calls: a call that returns in microseconds did not wait for
    the GPU) and per run back to back (``iters`` runs, then one default run, which synchronises; divided by
    ``iters + 1``): ``default`` (no run options, as a user writes it), ``no_sync`` (the reference's back-to-back
    option), ``no_sync_graph_id`` (that and ``gpu_graph_id`` 1, as trtprof's runner sets them)."""
    from reference_ort_iobinding import feeds_for

    sess, dims = open_fixed(path, tf32, batch, stream)
    host = feeds_for(sess, batch)
    plain = sess.run(None, host, _no_graph())
    binding = sess.io_binding()
    keep = [ort.OrtValue.ortvalue_from_numpy(a, "cuda", 0) for a in host.values()]
    for name, v in zip(host, keep):
        binding.bind_ortvalue_input(name, v)
    outs = [ort.OrtValue.ortvalue_from_shape_and_type(o.shape, o.dtype, "cuda", 0) for o in plain]
    for meta, v in zip(sess.get_outputs(), outs):
        binding.bind_ortvalue_output(meta.name, v)
    modes = {"default": None, "no_sync": {"disable_synchronize_execution_providers": "1"},
             "no_sync_graph_id": {"disable_synchronize_execution_providers": "1", "gpu_graph_id": "1"}}
    options = {}
    for mode, entries in modes.items():
        if entries is None:
            options[mode] = None
            continue
        options[mode] = ort.RunOptions()
        for k, v in entries.items():
            options[mode].add_run_config_entry(k, v)
    sync = ort.RunOptions()
    sync.add_run_config_entry("gpu_graph_id", "1")
    for mode in modes:  # capture every graph id first
        for _ in range(5):
            sess.run_with_iobinding(binding, options[mode])
            sess.run_with_iobinding(binding, sync if mode == "no_sync_graph_id" else None)
    call: dict = {m: [] for m in modes}
    per_run: dict = {m: [] for m in modes}
    for _ in range(rounds):
        for mode in modes:
            last = sync if mode == "no_sync_graph_id" else None  # a synchronising run on the same graph id
            for _ in range(iters // 10):
                t0 = time.perf_counter()
                sess.run_with_iobinding(binding, options[mode])
                call[mode].append(1e3 * (time.perf_counter() - t0))
                sess.run_with_iobinding(binding, last)
            t0 = time.perf_counter()
            for _ in range(iters):
                sess.run_with_iobinding(binding, options[mode])
            sess.run_with_iobinding(binding, last)
            per_run[mode].append(1e3 * (time.perf_counter() - t0) / (iters + 1))
    return {**({f"{prefix}free_dims": dims} if dims else {}),
            **{f"{prefix}{m}_call_ms": round(float(np.median(v)), 4) for m, v in call.items()},
            **{f"{prefix}{m}_back_to_back_ms": round(float(np.median(v)), 4) for m, v in per_run.items()}}


def _no_graph() -> ort.RunOptions:
    """Run options for a plain run outside every graph (``gpu_graph_id`` -1): the run that tells the outputs' shapes
    is not one ORT captures, with its host copies inside."""
    options = ort.RunOptions()
    options.add_run_config_entry("gpu_graph_id", "-1")
    return options


def user_stream() -> int:
    """A non-blocking CUDA stream of the caller's (cuda-python), for ``user_compute_stream``."""
    from cuda.bindings import runtime as rt

    err, stream = rt.cudaStreamCreateWithFlags(rt.cudaStreamNonBlocking)
    if int(err) != 0:
        raise RuntimeError(f"cudaStreamCreateWithFlags: {err}")
    return int(stream)




def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("files", nargs="+", help="FILE.onnx:PRECISION")
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--iters", type=int, default=200)
    parser.add_argument("--out", default=None)
    parser.add_argument("--user-stream", action="store_true", help="the host modes on a user_compute_stream too")
    parser.add_argument("--torch", action="store_true", help="the torch mode: events, copies, kernel times (torch.profiler)")
    args = parser.parse_args()
    rows = []
    for item in args.files:
        path, _, precision = item.rpartition(":")
        tf32 = precision == "tf32"
        if not args.torch:
            row = {"file": path, "precision": precision, "batch": args.batch, "onnxruntime": ort.__version__,
                   **host_modes(path, tf32, args.batch, args.rounds, args.iters)}
            if args.user_stream:
                row.update(host_modes(path, tf32, args.batch, args.rounds, args.iters, user_stream(), "user_"))
            try:
                row["trtprof"] = trtprof_compute(path, args.batch)
            except Exception as err:  # noqa: BLE001 - the independent rows stand without it
                row["trtprof_error"] = f"{type(err).__name__}: {err}"
            rows.append(row)
            print("b1-host " + " ".join(f"{k}={v}" for k, v in row.items() if k != "file"), flush=True)
            continue
        global torch
        import torch
        stream = torch.cuda.Stream()
        own = session(path, tf32, None)
        user = session(path, tf32, stream.cuda_stream)
        own_b = bound(own, args.batch)
        user_b = bound(user, args.batch)
        binding_u, ins_u, outs_u, pin_in, pin_out = user_b
        copies = ((pin_in, next(iter(ins_u.values()))), (pin_out, outs_u[0]))
        for _ in range(3):  # capture and warm both
            wall(own, own_b[0], 20)
            wall(user, binding_u, 20)
        got: dict[str, list[float]] = {k: [] for k in ("own_wall", "user_wall", "user_event", "user_h2d")}
        for _ in range(args.rounds):
            got["own_wall"] += wall(own, own_b[0], args.iters)
            got["user_wall"] += wall(user, binding_u, args.iters)
            got["user_event"] += events(user, binding_u, stream, args.iters, None)
            got["user_h2d"] += events(user, binding_u, stream, args.iters, copies)
        row = {"file": path, "precision": precision, "batch": args.batch, "onnxruntime": ort.__version__,
               **{k: float(np.median(v)) for k, v in got.items()}, "kernels": kernel_ms(own, own_b[0])}
        del own, user
        try:
            row["trtprof"] = trtprof_compute(path, args.batch)
        except Exception as err:  # noqa: BLE001 - the independent rows stand without it
            row["trtprof_error"] = f"{type(err).__name__}: {err}"
        rows.append(row)
        print("b1-gap " + " ".join(f"{k}={v:.4f}" if isinstance(v, float) else f"{k}={v}" for k, v in row.items()
                                   if k != "file"), flush=True)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
