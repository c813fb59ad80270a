"""What ``interleave``'s loop measures through: a ``Load`` (one instance of every arm: a worker process,
``trtprof.measure.workers``, or ``InProcessLoad`` here), the block measured through the shared timing loop
(``measure_block``), the arm order of a load's first round and of every round after it, and an ``Arm``:
one precision's samples per load and round with its notes and device state. The loop itself, its plan,
its stopping rules and ``LoadLost`` (a load gone mid-run) are ``trtprof.measure.interleave``'s.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Protocol, Sequence

import numpy as np

from . import timing
from ..system import nvml
from ..stats.speedup import engine_median_ci
from .timing import Samples, TimingConfig
from ..util.thirdparty import AT_LOAD, AT_RUN, Tally, third_party_warnings


def measure_block(runner: Any, feeds: Mapping[str, np.ndarray], config: TimingConfig) -> Samples:
    """One block through THE shared loop: host clock for cpu runners, CUDA events for cuda runners.
    What the runtime library writes meanwhile (ONNX Runtime's log on fd 2, Python warnings) is kept in
    the block's ``run_warnings`` (issue 34), captured around the whole block, not per iteration."""
    with third_party_warnings(repeat=False) as caught:
        if runner.device == "cpu":
            samples = timing.time_host(lambda: runner.infer(feeds), config)
        else:
            time_device = getattr(timing, "time_device", None)
            if time_device is None:  # pragma: no cover - depends on the GPU timing loop being present
                from ..errors import BackendUnavailable

                raise BackendUnavailable("this trtprof has no GPU timing loop (timing.time_device)")
            samples = time_device(runner, feeds, config)
    samples.run_warnings = list(caught)
    return samples


def with_load_warnings(samples: Samples, runner: Any) -> Samples:
    """A load's warm-up block, carrying what the library wrote while ``runner`` was loaded
    (``measure.bench.load_runner`` keeps it on the runner): each batch size's result counts the loads
    that wrote it."""
    kept = list(getattr(runner, "load_warnings", None) or ())
    if kept:
        samples.load_warnings = kept
    return samples


Measure = Callable[[Any, Mapping[str, np.ndarray], TimingConfig], Samples]


class Load(Protocol):
    """One instance of every arm. ``rounds`` runs rounds ``first … first+count−1`` of this load,
    arm order ``order`` on even rounds, reversed on odd ones; returns arm name → Samples per round."""

    def warm_up(self, config: TimingConfig) -> dict[str, Samples]: ...

    def rounds(self, first: int, count: int, config: TimingConfig,
               order: Sequence[str]) -> list[dict[str, Samples]]: ...

    def close(self) -> None: ...


def warm_up_side_by_side(loads: Sequence[Any], config: TimingConfig) -> list[dict[str, Samples]]:
    """Each load's warm-up, those that can (``warm_up_begin``/``warm_up_end``: a worker process each) all asked
    before any answer is read, so that they run side by side; the others one after another. Every load asked is
    answered before an error is raised (the first), so no worker's replies fall out of step."""
    started, error = [], None
    for load in loads:
        if hasattr(load, "warm_up_begin"):
            try:
                load.warm_up_begin(config)
            except BaseException as err:  # noqa: BLE001 - raised once the loads already asked have answered
                error = err
                break
            started.append(load)
    out: dict[int, dict[str, Samples]] = {}
    for load in started:
        try:
            out[id(load)] = load.warm_up_end()
        except BaseException as err:  # noqa: BLE001 - the first one is raised, after every answer was read
            error = error or err
    if error is not None:
        raise error
    return [out[id(load)] if id(load) in out else load.warm_up(config) for load in loads]


def round_order(order: Sequence[str], index: int) -> list[str]:
    """Round ``index`` of a load whose first round runs ``order``: flipped every round."""
    return list(order) if index % 2 == 0 else list(order)[::-1]


def load_order(names: Sequence[str], index: int, seed: int = 0) -> list[str]:
    """The arm order of load ``index``'s first round: a rotation of ``names``, drawn at random and
    balanced — each run of len(names) consecutive loads uses every rotation once, in a seeded random
    order — so every arm starts a round pair first in as many loads as the others."""
    k = len(names)
    block, slot = divmod(index, k)
    rotation = int(np.random.default_rng([seed, block]).permutation(k)[slot])
    return list(names[rotation:]) + list(names[:rotation])


class InProcessLoad:
    """A load whose runners live in this process (test fakes, simulations, backends that cannot be
    spawned). ``measure`` is injectable: the simulation passes runners of known truth."""

    def __init__(self, arms: Mapping[str, tuple[Any, Mapping[str, np.ndarray]]], measure: Measure = measure_block,
                 on_close: Callable[[], None] | None = None) -> None:
        self.arms = dict(arms)
        self.measure = measure
        self.on_close = on_close

    def warm_up(self, config: TimingConfig) -> dict[str, Samples]:
        return {name: with_load_warnings(self.measure(runner, feeds, config), runner)
                for name, (runner, feeds) in self.arms.items()}

    def rounds(self, first: int, count: int, config: TimingConfig,
               order: Sequence[str]) -> list[dict[str, Samples]]:
        out = []
        for j in range(first, first + count):
            out.append({name: self.measure(*self.arms[name], config) for name in round_order(order, j)})
        return out

    def close(self) -> None:
        if self.on_close is not None:
            self.on_close()


@dataclass
class Arm:
    """One arm (precision label) at one batch size: its samples per load and round, notes, device state."""

    name: str
    runner: Any = None  # kept for callers that build arms by hand; the loop measures through loads
    feeds: Mapping[str, np.ndarray] | None = None
    blocks: list[list[dict[str, np.ndarray]]] = field(default_factory=list)  # load → round → stage → ms
    span_s: float = 0.0
    note_counts: dict[str, list] = field(default_factory=dict)  # note shape → [first text, blocks]
    device_first: dict[str, Any] = field(default_factory=dict)
    device_last: dict[str, Any] = field(default_factory=dict)
    warmup_done: int = 0
    warmup_s: float = 0.0
    setup_s: float = 0.0  # every block's set-up (Samples.setup_s), warm-up blocks included
    block_spans: list[tuple[int, float]] = field(default_factory=list)  # (iterations, wall s) per block
    watched: dict[str, Any] | None = None  # the GPU watch over all blocks (nvml.merge_watches), None on a CPU
    third_party: Tally = field(default_factory=Tally)  # the library's lines per load and block (util.thirdparty)

    def add(self, samples: Samples, load: int = 0) -> None:
        while len(self.blocks) <= load:
            self.blocks.append([])
        self.blocks[load].append({k: np.asarray(v, dtype=np.float64) for k, v in samples.stages.items()})
        self.span_s += samples.span_s
        self.setup_s += samples.setup_s
        self.block_spans.append((samples.n, samples.span_s))  # throughput: the median block rate
        for note in samples.notes:  # one entry per kind of note, not one per block
            key = re.sub(r"[-+]?\d[\d.,]*", "#", note)
            self.note_counts.setdefault(key, [note, 0])[1] += 1
        if not self.device_first:
            self.device_first = dict(samples.device)
        self.device_last = dict(samples.device)
        self.watched = nvml.merge_watches(self.watched, samples.device.get("during"))  # every block's samples
        self.third_party.add(AT_RUN, samples.run_warnings)

    def add_warmup(self, samples: Samples) -> None:
        """A load's warm-up block: one load of this arm, and a block the library may have written in."""
        self.warmup_done += samples.warmup_done + samples.n
        self.warmup_s += samples.warmup_s + samples.span_s
        self.setup_s += samples.setup_s
        self.third_party.add(AT_LOAD, samples.load_warnings)
        self.third_party.add(AT_RUN, samples.run_warnings)

    @property
    def n_blocks(self) -> int:
        return sum(len(b) for b in self.blocks)

    @property
    def notes(self) -> list[str]:
        """The timing loop's warnings, each once, with how many of the blocks raised it."""
        blocks = self.n_blocks
        return [f"{text} (in {n} of {blocks} blocks)" if blocks > 1 else text
                for text, n in self.note_counts.values()]

    @property
    def stages(self) -> dict[str, list[np.ndarray]]:
        """Stage → every block in order (loads one after the other): the schema-1 view of an arm."""
        out: dict[str, list[np.ndarray]] = {}
        for load in self.blocks:
            for r in load:
                for k, v in r.items():
                    out.setdefault(k, []).append(v)
        return out

    def latency_blocks(self, stage: str = "latency_ms") -> list[list[np.ndarray]]:
        return [[r[stage] for r in load if stage in r] for load in self.blocks]

    @property
    def round_medians_ms(self) -> list[float]:
        return [float(np.median(b)) for load in self.latency_blocks() for b in load]

    def pooled(self) -> dict[str, np.ndarray]:
        stages: dict[str, list[np.ndarray]] = {}
        for load in self.blocks:
            for r in load:
                for k, v in r.items():
                    stages.setdefault(k, []).append(v)
        return {k: np.concatenate(v) for k, v in stages.items() if v}

    @property
    def latency_ms(self) -> np.ndarray:
        return self.pooled().get("latency_ms", np.empty(0))

    def median_ci_ms(self) -> tuple[float, float]:
        return engine_median_ci(self.latency_blocks())

    @property
    def device(self) -> dict[str, Any]:
        """NVML state at the first and the last round (clock drift shows as a difference)."""
        if not self.device_first:
            return {}
        return {"first_round": self.device_first, "last_round": self.device_last,
                **({"during": self.watched} if self.watched else {})}
