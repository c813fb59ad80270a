"""What ONNX Runtime's warning log costs per inference when a model makes it warn at every run, and what
trtprof's capture of one timed block costs (issue 34: bench and compare now time ORT sessions that log
warnings, as a default ORT session does, inside util.thirdparty's capture).

The model: tests/measure/test_library_warnings.py's ``warning_model`` (an output declared 3 wide that the
graph makes 4 wide: "VerifyOutputSizes" at every run). Sessions at severity 2 (warning, ORT's default) and
4 (fatal only, trtprof's setting before), one thread, fd 2 pointed at /dev/null, interleaved
rounds; then an empty ``third_party_warnings`` block, timed alone.

    PYTHONPATH=. python benchmarks/ort_log_cost.py [--runs 20000] [--rounds 5] > benchmarks/results/ort_log_cost-<machine>-<date>.json
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=20000)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    import numpy as np
    import onnxruntime as ort

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from tests.measure.test_library_warnings import warning_model
    from trtprof.util.thirdparty import third_party_warnings

    with tempfile.TemporaryDirectory() as tmp:
        model = warning_model(Path(tmp) / "warns.onnx")
        saved, null = os.dup(2), os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, 2)  # the sessions' own warnings (at creation too) go nowhere
        sessions = {}
        for severity in (2, 4):
            options = ort.SessionOptions()
            options.log_severity_level = severity
            options.intra_op_num_threads, options.inter_op_num_threads = 1, 1
            sessions[severity] = ort.InferenceSession(str(model), options, providers=["CPUExecutionProvider"])
        feeds = {"x": np.ones((1, 4), np.float32)}
        per_run: dict[int, list[float]] = {2: [], 4: []}
        try:
            for _ in range(args.rounds):
                for severity, session in sessions.items():
                    session.run(None, feeds)
                    t0 = time.perf_counter()
                    for _ in range(args.runs):
                        session.run(None, feeds)
                    per_run[severity].append((time.perf_counter() - t0) / args.runs * 1e6)
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            os.close(null)
    blocks = 2000
    t0 = time.perf_counter()
    for _ in range(blocks):
        with third_party_warnings(repeat=False):
            pass
    capture_us = (time.perf_counter() - t0) / blocks * 1e6
    med = {k: float(np.median(v)) for k, v in per_run.items()}
    print(json.dumps({
        "machine": f"{platform.node()} {os.cpu_count()} cores {platform.processor() or platform.machine()}",
        "load_average_1min": os.getloadavg()[0], "onnxruntime": ort.__version__,
        "runs_per_round": args.runs, "rounds": args.rounds,
        "us_per_run_severity_warning": [round(v, 3) for v in per_run[2]],
        "us_per_run_severity_fatal": [round(v, 3) for v in per_run[4]],
        "median_us_per_run": {"warning (2)": round(med[2], 3), "fatal (4)": round(med[4], 3)},
        "log_cost_us_per_run": round(med[2] - med[4], 3),
        "capture_block_us": round(capture_us, 1),
    }, indent=1))


if __name__ == "__main__":
    main()
