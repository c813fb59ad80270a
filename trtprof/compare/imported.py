"""``trtprof compare results.json``: a speedup with a verdict from imported trtexec runs (no measuring).

Why: users with trtexec exports of an fp32 and an fp16 run (``trtprof import trtexec``) want the same
compare JSON, verdict and report as a measured comparison. What one trtexec run allows is less than
what ``trtprof compare`` measures: each run is one process and one engine load, and the two runs
were not interleaved (one ran after the other, maybe on another day). The interval here is built
the way ``speedup.speedup_ci`` treats a single load: each run's iterations are cut into
``PSEUDO_ROUNDS`` consecutive blocks, block i of the baseline is paired with block i of the
candidate, and the t interval of those paired log ratios is the CI. It covers the iteration and
block-to-block noise inside the two runs; drift between the two runs (clocks, temperature, other
load) and process-to-process variance are NOT covered, and the JSON, the report and the CLI say so.
No outputs are in trtexec's exports, so there is no accuracy delta.
"""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from ..util.files import now_iso
from .comparison import Comparison
from ..errors import BadInput
from ..measure.results import BenchResult
from ..schemas import COMPARE
from ..stats.speedup import CONFIDENCE, EQUIVALENCE_MARGIN, speedup_ci
from ..stats.latency import median_ci_exact

PSEUDO_ROUNDS = 20  # consecutive blocks per run: 10 block pairs, 9 degrees of freedom
MIN_BLOCK_ITERATIONS = 5  # a block's median needs a few iterations: runs under 100 iterations are refused
MIN_ITERATIONS = PSEUDO_ROUNDS * MIN_BLOCK_ITERATIONS
METHOD = (f"imported trtexec runs, one process and one engine load each, NOT interleaved: each run's iterations cut "
          f"into {PSEUDO_ROUNDS} consecutive equal blocks (pseudo-rounds; the remainder left out), block i of the baseline paired with block i of "
          "the candidate; one-sample t interval of the paired log ratios of block medians (consecutive pairs "
          "averaged, pairs−1 df). Covers iteration and block-to-block noise within the two runs only")
ONE_LOAD_WARNING = ("imported trtexec runs: one process, one engine load each, not interleaved — the CI does not "
                    "cover drift between the two trtexec runs (clocks, temperature, other load) or process-to-process "
                    "variance, which `trtprof compare MODEL` measures by reloading in interleaved rounds; no accuracy "
                    "(trtexec's exports hold no outputs)")
STOP_REASON = "imported: all iterations of one trtexec run per precision"


def imported_runs(results: Sequence[BenchResult], path: Path) -> list[BenchResult]:
    """The results file's records, refused unless every one is an imported trtexec run of one model."""
    if not results:
        raise BadInput("results file holds no records", path=path)
    others = sorted({r.backend for r in results if r.backend != "trtexec"})
    if others:
        raise BadInput(f"not imported trtexec runs (backend {', '.join(others)}): compare measures a MODEL or an "
                       "engines dir; a results file must come from `trtprof import trtexec`", path=path)
    models = sorted({r.model for r in results})
    if len(models) > 1:
        raise BadInput(f"imported runs of different models ({', '.join(models)}): compare one model", path=path)
    return list(results)


def arms_by_batch(results: Sequence[BenchResult], precisions: Sequence[str] | None,
                  path: Path) -> dict[int, list[BenchResult]]:
    """Per batch size, the runs to compare, baseline first: ``precisions`` in its order when given, else
    fp32 (or the first imported precision) as the baseline and every other precision after it."""
    seen: dict[tuple[int, str], BenchResult] = {}
    for r in results:
        if (r.batch_size, r.precision) in seen:
            raise BadInput(f"two imported {r.precision} runs at batch {r.batch_size}: keep one per precision", path=path)
        seen[(r.batch_size, r.precision)] = r
    have = ", ".join(f"{p} at batch {b}" for b, p in seen)
    out: dict[int, list[BenchResult]] = {}
    for batch in sorted({b for b, _ in seen}):
        names = [p for b, p in seen if b == batch]
        if precisions is not None:
            order = [p for p in precisions if p in names]
        else:
            base = "fp32" if "fp32" in names else names[0]
            order = [base, *(p for p in names if p != base)]
        if len(order) >= 2:
            out[batch] = [seen[(batch, p)] for p in order]
    if not out:
        asked = f" of {', '.join(precisions)}" if precisions is not None else ""
        raise BadInput(f"no batch size with two imported precisions{asked} to compare (have: {have}); import "
                       "another precision at the same --batch-size", path=path)
    return out


