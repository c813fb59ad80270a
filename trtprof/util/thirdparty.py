"""Warnings of the libraries trtprof runs (ONNX Runtime's log, Python ``warnings``), kept for the JSON.

Why: ONNX Runtime writes its warnings from C++ straight to file descriptor 2, coloured
("\\x1b[0;93m… [W:onnxruntime:, graph.cc:5809 CleanUnusedInitializersAndNodeArgs] Removing initializer …"),
between trtprof's own lines; Python libraries (onnxconverter-common) warn through ``warnings``. A reader
cannot tell which line belongs to what, and the result file keeps none of them (issue 34). Inside
``third_party_warnings()`` both are captured: fd 2 is pointed at a temp file (so C++ writes land there
too, which ``contextlib.redirect_stderr`` cannot do), Python warnings are recorded, and each becomes one
plain line (colour codes and the timestamp removed) in the list the block gets.

Keep the block short and around the library call only: everything written to stderr inside it is
taken, trtprof's own lines included. Engines are loaded inside one (``measure.bench.load_runner``) and
each timed block runs inside one (``measure.interleave.measure_block``, ``measure.bench.bench_one``): what
the library says there is tallied per result (``Tally``: each line once, in how many loads or blocks).
"""
from __future__ import annotations

import contextlib
import os
import re
import sys
import tempfile
import warnings
from typing import Any, Iterable, Iterator, Mapping

# ANSI colour codes ("\x1b[0;93m", "\x1b[m") that ORT puts around each line
ANSI = re.compile(r"\x1b\[[0-9;]*m")
# ORT's prefix "2026-12-02 01:59:16.866140838 [W:onnxruntime:, graph.cc:5809 Function] ": the severity
# letter and the source location are kept short, the timestamp dropped
ORT_LINE = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+ \[(?P<sev>[VIWEF]):onnxruntime:[^,\]]*,?\s*(?P<where>[^\]]*)\]\s*")
# at most this many lines kept per block (a model with 10 000 unused initializers warns 10 000 times)
MAX_LINES = 50
# at most this much of a block's captured output is read: a warning written at every inference of a
# million-iteration block is 150 MB of one line repeated; the distinct lines come first
MAX_READ_BYTES = 1 << 20
# said once where a block wrote more than that (one text, so the results' tally counts it like any line)
CUT_SHORT = f"… (more output not read: over {MAX_READ_BYTES >> 20} MiB in one block)"


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


# A file named by the process that started this one (a measurement worker: measure.workers.Worker), into
# which the outermost capture block writes instead of an anonymous temp file: a worker that dies inside a
# block (a C++ abort, a CUDA assert) leaves its last words there for its parent's one-line error, where
# they would otherwise go down with the unlinked temp file.
SINK_ENV = "TRTPROF_CAPTURE_FILE"
_depth = [0]  # capture blocks open in this process: a nested one must not truncate the named file


def _open_sink() -> Any:
    path = os.environ.get(SINK_ENV)
    if path and _depth[0] == 0:
        with contextlib.suppress(OSError):
            return open(path, "w+b")  # each block starts it empty
    return tempfile.TemporaryFile(mode="w+b")


@contextlib.contextmanager
def third_party_warnings(repeat: bool = True) -> Iterator[list[str]]:
    """Capture fd-2 output and Python warnings raised inside the block; the yielded list is filled, one
    plain line each, when the block ends (also when it raises). ``repeat``: record a Python warning
    every time it is raised (a build: warnings shown once before are wanted again); False around timed
    iterations, where Python's own once-per-place rule keeps a warning raised at every call from
    costing a record each time (the first one in the block is still kept)."""
    caught: list[str] = []
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError):  # no fd 2 (embedded interpreters): Python warnings only
        saved = None
    with _open_sink() as sink, warnings.catch_warnings(record=True) as recorded:
        if repeat:
            warnings.simplefilter("always")
        if saved is not None:
            os.dup2(sink.fileno(), 2)
        _depth[0] += 1
        try:
            yield caught
        finally:
            _depth[0] -= 1
            if saved is not None:
                with contextlib.suppress(OSError, ValueError):
                    sys.stderr.flush()
                os.dup2(saved, 2)
                os.close(saved)
            size = sink.seek(0, os.SEEK_END)
            sink.seek(0)
            head = sink.read(MAX_READ_BYTES)
            if size > MAX_READ_BYTES:  # a cut line is not kept half
                head = head[:head.rfind(b"\n") + 1]
            caught.extend(clean_lines(head.decode("utf-8", "replace")))
            if size > MAX_READ_BYTES:
                caught.append(CUT_SHORT)
            for w in recorded:
                line = f"{w.category.__name__}: {w.message}"
                if line not in caught:
                    caught.append(line)
            with contextlib.suppress(OSError):  # a named sink keeps only an open block's words (SINK_ENV)
                sink.truncate(0)


