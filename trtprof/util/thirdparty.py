"""Warnings of the libraries trtprof runs (ONNX Runtime's log, Python ``warnings``), kept for the JSON.

Why: ONNX Runtime writes its warnings from C++ straight to file descriptor 2, coloured
("\\x1b[0;93m… [W:onnxruntime:, graph.cc:5809 CleanUnusedInitializersAndNodeArgs] Removing initializer …"),
between trtprof's own lines; Python libraries (onnxconverter-common) warn through ``warnings``. A reader
cannot tell which line belongs to what, and the result file keeps none of them (issue 34). Inside
``third_party_warnings()`` both are captured: fd 2 is pointed at a temp file (so C++ writes land there
too, which ``contextlib.redirect_stderr`` cannot do), Python warnings are recorded, and each becomes one
plain line (colour codes and the timestamp removed) in the list the block gets.

Keep the block short and around the library call only: everything written to stderr inside it is
taken, trtprof's own lines included.
"""
from __future__ import annotations

import contextlib
import os
import re
import sys
import tempfile
import warnings
from typing import Iterator

# ANSI colour codes ("\x1b[0;93m", "\x1b[m") that ORT puts around each line
ANSI = re.compile(r"\x1b\[[0-9;]*m")
# ORT's prefix "2026-12-02 01:59:16.866140838 [W:onnxruntime:, graph.cc:5809 Function] ": the severity
# letter and the source location are kept short, the timestamp dropped
ORT_LINE = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+ \[(?P<sev>[VIWEF]):onnxruntime:[^,\]]*,?\s*(?P<where>[^\]]*)\]\s*")
# at most this many lines kept per block (a model with 10 000 unused initializers warns 10 000 times)
MAX_LINES = 50


def clean_lines(text: str) -> list[str]:
    """Plain, de-duplicated lines of captured stderr text: colour codes and ORT's timestamp removed."""
    out: list[str] = []
    for raw in ANSI.sub("", text).splitlines():
        line = raw.strip()
        if not line:
            continue
        m = ORT_LINE.match(line)
        if m:
            line = f"onnxruntime ({m.group('where').split()[-1] if m.group('where') else m.group('sev')}): " \
                   f"{line[m.end():]}"
        if line not in out:
            out.append(line)
    if len(out) > MAX_LINES:
        out = out[:MAX_LINES] + [f"… and {len(out) - MAX_LINES} more lines"]
    return out


@contextlib.contextmanager
def third_party_warnings() -> Iterator[list[str]]:
    """Capture fd-2 output and Python warnings raised inside the block; the yielded list is filled, one
    plain line each, when the block ends (also when it raises)."""
    caught: list[str] = []
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError):  # no fd 2 (embedded interpreters): Python warnings only
        saved = None
    with tempfile.TemporaryFile(mode="w+b") as sink, warnings.catch_warnings(record=True) as recorded:
        warnings.simplefilter("always")
        if saved is not None:
            os.dup2(sink.fileno(), 2)
        try:
            yield caught
        finally:
            if saved is not None:
                with contextlib.suppress(OSError, ValueError):
                    sys.stderr.flush()
                os.dup2(saved, 2)
                os.close(saved)
            sink.seek(0)
            caught.extend(clean_lines(sink.read().decode("utf-8", "replace")))
            for w in recorded:
                line = f"{w.category.__name__}: {w.message}"
                if line not in caught:
                    caught.append(line)
