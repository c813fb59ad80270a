"""Where onnxruntime-cuda faults when one runner serves two batch sizes (issue 42, found 2026-12-03 on the H200).

`compare --backend onnxruntime-cuda --batch-sizes 1,32` on timm's EfficientNet-B0 and MobileNetV3-L ended with
"load 1 (worker process): cudaEventDestroy failed: cudaErrorIllegalAddress" (…MisalignedAddress); each batch size
alone ran, and ResNet-50 (1/32/256) and ConvNeXt-T (1/32) ran. A worker keeps one device state per batch size
(``measure.kept_launch``) and replays one ORT graph per bound buffer set (``gpu_graph_id``); in between, ORT runs
eagerly at the other shape (the runner's ``prepare``, the accuracy pass). A graph replays what it captured: any host
or device resource a kernel baked into it and later gave up (a per-shape plan or buffer a kernel rebuilds when the
shape changes) is read anew by the replay. (The pinned staging buffers ORT PR #32121 keeps alive are not it: that fix
is in onnxruntime-gpu 1.31.1's CUDA provider.)

Each scenario runs in a child process of its own (a CUDA fault poisons the context), with the engines loaded as a
worker loads them, and after every step synchronises and reports: the step, OK or the error, the compute median:

- ``kept``: inside one LaunchKeeper, time at 1, then 32, then 1 again, then 32 (a worker's order);
- ``kept+infer``: as ``kept`` with the accuracy pass's eager ``infer`` at 1 and 32 before the first timing
  (load 0's worker);
- ``fresh``: the same order, each block setting up and releasing its own state (no keeper);
- ``one-shape``: 1 only, twice (control);
- ``split``: as ``kept``, but each batch size on runners of its own (one ORT session per shape): the fix to try
  if ``kept`` faults and this does not;
- ``per-shape``: as ``kept``, on the runner as trtprof loads it, told nothing ahead: it captures at 1, then meets
  32 and opens a session for it (``session_per_shape``: a shape met after the load's session captured);
- ``expected``: as ``per-shape``, the runner told both batch sizes first (``expect_shapes``, as compare's workers
  do before priming): its load's session runs eagerly at each, then captures and replays both (one session).
  ``fresh``, ``kept`` and ``kept+infer`` turn the runner's own sessions off (one session for every shape, as
  before the fix) to show the fault it avoids.

It also prints the runner's settings (CUDA graph on, refused and why, dims fixed per shape or not), which decide
the path. ``CUDA_LAUNCH_BLOCKING=1`` in the environment makes the failing step the one that faulted.

    python3 benchmarks/ort_shape_switch.py a.fp32.onnx:fp32 a.fp16.onnx:fp16 [--batch-sizes 1,32] [--json out.json]
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from contextlib import ExitStack
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]

SCENARIOS = ("one-shape", "fresh", "kept", "kept+infer", "split", "per-shape", "expected")
ONE_SESSION = ("fresh", "kept", "kept+infer")  # the runner made to run every shape on its load's session


def steps_of(scenario: str, sizes: list[int]) -> list[tuple[str, int]]:
    """The (action, batch) steps of a scenario: ``infer`` (eager, host in and out) or ``time`` (a graph block)."""
    first = sizes[0]
    if scenario == "one-shape":
        return [("time", first), ("time", first)]
    order = [("time", b) for b in sizes] + [("time", b) for b in sizes]
    return ([("infer", b) for b in sizes] if scenario == "kept+infer" else []) + order


def child(scenario: str, items: list[str], sizes: list[int]) -> None:
    from ort_block_costs import labelled_records, shapes_at

    from trtprof.measure.bench import load_runner
    from trtprof.measure.kept_launch import LaunchKeeper
    from trtprof.measure.timing import TimingConfig, time_device
    from trtprof.model.inputs import make_inputs

    per_batch = {b: {} for b in sizes}
    for label, record in labelled_records(items).items():
        shared = load_runner(record, log_warnings=True)
        if scenario in ONE_SESSION and getattr(shared, "_dynamic_refused", None) is None:
            shared._reopen = None  # one ORT session for every shape: the runner as it was before the fix
        for b in sizes:  # one runner for every batch size, or (split) one each
            per_batch[b][label] = load_runner(record, log_warnings=True) if scenario == "split" and b != sizes[0] \
                else shared
    runners = per_batch[sizes[0]]
    out: dict = {"scenario": scenario, "settings": {}, "steps": []}
    for label, runner in runners.items():
        settings = getattr(runner, "settings", {})
        out["settings"][label] = {k: settings.get(k) for k in ("cuda_graph", "cuda_graph_refused",
                                                               "free_dimension_overrides", "cuda_graph_refused_dynamic")}
    first = next(iter(runners.values()))
    feeds = {b: make_inputs(first.inputs, shapes_at(first, b), seed=0) for b in sizes}
    if scenario == "expected":
        for runner in runners.values():
            runner.expect_shapes([shapes_at(first, b) for b in sizes])
    with ExitStack() as stack:
        if scenario != "fresh":
            stack.enter_context(LaunchKeeper())
        for action, batch in steps_of(scenario, sizes):
            for label, runner in per_batch[batch].items():
                row = {"action": action, "batch": batch, "arm": label}
                try:
                    if action == "infer":
                        runner.infer(feeds[batch])
                    else:
                        s = time_device(runner, feeds[batch], TimingConfig(warmup=3, iterations=20, cuda_graph=True))
                        row["compute_ms"] = round(float(statistics.median(s.stages["compute_ms"])), 4)
                        row["mode"] = s.device.get("launch", {}).get("mode")
                    row["ok"] = True
                except Exception as err:  # noqa: BLE001 - the point is to report where it fails
                    row["ok"] = False
                    row["error"] = f"{type(err).__name__}: {err}"[:300]
                out["steps"].append(row)
                print(json.dumps(row), flush=True)
                if not row["ok"]:
                    print(json.dumps({"settings": out["settings"]}), flush=True)
                    return
    for label, runner in runners.items():
        out["settings"][label]["sessions_opened"] = getattr(runner, "sessions_opened", None)
    print(json.dumps({"settings": out["settings"]}), flush=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("engines", nargs="+", help="ENGINE.onnx:LABEL (files trtprof built for onnxruntime-cuda)")
    ap.add_argument("--batch-sizes", default="1,32")
    ap.add_argument("--scenarios", default=",".join(SCENARIOS))
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--json")
    args = ap.parse_args()
    sizes = [int(b) for b in args.batch_sizes.split(",")]
    if args.child:
        child(args.child, args.engines, sizes)
        return
    result = {}
    for scenario in args.scenarios.split(","):
        done = subprocess.run([sys.executable, __file__, "--child", scenario, "--batch-sizes", args.batch_sizes,
                               *args.engines], capture_output=True, text=True, timeout=300)
        rows = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
        result[scenario] = {"rc": done.returncode, "rows": rows, "stderr_tail": done.stderr[-1500:]}
        steps = [r for r in rows if "action" in r]
        failed = next((r for r in steps if not r["ok"]), None)
        settings = next((r["settings"] for r in rows if "settings" in r), {})
        text = " ".join(f"{r['action']}@{r['batch']}/{r['arm']}={r.get('compute_ms', 'ok')}" for r in steps if r["ok"])
        print(f"shape-switch {scenario:10s} rc {done.returncode} {'FAILED at ' + json.dumps(failed) if failed else 'ok'}"
              f" | {text}", flush=True)
        print(f"shape-switch {scenario:10s} settings {json.dumps(settings)}", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
