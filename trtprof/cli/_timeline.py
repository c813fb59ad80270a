"""The files ``--timeline`` and ``--trace-dir`` write, for ``profile`` and ``compare``: checked before any
work (only trtprof's own earlier timeline files are ever replaced), then written with what they say printed.

Beside ``--out``: OUT.timeline.png (both commands) and the page OUT.timeline.html (profile; compare's
timelines are a section of its report page). In ``--trace-dir``: MODEL.ARM.bBATCH.trace.json per arm.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any, Mapping, Sequence

from ..errors import BadInput
from ..util.outputs import CALLER_CHECKED, check_regular
from . import _common

PAGE_MARK = "<title>trtprof timeline:"  # the page profile --timeline writes starts with it
TRACE_SUFFIX = ".trace.json"


def timeline_paths(out: Path) -> tuple[Path, Path]:
    """The PNG and the page that ``--timeline`` writes beside ``--out``."""
    return out.with_suffix(".timeline.png"), out.with_suffix(".timeline.html")


def add_trace_args(p: argparse.ArgumentParser, what: str) -> None:
    p.add_argument("--trace-dir", type=Path, default=None, metavar="DIR",
                   help=f"write each {what}'s timeline as a Chrome trace-event file (MODEL.{what.upper()}.bBATCH"
                        ".trace.json) that ui.perfetto.dev and chrome://tracing open; implies --timeline")


def is_ours_png(path: Path) -> bool:
    """A PNG trtprof's ``plot_timelines`` wrote: its text chunk (before the pixels) names the producer."""
    from ..layers.timeline import PNG_PRODUCER

    try:
        with path.open("rb") as f:
            head = f.read(4096)
    except OSError:
        return False
    return head.startswith(b"\x89PNG") and PNG_PRODUCER.encode() in head


def check_timeline_outputs(args: argparse.Namespace, page: bool = True) -> None:
    """Before any work: the PNG (and, for profile, the page) beside --out may replace only an earlier
    timeline of trtprof's (the page's PAGE_MARK, the PNG's producer chunk); the trace dir must be a
    folder that can be written."""
    png, html_page = timeline_paths(args.out)
    # `--out X --trace-dir X`: the traces made X a folder and the JSON's rename failed after all the work
    _common.check_distinct_outputs(out=args.out, trace_dir=args.trace_dir, timeline=png)
    page_ours = page and html_page.is_file() and PAGE_MARK in html_page.read_text(encoding="utf-8", errors="replace")[:4096]
    for path in (png, html_page) if page else (png,):
        _common.check_output_file(path, "--timeline", suffix=path.suffix, engines=[args.engines],
                                  kind=CALLER_CHECKED, args=args)  # existing files: the rule below
        ours = page_ours or (path == png and is_ours_png(path))
        if path.exists() and not ours:
            raise BadInput("--timeline: exists and is not a timeline trtprof wrote; move it or choose another --out",
                           path=path)
    if args.trace_dir is not None:
        _common.check_output_dir(args.trace_dir, "--trace-dir", engines=[args.engines])


def check_trace_path(path: Path) -> None:
    """A trace file may replace only a trace trtprof wrote (``otherData.producer``), and never a link, a
    FIFO or a device (read, a FIFO would block)."""
    check_regular(path, "--trace-dir")
    if not path.exists():
        return
    try:
        ours = json.loads(path.read_text(encoding="utf-8")).get("otherData", {}).get("producer") == "trtprof"
    except (OSError, ValueError, AttributeError):
        ours = False
    if not ours:
        raise BadInput("--trace-dir: a file of that name exists and is not a trace trtprof wrote", path=path)


def check_trace_names(folder: Path, arms: Sequence[str], batch_sizes: Sequence[int] | None) -> None:
    """Before the model's name is known (compare resolves it with the engines): every file in ``folder``
    that a trace of these arms and batch sizes could be named (any model; any batch size when
    ``batch_sizes`` is None, as for an engines dir's built sizes) must be trtprof's."""
    import re

    from ..util.files import safe_stem

    if not folder.is_dir():
        return
    batches = "|".join(str(b) for b in batch_sizes) if batch_sizes is not None else r"\d+"
    name = re.compile(rf".+\.({'|'.join(re.escape(safe_stem(a)) for a in arms)})\.b({batches}){re.escape(TRACE_SUFFIX)}")
    for path in sorted(folder.iterdir()):
        if name.fullmatch(path.name):
            check_trace_path(path)


def write_timeline_files(timelines: Sequence, model: str, out: Path, trace_dir: Path | None, batch_size: int,
                         page: bool = True) -> None:
    """Print what the timelines say; write the PNG (and the page) beside ``out`` and the trace files."""
    from ..layers.timeline import findings, plot_timelines, write_traces
    from ..util.files import atomic_write_text

    for line in findings(timelines):
        print(f"timeline: {line}")
    png, html_page = timeline_paths(out)
    plot_timelines(timelines, png, title=f"{model}, batch {batch_size}")
    written = [png]
    if page:
        from ..report.timeline_page import timeline_page

        atomic_write_text(html_page, timeline_page([t.to_json() for t in timelines], model))
        written.append(html_page)
    print(f"timeline: {', '.join(map(str, written))}")
    if trace_dir is not None:
        for path in write_traces(timelines, model, trace_dir, check=check_trace_path):
            print(f"trace: {path}")


# --- compare --timeline ----------------------------------------------------------------------------

def add_compare_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--timeline", action="store_true",
                   help="after the timing (never inside a timed round), record one steady-state iteration per "
                        "precision at one batch size, as it was timed (CUDA graph or eager, copies): kernels/nodes "
                        "per stream or thread on one time axis, idle gaps, casts; into the JSON and its report "
                        "page's Timeline section, and as OUT.timeline.png")
    p.add_argument("--timeline-batch", type=_common.batch_size, default=None, metavar="B",
                   help="the batch size of --timeline (one of --batch-sizes; default the smallest); implies --timeline")
    add_trace_args(p, "arm")


def compare_request(args: argparse.Namespace, sizes: Sequence[int], arms: Sequence[str], is_ab: bool) -> Any:
    """``--timeline`` / ``--timeline-batch`` / ``--trace-dir``: the request, its output files checked
    now, before any build or measurement; None without them."""
    if not (args.timeline or args.timeline_batch is not None or args.trace_dir is not None):
        return None
    from ..compare.timeline import TimelineRequest

    if is_ab:
        raise BadInput("--timeline: records the precisions of one model, not an A/B")
    request = TimelineRequest(batch_size=args.timeline_batch)
    if sizes:
        request.pick(sizes)  # a --timeline-batch outside --batch-sizes
    check_timeline_outputs(args, page=False)
    if args.trace_dir is not None:
        batches = [request.batch_size] if request.batch_size else (list(sizes) or None)  # None: not known yet
        check_trace_names(args.trace_dir, arms, batches)
    return request


def write_compare_files(args: argparse.Namespace, block: Mapping[str, Any] | None, model: str) -> None:
    """After the JSON: the PNG beside it and the trace files, with what the timelines say."""
    if block is None:
        return
    from ..compare.timeline import timelines_of

    print(f"timeline: batch {block['batch_size']} ({block['chosen_by']}), recorded after the timing in "
          f"{block['recorded_s']:.1f} s")
    write_timeline_files(timelines_of(block), model, args.out, args.trace_dir, block["batch_size"], page=False)
