"""The timeline section and page: every precision's iteration stacked on one time axis, with what it says.

The section goes on the compare page (``compare --timeline``) and on the page ``profile --timeline``
writes beside its JSON; the SVG itself is drawn by ``trtprof.layers.timeline`` (the layers wing owns
the timeline type), this module only puts it on a page.
"""
from __future__ import annotations

import html
from typing import Any, Mapping, Sequence

from ..layers.timeline import HOST_BOUND_IDLE_SHARE, Timeline, findings, timeline_svg
from .kit import document, table


def timeline_section(timelines: Sequence[Mapping[str, Any]], model: str = "", note: str = "") -> str:
    """HTML for timelines given as their JSON ({precision, spans, …}); '' when there are none.
    ``note``: a paragraph after the heading (compare: which batch size and why, when it was recorded)."""
    if not timelines:
        return ""
    parsed = [Timeline.from_json(t) for t in timelines]
    first = parsed[0]
    rows = [[t.precision, f"{t.window_us / 1e3:.3g}", f"{t.busy_us() / 1e3:.3g}", f"{t.kernel_us / 1e3:.3g}",
             f"{t.idle_share:.0%}", str(len(t.spans)), str(len(t.of_kind('cast'))),
             ", ".join(f"{k}={v}" for k, v in sorted(t.settings.items()))] for t in parsed]
    parts = [f"<h2>Timeline: one steady-state iteration per precision (batch {first.batch_size})</h2>",
             f"<p>{html.escape(first.source)}; recorded in a separate run after any timing. Same time axis for "
             "every precision: the shorter iteration looks shorter. Grey: nothing runs (idle); outlined: casts. "
             "Hover a bar for its kernel, ONNX node and duration.</p>",
             timeline_svg(parsed),
             table(["precision", "iteration ms", "busy ms", "sum of spans ms", "idle", "spans", "casts", "settings"],
                   rows),
             f"<p>Idle at or above {HOST_BOUND_IDLE_SHARE:.0%} of the iteration is called launch- or host-bound when "
             "launched eagerly, and gaps between short kernels in a CUDA-graph replay (which launches nothing "
             "from the host).</p>",
             "<ul>" + "".join(f"<li>{html.escape(line)}</li>" for line in findings(parsed)) + "</ul>"]
    if note:
        parts.insert(1, f"<p>{html.escape(note)}</p>")
    if model:
        parts.insert(1, f"<p>Model: {html.escape(model)}</p>")
    return "".join(parts)


def compare_section(data: Mapping[str, Any]) -> str:
    """The compare page's Timeline section (``compare --timeline``); '' when the file has none. The
    block's types were checked when the file was read (``compare.checks.check_timeline``)."""
    block = data.get("timeline")
    if not block:
        return ""
    note = (f"Batch {block['batch_size']}: {block.get('chosen_by') or 'chosen by the run'}. Recorded after "
            f"{block.get('recorded_after') or 'the timing'}, as the timing ran it: the verdicts above are not "
            "from these iterations, which ran under a profiler; the findings in the diagnosis that start with "
            "'timeline' come from here.")
    return timeline_section(block["timelines"], note=note)


def timeline_page(timelines: Sequence[Mapping[str, Any]], model: str) -> str:
    return document(f"trtprof timeline: {model}", [f"<h1>Timeline: {html.escape(model)}</h1>",
                                                   timeline_section(timelines)])
