"""compare with other load warm-ups, to size what they cost a lone-loads run and whether they move its numbers
(issue 42). A PROTOTYPE, not a trtprof option: this process runs ``trtprof compare`` with the first load's warm-up
per arm and batch size (``RoundPlan.first_warmup_ms``, 500 ms: GPU clocks ramping from idle; 100 ms where a lone life
primed, ``RoundPlan.primed``) and a later load's (``load_warmup_ms``, 100 ms; 30 ms primed) replaced by the values
given; the warm-up configurations it sends its workers carry them. Run on 2026-12-04f at 100 / 30 ms, before those
became a primed life's: ``benchmarks/results/ort_cuda-H200-2026-12-04f/``. On the H200 (2026-12-04e) the warm-ups of a ResNet-50 defaults run took 11.3 s of its 31 s of serving
(the timed samples 11.2 s), the second largest part of the wall after the lives. Run it beside an unchanged compare,
its A/A and the independent loop (``ort_cuda_fidelity.sh``): a shorter warm-up is only worth having where the
verdicts, the per-arm medians against ``reference_ort_iobinding.py`` and GPU A/A do not move.

    python3 benchmarks/ort_warmup_whatif.py FIRST_MS LOAD_MS compare MODEL.onnx --backend onnxruntime-cuda …

Prints what compare prints; the result JSON (``--out``) records each arm's warm-up (``config.warmup_s``,
``warmup_done``).
"""
from __future__ import annotations

import functools
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main() -> None:
    if len(sys.argv) < 4:
        raise SystemExit(__doc__)
    first_ms, load_ms, argv = float(sys.argv[1]), float(sys.argv[2]), sys.argv[3:]
    from trtprof.cli import compare as compare_cli
    from trtprof.cli import main as trtprof_main
    from trtprof.measure import interleave

    # a primed life's warm-ups (``RoundPlan.primed``, lone loads on a GPU) and an unprimed load's, both set
    interleave.PRIMED_FIRST_WARMUP_MS, interleave.PRIMED_LOAD_WARMUP_MS = first_ms, load_ms
    compare_cli.RoundPlan = functools.partial(interleave.RoundPlan, first_warmup_ms=first_ms, load_warmup_ms=load_ms)
    print(f"warm-ups of this run: the first load's {first_ms:g} ms per arm and batch size, a later load's "
          f"{min(first_ms, load_ms):g} ms (trtprof's: {interleave.FIRST_WARMUP_MS:g} and {interleave.LOAD_WARMUP_MS:g} "
          f"ms, {interleave.PRIMED_FIRST_WARMUP_MS:g} and {interleave.PRIMED_LOAD_WARMUP_MS:g} ms where a life primed)",
          flush=True)
    raise SystemExit(trtprof_main(argv))


if __name__ == "__main__":
    main()
