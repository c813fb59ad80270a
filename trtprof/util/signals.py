"""Signal handlers held for a block: SIGINT/SIGTERM deferred while finished results are written (a
second Ctrl-C 20 ms after the first must not lose what was measured), and SIGTERM turned into the
KeyboardInterrupt that Ctrl-C raises. A low module of its own, so that the CLI and the sweep store
(which writes sweep.json itself) use one mechanism."""
from __future__ import annotations

import signal
from contextlib import contextmanager
from typing import Any, Iterator, Mapping


@contextmanager
def handlers_held(handlers: Mapping[signal.Signals, Any]) -> Iterator[None]:
    """Within the block, each signal has the given handler; the old handlers are restored after.
    Outside the main thread Python refuses to set handlers: signals are then left alone."""
    try:
        previous = {s: signal.signal(s, handler) for s, handler in handlers.items()}
    except ValueError:  # not the main thread: leave signals alone
        yield
        return
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


def signals_deferred():
    """Within the block, SIGINT and SIGTERM are ignored: the finished results are being written, and
    a second Ctrl-C 20 ms after the first must not lose them."""
    return handlers_held({signal.SIGINT: signal.SIG_IGN, signal.SIGTERM: signal.SIG_IGN})


def _raise_interrupt(signum, frame):  # noqa: ARG001 - signal handler signature
    raise KeyboardInterrupt(f"signal {signum}")


def sigterm_as_interrupt():
    """Within the block, SIGTERM raises KeyboardInterrupt (as SIGINT does), so the same
    ``except KeyboardInterrupt`` saves finished entries for both."""
    return handlers_held({signal.SIGTERM: _raise_interrupt})


@contextmanager
def interrupts_noted(noted: list[int]) -> Iterator[None]:
    """Within the block, the first SIGINT or SIGTERM is only noted (appended to ``noted``) and the work
    goes on; a second raises KeyboardInterrupt. For the seconds of analysis after every batch size was
    measured: on the H200 a SIGTERM there (``timeout`` ending a ConvNeXt-T compare whose two batch sizes
    were decided) raised out of the analysis and lost both verdicts, no JSON written."""
    def note(signum, frame):  # noqa: ARG001 - signal handler signature
        if noted:
            raise KeyboardInterrupt(f"signal {signum}")
        noted.append(signum)

    with handlers_held({signal.SIGINT: note, signal.SIGTERM: note}):
        yield
