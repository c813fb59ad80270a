"""compare's accuracy pass on the user's ``--inputs``, bounded by the time budget (issue 44 #2).

Before, the pass ran every sample through every engine at every batch size whatever the budget: a
10,000-sample file on a slow model took minutes before the first measurement. Now it runs the samples
batch by batch, every arm on each batch before the next (every arm sees the same samples: like is
compared with like), and starts no batch after its deadline, ``RANGE_ANALYSIS_SHARE`` of one batch
size's budget from when it began (the share and the style of ``reference_pass.range_deadline``); the
first batch always runs, and the batch that crosses the deadline is the last. The verdict then rests on
the samples that ran: their count travels with the accuracy result (``SampleCount``: the JSON's
``accuracy.samples`` of ``accuracy.samples_total``, the inputs' words, the printed verdict), and a pass
cut short says so as it stops. ``--accuracy-samples all|N`` (``CompareOptions.accuracy_samples``)
insists on every sample, or on the first N, whatever the budget.

The memory in use is read around each arm's first batch (``system.memory.outputs_and_memory``: one
inference per arm, as its note says). Without ``--inputs`` none of this runs: the seeded pass is one
batch (``measuring.load_reference``, ``reference_pass.from_worker``).
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable, Mapping

import numpy as np

from ..convert.fp16range import Deadline
from ..errors import BadInput
from ..measure.budget import RANGE_ANALYSIS_SHARE
from ..model.user_inputs import join_batches
from ..system.memory import outputs_and_memory
from ..util.bounds import Bound

ALL_SAMPLES = "all"  # --accuracy-samples all: every sample, whatever the budget
SAMPLES = Bound(int, 1, 2**31 - 1, why="int32")  # --accuracy-samples N
SAMPLES_FLAG = "--accuracy-samples"
# The clock of the pass and its deadline (a time.perf_counter() value, as the budget's): tests replace it.
CLOCK: Callable[[], float] = time.perf_counter


def parse_samples(text: str) -> int | str:
    """``--accuracy-samples``: ``all`` or a whole number of samples, 1 … 2,147,483,647 (``SAMPLES``; else exit 2,
    one line: docs/safety.md)."""
    import argparse

    if text.strip().lower() == ALL_SAMPLES:
        return ALL_SAMPLES
    try:
        return int(SAMPLES.parse(text))
    except ValueError as err:
        raise argparse.ArgumentTypeError(f"expected 'all' or a number of samples: {err}") from None


def check_samples(asked: int | str | None, data: Any) -> None:
    """``--accuracy-samples`` without ``--inputs`` is refused (exit 2): the seeded pass is one batch."""
    if asked is not None and data is None:
        raise BadInput(f"{SAMPLES_FLAG} {asked}: applies to --inputs only (without them the accuracy pass runs one "
                       "seeded batch per batch size)")


@dataclass(frozen=True)
class SampleCount:
    """How many of the user's ``total`` samples the accuracy pass ran (``ran``) at one batch size, in
    ``seconds``; ``cut``: why it ran fewer ("" when it ran them all): the budget's share, or the count asked."""

    ran: int
    total: int
    seconds: float = 0.0
    cut: str = ""

    def describe(self, source: str) -> str:
        """What the outputs were computed on: ``InputData.describe``'s words when every sample ran, else
        "inputs d.npz (1,024 of 10,000 samples: the accuracy pass's share of the time budget)"."""
        if not self.cut:
            return f"inputs {source} ({self.total} samples)"
        return f"inputs {source} ({self.ran:,} of {self.total:,} samples: {self.cut})"

    def stop_line(self, batch: int) -> str:
        """The line said when the pass stops before the last sample (the verdict rests on those that ran)."""
        return (f"accuracy pass at batch {batch}: {self.ran:,} of {self.total:,} samples in {self.seconds:.1f} s "
                f"({self.cut}); the verdict rests on those")


