"""``compare --timeline``: one batch size's steady-state iteration per arm, recorded after the timing.

Why after the timing, in this process, once the workers are closed: a timeline is a profiled run (the
profiler slows the host, and ORT's session profiling is a session of its own), so it never runs inside
a timed round, and no worker is still measuring beside it. A worker command after its last round would
skip one engine load per arm; but the ONNX Runtime timeline opens a profiling session of its own either
way, the torch one needs its own warm-up iterations under the profiler anyway, and the measure wing
would have to import the layers wing (a circle among wings). ``benchmarks/timeline_cost.py`` measures
what the load costs against the recording (docs/profile.md).

Which batch size: ``--timeline-batch`` when given (it must be one of those compared), else the smallest
compared — where launch overhead shows most, which is what a timeline explains that a table does not.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import Any, Mapping, Sequence

from ..diagnose.findings import Finding
from ..errors import BadInput
from ..layers.profile import DEFAULT_WARMUP
from ..layers.timeline import Timeline, finding_items, record_timeline
from ..model.inputs import FeedSettings

CHOSEN_SMALLEST = "the smallest batch size compared (--timeline-batch picks another)"
CHOSEN_BY_USER = "--timeline-batch"


@dataclass(frozen=True)
class TimelineRequest:
    """``batch_size``: the one batch size to record (None: the smallest compared); ``warmup``: the
    unrecorded iterations before the recorded one (cuDNN autotuning, lazy initialisation)."""

    batch_size: int | None = None
    warmup: int = DEFAULT_WARMUP

    def pick(self, batch_sizes: Sequence[int]) -> tuple[int, str]:
        """(the batch size, why that one); a ``batch_size`` not compared is refused (before measuring)."""
        if self.batch_size is not None:
            if self.batch_size not in batch_sizes:
                raise BadInput(f"--timeline-batch {self.batch_size}: not one of the batch sizes compared "
                               f"({', '.join(map(str, batch_sizes))})")
            return self.batch_size, CHOSEN_BY_USER
        return min(batch_sizes), CHOSEN_SMALLEST


def record_timelines(records: Mapping[str, Any], batch_sizes: Sequence[int], options: Any) -> dict[str, Any]:
    """Every arm's timeline at the chosen batch size, one engine after the other, as the timing ran it
    (``options.plan``: CUDA graph or eager, copies, autotune; the same seeded inputs or the first batch
    of the user's); the JSON block ``timeline`` of the compare file."""
    request: TimelineRequest = options.timeline
    batch, chosen_by = request.pick(batch_sizes)
    plan = options.plan
    started = time.perf_counter()
    timelines, seconds = [], {}
    for label, record in records.items():
        t0 = time.perf_counter()
        feed = FeedSettings(shapes=options.shapes, seed=options.seed, int_range=options.int_range, data=options.data)
        t = record_timeline(record, batch, feed, warmup=request.warmup, cuda_graph=plan.cuda_graph,
                            copies=plan.copies, autotune=plan.autotune)
        seconds[label] = round(time.perf_counter() - t0, 3)
        timelines.append(replace(t, precision=label))  # the arm's label: an A/A's two arms stay apart
    return {"batch_size": batch, "chosen_by": chosen_by, "warmup": request.warmup,
            "recorded_after": "the timing: in the comparing process once the workers closed, never in a timed round",
            "recorded_s": round(time.perf_counter() - started, 3), "recorded_s_per_arm": seconds,
            "timelines": [t.to_json() for t in timelines],
            "findings": [{"rule": f.rule, "precision": f.precision, "message": f.message, "evidence": dict(f.evidence)}
                         for f in finding_items(timelines)]}


def timelines_of(block: Mapping[str, Any]) -> list[Timeline]:
    return [Timeline.from_json(t) for t in block.get("timelines") or []]


def point_findings(comparisons: Sequence[Any], block: Mapping[str, Any]) -> None:
    """Each comparison at the timeline's batch size gets the timeline's findings about its two arms in
    its diagnosis, worded as coming from the timeline (the page's Timeline section shows it)."""
    batch = block["batch_size"]
    for c in comparisons:
        if c.batch_size != batch:
            continue
        for f in block["findings"]:
            if f["precision"] in (c.baseline, c.candidate):
                c.diagnosis.append(Finding(f["rule"], f"timeline at batch {batch}: {f['message']} (see the "
                                                      "Timeline section and the --timeline PNG)",
                                           {"precision": f["precision"], **f["evidence"]}))
