"""Which page a result file gets: the one place that picks it, by the file's ``schema``.

A ``trtprof sweep`` result gets the verdict matrix (``sweep.matrix``), a ``train-compare`` result its
training page (``train.page``), compare and bench files the report page (``report``). The pages
import the page kit (``trtprof.report.kit``) and never this module, so picking a page adds no circle.
"""
from __future__ import annotations

from pathlib import Path

from ..report.compare_page import write_report as write_compare_report
from ..measure.results import read_json
from ..schemas import SWEEP, TRAIN_COMPARE
from ..sweep.matrix import cell_result_files, load_sweep, write_sweep_report
from ..train.page import write_report as write_train_report


def write_report(path: Path, out: Path) -> tuple[Path, str]:
    """Write the page for the result file at ``path`` to ``out``; return (html path, Markdown summary)."""
    raw = read_json(Path(path))
    schema = raw.get("schema")
    if schema == SWEEP:
        return write_sweep_report(path, out)
    if schema == TRAIN_COMPARE:
        return write_train_report(path, out)
    return write_compare_report(path, out, raw)


def cell_pages(path: Path, out: Path) -> list[str]:
    """The files a sweep's report writes beside ``out`` (``<out stem>_cells/<id>.html``, relative to
    ``out``'s folder), known before anything is written; none for other result files."""
    raw = read_json(Path(path))
    if raw.get("schema") != SWEEP:
        return []
    return [f"{Path(out).stem}_cells/{cell_id}.html" for cell_id, _ in cell_result_files(load_sweep(path), Path(path))]
