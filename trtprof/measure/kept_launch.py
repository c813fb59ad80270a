"""A runner's device state kept from one timing block to the next (issue 42: ORT-CUDA loads that cost a second).

``timing.time_device`` sets up every block from scratch: the runner's ``prepare`` (an eager inference on
zeros), pinned host and device buffers, the upload of the inputs, the launch (ONNX Runtime's own CUDA graph
is captured anew for every new set of bound buffers), and releases it all at the block's end. compare times
each arm in many short blocks (loads × rounds), so on the H200 that set-up cost more than the blocks' own
timed iterations for ResNet-50 at batch 1 and 32 (``budget.per_batch`` of the 2026-12-02 results).

Inside a ``LaunchKeeper`` scope, a runner that says ``keeps_launch = True`` (ONNX Runtime's CUDA runner,
whose session keeps every graph it captured anyway) keeps that state across blocks of the same input
shapes, copies and graph setting: the next block reuses its buffers and launch (ORT replays the graph it
captured on those buffers), uploads the inputs again only when they are other arrays, and still runs its
own warm-up iterations; the scope also holds one NVML session for every GPU block inside it. A runner
keeps one state per key (batch size), up to ``MAX_KEPT_PER_RUNNER``, the least recently used released
first: compare's priming (``timing.prime_launch``) sets up every batch size's state once per worker
before any timing, and that state serves the worker's blocks at that batch size, so no load's first block
at a batch size pays a set-up (on the H200 0.2-0.35 s per arm and load, ResNet-50: 14 s of a default run,
2026-12-03). The scope's end closes every state it kept. Outside a scope, and for every other runner,
each block sets up and releases its own state, as before.

What a block measures is unchanged: the same buffers, the same launch, the same loop; a load is still a
fresh process (its own allocation and capture), which is where placement differs from load to load.
"""
from __future__ import annotations

from collections import OrderedDict
from contextlib import ExitStack
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

import numpy as np

_ACTIVE: list["LaunchKeeper"] = []  # the scopes open now, innermost last
# States one runner keeps at once (one per batch size): compare's default sweeps of 3 batch sizes, and
# ``--batch-sizes`` lists of up to 8, keep all; a longer list releases the least recently used.
MAX_KEPT_PER_RUNNER = 8


@dataclass
class KeptLaunch:
    """One runner's device state at one key (input shapes, copies, graph): what ``time_device`` set up."""

    runner: Any  # held, so its id stays this runner's while the state is kept
    key: tuple[Any, ...]
    stack: ExitStack  # releases the buffers, the stream (where the loop made one) and the launch
    stream: Any = None
    buffers: dict[str, int] = field(default_factory=dict)
    host_in: list[tuple[np.ndarray, int]] = field(default_factory=list)
    host_out: list[tuple[np.ndarray, int]] = field(default_factory=list)
    compute: Callable[[], Any] | None = None
    launch_info: dict[str, Any] = field(default_factory=dict)
    feeds: dict[str, np.ndarray] = field(default_factory=dict)  # the arrays whose values the buffers hold

    def same_feeds(self, feeds: Mapping[str, np.ndarray]) -> bool:
        return feeds.keys() == self.feeds.keys() and all(feeds[k] is self.feeds[k] for k in feeds)


class LaunchKeeper:
    """``with LaunchKeeper():`` — opted-in runners keep their device state across timing blocks inside."""

    def __init__(self) -> None:
        # (id(runner), key) → state, least recently used first
        self.kept: OrderedDict[tuple[int, tuple[Any, ...]], KeptLaunch] = OrderedDict()
        self._held = ExitStack()  # the NVML session held from the scope's first GPU block to its end
        self._holding = False

    def __enter__(self) -> "LaunchKeeper":
        _ACTIVE.append(self)
        return self

    def __exit__(self, *exc: Any) -> None:
        if self in _ACTIVE:
            _ACTIVE.remove(self)
        self.clear()
        self._held.close()
        self._holding = False

    def hold_nvml(self) -> None:
        """From the first GPU block on, one NVML session stays open to the scope's end, so each block's
        NVML reads (before, after, the watch) count references instead of initialising NVML anew."""
        if not self._holding:
            from ..system import nvml

            self._holding = True
            self._held.enter_context(nvml.held())

    def clear(self) -> None:
        """Release every kept state (its buffers, its launch)."""
        kept, self.kept = list(self.kept.values()), OrderedDict()
        for state in kept:
            state.stack.close()

    def lookup(self, runner: Any, key: tuple[Any, ...]) -> KeptLaunch | None:
        """The state kept for ``runner`` at ``key`` (now the most recently used), or None."""
        state = self.kept.get((id(runner), key))
        if state is None or state.runner is not runner:
            return None
        self.kept.move_to_end((id(runner), key))
        return state

    def keep(self, state: KeptLaunch) -> None:
        """Keep ``state``; past ``MAX_KEPT_PER_RUNNER`` for its runner, the least recently used one is released."""
        self.kept[(id(state.runner), state.key)] = state
        self.kept.move_to_end((id(state.runner), state.key))
        mine = [k for k, v in self.kept.items() if v.runner is state.runner]
        for k in mine[:max(0, len(mine) - MAX_KEPT_PER_RUNNER)]:
            self.kept.pop(k).stack.close()


def keeper_for(runner: Any) -> LaunchKeeper | None:
    """The innermost open scope when ``runner`` opts in (``keeps_launch``), else None: set up per block.
    Any GPU block inside a scope holds the scope's NVML session (``hold_nvml``)."""
    if not _ACTIVE:
        return None
    _ACTIVE[-1].hold_nvml()
    return _ACTIVE[-1] if getattr(runner, "keeps_launch", False) else None
