"""Where the wall time of one ``trtprof compare`` goes: timestamps (seconds since this process was
created) around its phases, from wrappers put on the real functions before the real CLI runs.

Phases: imports, the engine cache lookup (``resolve_records``), the workers' spawn and the wait for
them, the accuracy pass (``load_reference``), the analysis imports (``preload_analysis``), each batch
size's loop (``run_interleaved``) and each load's opening, closing the workers, the analysis, the
environment, printing and writing; the whole process's wall time is what ``time`` says around it.

    PYTHONPATH=. time python benchmarks/compare_timeline.py compare model.onnx --precisions fp32,fp32 \\
        --backend onnxruntime --batch-sizes 8 --out /tmp/c.json
"""
from __future__ import annotations

import functools
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from trtprof.util.clock import process_start  # noqa: E402

T0 = process_start() or time.perf_counter()
events: list[tuple[float, str]] = []


def mark(name: str) -> None:
    events.append((time.perf_counter() - T0, name))


mark("python up, this script running")
import trtprof.cli as cli  # noqa: E402
from trtprof.compare import ab
from trtprof.measure import interleave, workers  # noqa: E402
from trtprof.compare import core as cmp  # noqa: E402
from trtprof.compare import measuring  # noqa: E402
from trtprof.cli import _common  # noqa: E402
from trtprof.cli import compare as cli_compare  # noqa: E402

mark("trtprof's compare modules imported")


def wrap(owner, name: str) -> None:
    f = getattr(owner, name)

    @functools.wraps(f)
    def timed(*a, **k):
        mark(f"> {name}")
        try:
            return f(*a, **k)
        finally:
            mark(f"< {name}")

    setattr(owner, name, timed)


# each name wrapped where its caller looks it up (compare.core calls the phases; compare.measuring the loop)
for owner, name in [(cmp, "resolve_records"), (ab, "resolve_records"), (cmp, "compare_records"),
                    (measuring, "load_reference"), (measuring, "preload_analysis"), (cmp, "measure"),
                    (measuring, "run_interleaved"), (cmp, "analyse"),
                    (cmp, "collect"), (_common, "write_compare_outputs"), (cli_compare, "print_comparison"),
                    (workers.WorkerPool, "spawn"), (workers.WorkerPool, "start"), (workers.WorkerPool, "close"),
                    # the accuracy pass by load 0's worker (issue 33; absent before it: skipped)
                    (workers.WorkerPool, "facts"), (workers.WorkerPool, "outputs")]:
    if hasattr(owner, name):
        wrap(owner, name)
open_load = interleave.RoundLoop.add_load


def add_load(self):
    mark(f"> load {len(self.loads)}")
    try:
        return open_load(self)
    finally:
        mark(f"< load {len(self.loads) - 1}")


interleave.RoundLoop.add_load = add_load  # type: ignore[method-assign]
sys.argv = ["trtprof", *sys.argv[1:]]
rc = cli.main()  # argv None: the budget counts from this process's start, as for `trtprof compare`
mark("main returned (the interpreter's exit follows)")
previous = 0.0
for t, name in events:
    print(f"{t:7.2f} (+{t - previous:5.2f}) {name}", file=sys.stderr)
    previous = t
out = next((sys.argv[i + 1] for i, a in enumerate(sys.argv[:-1]) if a == "--out"), None)
if out is not None and Path(out).exists():  # what ran beside the timed rounds (the compare JSON, issue 33)
    import json

    record = json.loads(Path(out).read_text()).get("concurrent_with_timing")
    if record:
        print(f"first timed round at {record['first_timed_s']} s of the pool; beside the timing: "
              f"{', '.join(record['overlapping']) or 'nothing'}", file=sys.stderr)
        for row in record["work"]:
            print(f"  {row['what']}: {row['start_s']} → {row['end_s']} s, {row['overlap_s']} s inside timed rounds",
                  file=sys.stderr)
import resource  # noqa: E402

own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
print(f"CPU seconds: this process {own.ru_utime + own.ru_stime:.2f} (max RSS {own.ru_maxrss / 1024:.0f} MiB), "
      f"its reaped children (the workers) {children.ru_utime + children.ru_stime:.2f}", file=sys.stderr)
with open("/proc/loadavg", encoding="ascii") as f:
    print(f"load average: {f.read().strip()}", file=sys.stderr)
sys.exit(rc)
