"""The validity stamp of each comparison (``trtprof.system.validity`` judges; this gathers the facts a
comparison knows): its loads against the plan's minimum, its batch size's budget against what it
spent, the GPU watch over both arms' blocks, the host's state read before measuring, a candidate
"fp16" that ran FP32 behind casts, and an arm whose census puts its heavy ops in FP32."""
from __future__ import annotations

from typing import Any, Mapping, Sequence

from ..measure.results import result_facts
from ..system import nvml
from ..system.validity import Validity, assess, merge


def stamp_comparison(comparison: Any, outcome: Any, min_loads: int, cpu: Mapping[str, Any] | None,
                     host_timed: bool) -> Validity:
    """One comparison's stamp, kept on it (``comparison.validity``)."""
    base = result_facts(comparison.baseline_result, cpu, host_timed)
    cand = result_facts(comparison.candidate_result, cpu, host_timed)
    budget_s = getattr(outcome, "budget_s", None)
    facts = type(base)(loads=comparison.loads, min_loads=min_loads,
                       budget_s=budget_s if budget_s == budget_s else None,  # NaN: no budget recorded
                       spent_s=getattr(outcome, "elapsed_s", None),
                       gpu=nvml.merge_watches(base.gpu, cand.gpu), cpu=cpu, host_timed=host_timed,
                       casts=tuple(dict.fromkeys((*base.casts, *cand.casts))),
                       heavy_fp32=tuple({h.label: h for h in (*base.heavy_fp32, *cand.heavy_fp32)}.values()))
    comparison.validity = assess(facts)
    comparison.min_loads = min_loads  # its verdict is provisional below it (compare.verdict_words)
    return comparison.validity


def stamp_all(comparisons: Sequence[Any], outcomes: Mapping[int, Any], min_loads: int,
              cpu: Mapping[str, Any] | None, devices: Mapping[str, str]) -> Validity:
    """Every comparison's stamp; returns them merged (the report's and the page's top line)."""
    return merge([stamp_comparison(c, outcomes.get(c.batch_size), min_loads, cpu,
                                   devices.get(c.candidate, "cpu") == "cpu") for c in comparisons])