def pseudo_rounds(samples_ms: Any, path: Path, what: str) -> list[list[np.ndarray]]:
    """One load of ``PSEUDO_ROUNDS`` consecutive equal blocks (the shape ``speedup_ci`` takes); the last
    ``n mod PSEUDO_ROUNDS`` iterations (fewer than one per block) are left out of the interval."""
    x = np.asarray(samples_ms, dtype=np.float64)
    if x.size < MIN_ITERATIONS:
        raise BadInput(f"{what}: {x.size} iterations; at least {MIN_ITERATIONS} are needed for {PSEUDO_ROUNDS} blocks "
                       f"of {MIN_BLOCK_ITERATIONS} (run trtexec longer: --iterations / --duration)", path=path)
    per_block = x.size // PSEUDO_ROUNDS
    return [list(x[:per_block * PSEUDO_ROUNDS].reshape(PSEUDO_ROUNDS, per_block))]


def compare_pair(base: BenchResult, cand: BenchResult, margin: float, path: Path) -> Comparison:
    b_blocks = pseudo_rounds(base.samples_ms["latency_ms"], path, f"{base.precision} batch {base.batch_size}")
    c_blocks = pseudo_rounds(cand.samples_ms["latency_ms"], path, f"{cand.precision} batch {cand.batch_size}")
    speed = replace(speedup_ci(b_blocks, c_blocks, margin=margin), method=METHOD)
    ratios = [float(np.median(b) / np.median(c)) for b, c in zip(b_blocks[0], c_blocks[0])]
    return Comparison(
        batch_size=base.batch_size, baseline=base.precision, candidate=cand.precision, speedup=speed, accuracy=None,
        diagnosis=[], baseline_result=base, candidate_result=cand, rounds=PSEUDO_ROUNDS, stop_reason=STOP_REASON,
        round_ratios=ratios, half_widths={}, loads=1,
        median_cis_ms={"baseline": median_ci_exact(base.samples_ms["latency_ms"]),
                       "candidate": median_ci_exact(cand.samples_ms["latency_ms"])})


def compare_imported(results: Sequence[BenchResult], path: Path, *, precisions: Sequence[str] | None = None,
                     margin: float = EQUIVALENCE_MARGIN, environment: dict[str, Any] | None = None) -> dict[str, Any]:
    """Imported trtexec runs → a compare JSON (``schemas.COMPARE``) that ``trtprof report`` renders."""
    runs = imported_runs(results, path)
    comparisons = [compare_pair(arms[0], cand, margin, path)
                   for arms in arms_by_batch(runs, precisions, path).values() for cand in arms[1:]]
    warnings = [ONE_LOAD_WARNING]
    return {
        "schema": COMPARE,
        "created": now_iso(),
        "model": runs[0].model,
        "backend": "trtexec",
        "settings": {"source": "trtexec (imported)", "equivalence_margin": margin, "confidence": CONFIDENCE,
                     "isolation": "one trtexec process per precision, not interleaved", "loads": 1,
                     "pseudo_rounds": PSEUDO_ROUNDS, "min_block_iterations": MIN_BLOCK_ITERATIONS,
                     "method": {"speedup": METHOD, "median_ci": "exact binomial CI of each run's median "
                                                               "(iterations of one load)"}},
        "comparisons": [c.to_json() for c in comparisons],
        "warnings": warnings,
        "device_peak": None,
        "environment": environment or {},
        "results": [r.to_json() for r in runs],
        "interrupted": False,
        "pending_batch_sizes": [],
    }