# When a library's line was written: while an engine was loaded (session creation) or while it ran
# (warm-up and timed blocks). A result counts each line in how many loads / blocks it appeared.
AT_LOAD = "load"
AT_RUN = "timing"
# how a page or terminal line says when, and what the count counts
PHRASE = {AT_LOAD: ("while loading", "load"), AT_RUN: ("while running", "block")}


class Tally:
    """Library lines seen across the loads and blocks of one result, each kept once with a count.

    Why counts and not every line: ORT warns once per inference when an output's declared shape is
    wrong ("VerifyOutputSizes …"): a compare runs it 100 000 times. Each block is captured once and
    de-duplicated there (``clean_lines``); the tally says in how many of the loads (or blocks) a line
    appeared, so "6 of 6 loads" and "1 of 40 blocks" read differently."""

    def __init__(self) -> None:
        self.seen: dict[tuple[str, str], int] = {}  # (when, line) → loads or blocks that wrote it
        self.total: dict[str, int] = {AT_LOAD: 0, AT_RUN: 0}

    def add(self, when: str, lines: Iterable[str]) -> None:
        """One load (``AT_LOAD``) or one block (``AT_RUN``) and the lines it wrote (maybe none)."""
        self.total[when] += 1
        for line in dict.fromkeys(lines):
            self.seen[(when, line)] = self.seen.get((when, line), 0) + 1

    def to_json(self) -> list[dict[str, Any]]:
        """``[{"message", "during": "load"|"timing", "count", "of"}]``, loads first, in order seen."""
        order = sorted(self.seen, key=lambda k: k[0] != AT_LOAD)
        return [{"message": line, "during": when, "count": self.seen[(when, line)], "of": self.total[when]}
                for when, line in order]


def tally_json(load_lines: Iterable[str], run_lines: Iterable[str]) -> list[dict[str, Any]]:
    """The JSON of one load and one block (``bench``: each engine loaded once, one timed run)."""
    tally = Tally()
    tally.add(AT_LOAD, load_lines)
    tally.add(AT_RUN, run_lines)
    return tally.to_json()


def warning_lines(entries: Iterable[Mapping[str, Any]]) -> list[str]:
    """Each tallied entry as one line for a page or a terminal: where and how often, then the message."""
    out = []
    for e in entries:
        when, unit = PHRASE.get(str(e.get("during")), (f"during {e.get('during')}", "time"))
        count, of = int(e.get("count", 0)), int(e.get("of", 0))
        out.append(f"{e.get('message')} ({when}, in {count} of {of} {unit}{'s' if of != 1 else ''})")
    return out


def terminal_line(per_result: Iterable[Iterable[Mapping[str, Any]]], where: str) -> str | None:
    """The terminal's one line for every result's library warnings (None when there are none): how many
    distinct ones, and where they are kept (``where``: the JSON file and its key). The lines themselves
    are in the JSON and on the page, beside the result they qualify."""
    distinct = {(str(e.get("during")), str(e.get("message"))) for entries in per_result for e in entries}
    if not distinct:
        return None
    phases = " and ".join(PHRASE[w][0] for w in (AT_LOAD, AT_RUN) if any(d == w for d, _ in distinct))
    n = len(distinct)
    return (f"note: the runtime library wrote {n} distinct warning{'s' if n != 1 else ''} {phases} the engines "
            f"(kept with their counts in {where}; on the report page beside each result)")
