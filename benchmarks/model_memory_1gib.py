"""The 1 GiB model case of issue 36 (item 8): a ~1.06 GiB ONNX model (a wide MLP: a chain of 4096×4096
float32 MatMuls, seeded) through `trtprof build --fp32 --fp16` and `trtprof compare` with their defaults,
ONNX Runtime on the CPU. For each command: what trtprof.system.model_memory predicts from the weight
bytes and the memory available at that moment, what trtprof said (its last stderr line, and the
preflight's "memory:" line if any), and the peak RSS of the whole process tree (sampled every 50 ms).

A compare refused with "try --min-loads N" is run again with that N, as its user would, so that the
prediction is checked against a measured peak at this size too.

Run (nothing else heavy beside it: a 2-load compare of this model peaks near 14 GB):
``nice -n 10 python benchmarks/model_memory_1gib.py --workdir /tmp/m1g | tee benchmarks/results/...txt``
"""
from __future__ import annotations

import argparse
import re
import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from model_memory_cpu import Peak, loads_opened, make_chain, peak_of  # noqa: E402

from trtprof.measure.interleave import MAX_LOADS, MIN_LOADS  # noqa: E402
from trtprof.system import model_memory as mm  # noqa: E402
from trtprof.system.preflight import available_memory_bytes  # noqa: E402

WIDTH = 4096  # one 4096×4096 float32 layer is 67 MB: 17 of them are the issue's ~1.08 GiB
MEGABYTES = 1140  # of weights: 17 layers, 1.14 GB = 1.06 GiB
MIN_LOADS_HINT = re.compile(r"try --min-loads (\d+)")


def gb(n: float) -> str:
    return f"{n / 1e9:.2f} GB"


def said(peak: Peak) -> str:
    """What trtprof said about memory: its preflight line, else its last line."""
    memory = [line.strip() for line in peak.stderr.splitlines() if line.strip().startswith("memory:")]
    return memory[0] if memory else (peak.last_line() or "(nothing on stderr)")


def compare(model: Path, engines: Path, out: Path, weights: int, extra: list[str]) -> Peak:
    available = available_memory_bytes()
    min_loads = int(extra[extra.index("--min-loads") + 1]) if "--min-loads" in extra else MIN_LOADS
    ceiling = mm.loads_that_fit(weights, available, max(MAX_LOADS, min_loads))
    label = f"compare {' '.join(extra) or '(defaults)'}"
    print(f"{label}: predicted {gb(mm.compare_bytes(weights, min_loads))} for its {min_loads} minimum loads, "
          f"{gb(available or 0)} available: {ceiling} loads fit "
          f"({gb(mm.compare_bytes(weights, max(ceiling, 1)))} at that ceiling)", flush=True)
    peak = peak_of(["compare", str(model), "--engines", str(engines), "--out", str(out), *extra])
    print(f"{label}: measured peak {gb(peak.tree)} ({peak.tree / weights:.1f}x weights; parent alone "
          f"{gb(peak.parent)}), {loads_opened(out)} loads opened, rc {peak.rc}, {peak.seconds:.0f} s", flush=True)
    print(f"  trtprof said: {said(peak)}", flush=True)
    return peak


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--workdir", type=Path, required=True, help="a new folder for the model and its engines")
    p.add_argument("--megabytes", type=float, default=MEGABYTES, help=f"of weights (default {MEGABYTES:g}: "
                   "the 1 GiB case; smaller for a quick check of the script)")
    p.add_argument("--keep", action="store_true", help="keep the workdir (model and engines) afterwards")
    args = p.parse_args()
    args.workdir.mkdir(parents=True, exist_ok=False)  # never into a folder holding someone's files
    try:
        model, engines = args.workdir / "wide_mlp.onnx", args.workdir / "engines"
        weights = make_chain(model, args.megabytes, size=WIDTH)
        print(f"model: {model.name}, {weights} bytes of weights ({weights / 2**30:.2f} GiB), "
              f"{weights // (WIDTH * WIDTH * 4)} MatMul layers of {WIDTH}x{WIDTH} float32", flush=True)
        available = available_memory_bytes()
        print(f"build --fp32 --fp16: predicted {gb(mm.build_bytes(weights))} "
              f"({mm.BUILD_FACTOR:g}x weights + runtime), {gb(available or 0)} available", flush=True)
        build = peak_of(["build", str(model), "--fp32", "--fp16", "--engines", str(engines)])
        print(f"build --fp32 --fp16: measured peak {gb(build.tree)} ({build.tree / weights:.1f}x weights), "
              f"rc {build.rc}, {build.seconds:.0f} s", flush=True)
        print(f"  trtprof said: {said(build)}", flush=True)
        first = compare(model, engines, args.workdir / "c.json", weights, [])
        hint = MIN_LOADS_HINT.search(first.last_line())
        if first.rc == 2 and hint:
            compare(model, engines, args.workdir / "c2.json", weights, ["--min-loads", hint.group(1)])
    finally:
        if not args.keep:
            shutil.rmtree(args.workdir)


if __name__ == "__main__":
    main()
