"""Which page a result file gets: the one place that picks it, by the file's ``schema``.

A ``trtprof sweep`` result gets the verdict matrix (``sweep.matrix``), a ``train-compare`` result its
training page (``train.page``), compare and bench files the report page (``report``). The file is read
once (``compare.results_file.read_results``) and the page takes its typed value. The pages import the
page kit (``trtprof.report.kit``) and never this module, so picking a page adds no circle.
"""
from __future__ import annotations

from pathlib import Path

from ..compare.results_file import OtherResults, ResultsFile
from ..report.compare_page import write_report as write_compare_report
from ..schemas import SWEEP, TRAIN_COMPARE
from ..sweep.matrix import cell_result_files, write_sweep_report
from ..train.page import markdown as train_markdown, write_html as write_train_html


def write_report(doc: ResultsFile, path: Path, out: Path) -> tuple[Path, str]:
    """Write the page for ``doc``, the result file at ``path`` read, to ``out``; return (html path,
    Markdown summary)."""
    if isinstance(doc, OtherResults) and doc.schema == SWEEP:
        return write_sweep_report(doc.data, path, out)  # the matrix and each cell's page (it reads the cells)
    if isinstance(doc, OtherResults) and doc.schema == TRAIN_COMPARE:
        data = doc.to_json()
        return write_train_html(data, out), train_markdown(data)
    return write_compare_report(path, out, doc)


def cell_pages(doc: ResultsFile, path: Path, out: Path) -> list[str]:
    """The files a sweep's report writes beside ``out`` (``<out stem>_cells/<id>.html``, relative to
    ``out``'s folder), known before anything is written; none for other result files."""
    if not (isinstance(doc, OtherResults) and doc.schema == SWEEP):
        return []
    return [f"{Path(out).stem}_cells/{cell_id}.html" for cell_id, _ in cell_result_files(doc.data, Path(path))]
