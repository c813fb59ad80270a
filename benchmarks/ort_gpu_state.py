"""Does a graph replay's GPU time depend on what else lives on the machine? (issue 42, the batch-1 worker gap)

`ort_worker_gap.py` found (H200, 2026-12-03) that ResNet-50 at batch 1 replays its CUDA graph with the same kernels
and the same busy time in every process, but with shorter gaps between kernels when six compare-like child
processes live beside it (fp32 span − busy 0.017 ms a replay against 0.078 ms; events fp16 0.752 ms against 0.835)
— whether those children primed side by side or one by one — and that the short gaps last a few seconds after
they exit. This script holds everything else fixed and changes only what lives beside the timing process:

- ``alone``: nothing beside it, the parent timed four times over 15 s (does the state change by itself?);
- ``sleep``: K idle processes that touch no GPU;
- ``ref``: one run of the independent reference beside it (its own process, run to its end);
- ``spin``: K processes keeping a CPU core busy (no CUDA);
- ``bare``: K processes holding a bare CUDA context (cuda-python ``cudaFree(0)``), idle;
- ``worker``: K ``ort_worker_gap.py`` children, each with the engines loaded and primed (a compare worker), idle.

For each: the parent's compute medians (``time_device`` continuous, trtprof's loop) before the holders, with them
(just started, and 10 s later), and after they exit (at once, and 10 s later); and the independent reference
(``reference_ort_iobinding.py``, its own process) with the workers alive and without them — whether the state moves
an independent loop too (then trtprof's workers and a user's loop see the same GPU, in the same state).

    python3 benchmarks/ort_gpu_state.py a.fp32.onnx:fp32 a.fp16.onnx:fp16 [--holders 5] [--json out.json]
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]

HOLD = {"sleep": "import sys\nprint('ready', flush=True)\nsys.stdin.read()",
        "spin": "import sys\nprint('ready', flush=True)\nwhile True: pass",
        "bare": "from cuda.bindings import runtime as r\nr.cudaFree(0)\nprint('ready', flush=True)\nimport sys\nsys.stdin.read()"}


class Holders:
    """K processes of one kind, started and ready, until ``stop``."""

    def __init__(self, kind: str, k: int, items: list[str]) -> None:
        from ort_worker_gap import Child

        self.kind = kind
        if kind == "worker":
            self.children = [Child(items, 1) for _ in range(k)]
            for c in self.children:
                c.answer()
            for c in self.children:
                c.ask("prime")
            self.procs = [c.proc for c in self.children]
        else:
            self.procs = [subprocess.Popen([sys.executable, "-c", HOLD[kind]], stdin=subprocess.PIPE,
                                           stdout=subprocess.PIPE, text=True) for _ in range(k)]
            for p in self.procs:
                assert p.stdout is not None
                p.stdout.readline()

    def stop(self) -> None:
        if self.kind == "worker":
            for c in self.children:
                c.close()
        for p in self.procs:
            if p.poll() is None:
                p.kill()
            p.wait()


def reference(items: list[str]) -> dict:
    """The independent loop's per-arm numbers (its own process): serial compute and back-to-back ms at batch 1."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "ref.json"
        subprocess.run([sys.executable, str(HERE / "reference_ort_iobinding.py"), "--batch-sizes", "1",
                        "--iters", "300", "--out", str(out), *items], check=True, stdout=subprocess.DEVNULL)
        rows = json.loads(out.read_text())
    return {r["precision"]: {k: r[k] for k in ("compute_ms", "back_to_back_ms")} for r in rows}


def main() -> None:
    from ort_block_costs import continuous_compute
    from ort_worker_gap import Engines

    ap = argparse.ArgumentParser()
    ap.add_argument("engines", nargs="+", help="ENGINE.onnx:LABEL (files trtprof built for onnxruntime-cuda)")
    ap.add_argument("--holders", type=int, default=5)
    ap.add_argument("--kinds", default="sleep,ref,spin,bare,worker")
    ap.add_argument("--json")
    args = ap.parse_args()
    parent = Engines(args.engines, 1)
    parent.prime()
    rows: list = []

    def measure(kind: str, when: str) -> None:
        got = continuous_compute(parent.runners, parent.feeds)
        rows.append({"kind": kind, "when": when, "trtprof_compute_ms": got})
        print(f"gpu-state {kind:6s} {when:12s} trtprof compute ms: "
              + " ".join(f"{n} {v:.4f}" for n, v in got.items()), flush=True)

    def ref(kind: str, when: str) -> None:
        got = reference(args.engines)
        rows.append({"kind": kind, "when": when, "reference": got})
        print(f"gpu-state {kind:6s} {when:12s} reference: {json.dumps(got)}", flush=True)

    try:
        for t in range(4):
            measure("none", f"alone+{5 * t}s")
            time.sleep(5 if t < 3 else 0)
        for kind in args.kinds.split(","):
            if kind == "ref":
                ref("ref", "run")
                measure("ref", "after")
                time.sleep(10)
                measure("ref", "after+10s")
                continue
            holders = Holders(kind, args.holders, args.engines)
            try:
                measure(kind, "with")
                time.sleep(10)
                measure(kind, "with+10s")
                if kind == "worker":
                    ref(kind, "with")
            finally:
                holders.stop()
            measure(kind, "after")
            time.sleep(10)
            measure(kind, "after+10s")
        ref("none", "end")
    finally:
        parent.close()
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