BUDGET_CUT = "its share of the budget"


def pass_deadline(options: Any) -> Deadline | None:
    """The bound of one batch size's pass, from now: ``RANGE_ANALYSIS_SHARE`` of one batch size's budget
    (``TimeBudget.analysis_deadline``, as the range analysis); None where the user asked for a count
    (``options.accuracy_samples``: all, or N)."""
    if options.accuracy_samples is not None:
        return None
    return Deadline(at=options.time_budget.analysis_deadline(CLOCK()), clock=CLOCK)


def start_words(options: Any) -> str:
    """How the pass on the user's inputs is bounded, for the start-up line."""
    asked = options.accuracy_samples
    if asked == ALL_SAMPLES:
        return f"every sample ({SAMPLES_FLAG} all)"
    if asked is not None:
        return f"the first {asked:,} samples ({SAMPLES_FLAG} {asked})"
    return (f"as many samples as {RANGE_ANALYSIS_SHARE * 100:.0f} % of a batch size's budget allows "
            f"({RANGE_ANALYSIS_SHARE * options.plan.time_budget_s:.1f} s each; {SAMPLES_FLAG} all: every one)")


def user_outputs(runners: Mapping[str, Any], load_rss: Mapping[str, tuple[int | None, int | None]], data: Any,
                 batch: int, options: Any) -> tuple[dict[str, Any], dict[str, Any], SampleCount]:
    """Every arm's outputs on the user's samples (``data``) in batches of ``batch``, the memory in use
    around each arm's first batch, and the ``SampleCount``: as far as ``pass_deadline`` allows, or the
    count ``options.accuracy_samples`` asks."""
    asked = options.accuracy_samples
    wanted = data.samples if asked in (None, ALL_SAMPLES) else min(int(asked), data.samples)
    return bounded_outputs(runners, load_rss, data, batch, wanted, pass_deadline(options))


def bounded_outputs(runners: Mapping[str, Any], load_rss: Mapping[str, tuple[int | None, int | None]], data: Any,
                    batch: int, wanted: int, deadline: Deadline | None) -> tuple[dict[str, Any], dict[str, Any],
                                                                                 SampleCount]:
    """``user_outputs`` for the first ``wanted`` samples, no batch after the first started past ``deadline``
    (None: unbounded). Each batch runs through every arm before the next: all arms see the same samples."""
    clock = deadline.clock if deadline is not None else CLOCK
    started = clock()
    first, memory = outputs_and_memory(dict(runners), dict(load_rss),
                                       lambda r: infer(r, data.batch(batch, 0, input_dtypes(r))))
    dtypes = {name: input_dtypes(r) for name, r in runners.items()}
    parts = {name: {out: [value] for out, value in outs.items()} for name, outs in first.items()}
    planned, done = -(-wanted // batch), 1
    while done < planned and not (deadline is not None and deadline.passed()):
        for name, runner in runners.items():
            for out, value in infer(runner, data.batch(batch, done, dtypes[name])).items():
                parts[name][out].append(value)
        done += 1
    ran = min(done * batch, wanted)
    cut = "" if ran == data.samples else BUDGET_CUT if done < planned else f"{SAMPLES_FLAG} {wanted}"
    count = SampleCount(ran=ran, total=data.samples, seconds=clock() - started, cut=cut)
    outputs = {name: {out: join_batches(values, batch, ran) for out, values in outs.items()}
               for name, outs in parts.items()}
    return outputs, memory, count


def input_dtypes(runner: Any) -> dict[str, np.dtype]:
    """Each input's dtype as ``runner`` takes it (the user's arrays are cast to it, as ``run_all`` does)."""
    return {s.name: np.dtype(s.dtype) for s in runner.inputs}


def infer(runner: Any, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Host-in/host-out inference (``Runner.infer``): every backend's correctness path."""
    return {name: np.asarray(value) for name, value in runner.infer(feeds).items()}
