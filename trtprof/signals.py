"""Signals around the writing of finished results: a second Ctrl-C 20 ms after the first must not lose
what was measured. A low module of its own, so that the CLI and the sweep store (which writes
sweep.json itself) defer signals through one function."""
from __future__ import annotations

import signal
from contextlib import contextmanager
from typing import Iterator


@contextmanager
def signals_deferred() -> Iterator[None]:
    """Within the block, SIGINT and SIGTERM are ignored: the finished results are being written, and
    a second Ctrl-C 20 ms after the first must not lose them. The old handlers are restored after."""
    try:
        previous = {s: signal.signal(s, signal.SIG_IGN) for s in (signal.SIGINT, signal.SIGTERM)}
    except ValueError:  # not the main thread: leave signals alone
        yield
        return
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
