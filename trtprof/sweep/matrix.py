"""The merged sweep as a verdict matrix (model × batch rows, GPU type × comparison columns), a CSV
with one row per comparison, and an HTML page that links one page per cell (``trtprof report``)."""
from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any, Mapping, Sequence

from ..util.files import atomic_write_text
from ..util.datafile import safe_name
from ..errors import BadInput
from ..report.kit import TONES, Toned, document, esc, fmt, line_html, table
from ..report.stamp import page_validity, validity_html
from ..system.environment import RUNTIME_PACKAGES
from ..system.validity import merge
from ..report.compare_page import load, render_html
from ..compare.checks import sweep_entries as entries
from .rows import csv_rows, device_type


def _fmt_speedup(row: Mapping[str, Any]) -> str:
    s, lo, hi = row.get("speedup"), row.get("ci_low"), row.get("ci_high")
    if s is None:
        return "–"
    ci = f" [{lo:.3f}, {hi:.3f}]" if lo is not None and hi is not None else ""
    return f"{s:.3f}×{ci} {row.get('verdict') or ''}".strip()


def matrix(merged: Mapping[str, Any]) -> tuple[list[str], list[list[str]]]:
    """Headers and rows of the verdict matrix (compare cells; failed cells say so in their column)."""
    cols: dict[tuple[str, str], None] = {}
    cells: dict[tuple[str, int], dict[tuple[str, str], str]] = defaultdict(dict)
    for e in merged.get("entries", []):
        if e.get("kind") != "compare":
            continue
        dev = device_type(e)
        key = (str(e.get("model")), int(e.get("batch_size") or 0))
        if e.get("status") != "ok":
            pairs = [f"{c} vs {e['precisions'][0]}" for c in (e.get("precisions") or [])[1:]] or ["?"]
            for pair in pairs:
                cols[(dev, pair)] = None
                cells[key][(dev, pair)] = e["status"] + (f": {e.get('error')}" if e.get("error") else "")
            continue
        for row in e.get("summary", []):
            pair = f"{row.get('candidate')} vs {row.get('baseline')}"
            cols[(dev, pair)] = None
            cells[key][(dev, pair)] = _fmt_speedup(row)
    headers = ["model", "batch", *(f"{dev}: {pair}" for dev, pair in cols)]
    rows = [[model, str(batch), *(cells[(model, batch)].get(col, "–") for col in cols)]
            for model, batch in sorted(cells)]
    return headers, rows


def _md_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    return ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers),
            *("| " + " | ".join(c.replace("|", "/") for c in row) + " |" for row in rows)]


def environments(merged: Mapping[str, Any]) -> list[list[str]]:
    """One row per (host, GPU) that ran cells: what a reader needs to trust or reproduce a column."""
    seen: dict[tuple[str, str], list[str]] = {}
    for e in merged.get("entries", []):
        if e.get("status") == "missing":
            continue
        host, gpu, pk = e.get("host") or {}, e.get("gpu") or {}, e.get("packages") or {}
        key = (str(host.get("hostname")), str(gpu.get("uuid") or device_type(e)))
        libs = ", ".join(f"{k} {pk[k]}" for k in RUNTIME_PACKAGES if k in pk)
        seen.setdefault(key, [key[0], device_type(e), str(gpu.get("uuid") or "–"), str(gpu.get("driver") or "–"),
                              str(host.get("python") or ""), libs])
    return list(seen.values())


def markdown(merged: Mapping[str, Any]) -> str:
    ex = merged.get("executor") or {}
    lines = [f"# trtprof sweep: {merged.get('cells_ok')} ok, {merged.get('cells_failed')} failed, "
             f"{merged.get('cells_missing')} missing of {merged.get('cells_total')} cells "
             f"({ex.get('name')} executor, this run {merged.get('wall_s')} s)", ""]
    headers, rows = matrix(merged)
    if rows:
        lines += ["Speedup = baseline median / candidate median with its CI, and the verdict, per cell.", ""]
        lines += _md_table(headers, rows)
    bench = [r for r in csv_rows(merged) if r.get("kind") == "bench" and r.get("precision")]
    if bench:
        lines += ["", *_md_table(("model", "device", "batch", "precision", "median ms", "p99 ms"),
                                 [[str(r["model"]), str(r["device_type"]), str(r["batch_size"]), str(r["precision"]),
                                   f"{r['median_ms']:.4g}" if r.get("median_ms") is not None else "–",
                                   f"{r['p99_ms']:.4g}" if r.get("p99_ms") is not None else "–"] for r in bench])]
    failed = [e for e in merged.get("entries", []) if e.get("status") == "failed"]
    for e in failed:
        lines += ["", f"**FAILED** {e.get('name')}: {e.get('error')}"]
    for w in merged.get("warnings", []):
        lines += ["", f"**WARNING:** {w}"]
    env = environments(merged)
    if env:
        lines += ["", *_md_table(("host", "device", "GPU UUID", "driver", "python", "libraries"), env)]
    return "\n".join(lines) + "\n"


def cell_result_files(merged: Mapping[str, Any], path: Path) -> list[tuple[str, Path]]:
    """(cell id, its result JSON) of each ok cell. The id names a page file, so it must be a plain
    name, and the result file must be the cell's own ``cells/<id>.json``: data never becomes a path."""
    out = []
    for i, e in enumerate(entries(merged, path)):
        if e.get("status") != "ok" or not e.get("result_file"):
            continue
        cell_id = safe_name(e.get("id"), f"{path}: entries[{i}].id")
        if e["result_file"] != f"cells/{cell_id}.json":
            raise BadInput(f"entries[{i}].result_file: {str(e['result_file'])[:80]!r} is not cells/{cell_id}.json",
                           path=path)
        if (path.parent / e["result_file"]).is_file():
            out.append((cell_id, path.parent / e["result_file"]))
    return out


def verdict_cell(cell: str) -> str:
    """A matrix cell coloured by its verdict, the last word of "0.968× [0.54, 1.73] inconclusive" (kit.Toned)."""
    words = cell.split()
    return Toned(cell, words[-1]) if words and words[-1] in TONES else cell


def sweep_validity(cell_pages: Sequence[Mapping[str, Any]], merged: Mapping[str, Any]) -> str:
    """The validity box of the whole sweep: every measured cell's stamp merged (``report.stamp``), and the
    cells that measured nothing counted, before any number; '' for cells made before stamps existed."""
    found = [v for v in (page_validity(d) for d in cell_pages) if v is not None]
    box = validity_html(merge(found), f"{len(found)} measured cell(s)") if found else ""
    unmeasured = sum(int(merged.get(k) or 0) for k in ("cells_failed", "cells_missing"))
    if unmeasured:
        box += (f'<div class="warn"><b>{esc(unmeasured)} cell(s) measured nothing</b> (failed or missing: see '
                "Cells below); the matrix has no verdict for them.</div>")
    return box


def executor_html(executor: Any) -> str:
    """How the sweep ran: its scalar settings as one two-column table, each list of records (the worker
    slots, the engine pre-builds) as a table of its own with a column per field; '' without an executor."""
    if not isinstance(executor, Mapping):
        return ""
    scalars = [[str(k), fmt_value(v)] for k, v in executor.items() if not isinstance(v, (list, Mapping))]
    parts = ["<h2>Executor</h2>" + table(("setting", "value"), scalars)]
    for key, value in executor.items():
        records = [v for v in value if isinstance(v, Mapping)] if isinstance(value, list) else []
        if isinstance(value, Mapping):
            records = [value]
        if records:
            fields = list(dict.fromkeys(k for r in records for k in r))
            parts.append(f"<h3>{esc(key)}</h3>" + table(fields, [[fmt_value(r.get(f)) for f in fields] for r in records]))
    return "".join(parts)


def fmt_value(value: Any) -> str:
    """A JSON value in a cell: lists joined with commas, None as "–", a float to 4 significant digits."""
    if isinstance(value, (list, tuple)):
        return ", ".join(fmt_value(v) for v in value) or "–"
    return fmt(value, ".4g") if isinstance(value, float) else "–" if value is None else str(value)


def cell_rows(merged: Mapping[str, Any], pages: Mapping[str, str]) -> tuple[list[list[str]], dict[tuple[int, int], str]]:
    """The Cells table's rows and the links from each cell's name to its own page."""
    rows: list[list[str]] = []
    links: dict[tuple[int, int], str] = {}
    for e in merged.get("entries", []):
        if e.get("id") in pages:
            links[(len(rows), 0)] = pages[e["id"]]
        rows.append([str(e.get("name")), str(e.get("status")), device_type(e),
                     str((e.get("slot") or {}).get("name") or "–"), str(e.get("wall_s") or "–"),
                     ", ".join(b.get("name") or "" for b in e.get("beside") or []) or "–", str(e.get("error") or "")])
    return rows, links


def write_sweep_report(merged: Mapping[str, Any], path: Path, out: Path) -> tuple[Path, str]:
    """``out`` (the matrix) plus ``<out stem>_cells/<cell id>.html`` (each compare/bench cell's own page,
    rendered by ``trtprof.report.compare_page``); the matrix links them. ``merged``: the sweep file at
    ``path`` as read once and checked (``compare.results_file.read_results``), not read again here; each
    cell's file is read once, for its page. Returns (html path, Markdown)."""
    path, out = Path(path), Path(out)
    cell_pages = cell_result_files(merged, path)  # validated before anything is written
    out.parent.mkdir(parents=True, exist_ok=True)
    pages_dir = out.parent / f"{out.stem}_cells"
    pages: dict[str, str] = {}
    cells: list[Mapping[str, Any]] = []
    for cell_id, cell_json in cell_pages:
        pages_dir.mkdir(exist_ok=True)
        page_path = pages_dir / f"{cell_id}.html"
        cells.append(load(cell_json))
        atomic_write_text(page_path, render_html(cells[-1]))
        pages[cell_id] = f"{pages_dir.name}/{page_path.name}"
    headers, rows = matrix(merged)
    parts = [f"<h1>trtprof sweep</h1><p>{esc(merged.get('cells_ok'))} ok, {esc(merged.get('cells_failed'))} failed, "
             f"{esc(merged.get('cells_missing'))} missing of {esc(merged.get('cells_total'))} cells; created "
             f"{esc(merged.get('created'))}</p>", sweep_validity(cells, merged)]
    for w in merged.get("warnings", []):
        parts.append(f'<div class="warn"><b>WARNING:</b> {line_html(w)}</div>')
    if rows:
        parts.append("<h2>Verdict matrix</h2><p>speedup = baseline median / candidate median, with its CI and "
                     "verdict, as each cell's trtprof compare reported it.</p>"
                     + table(headers, [[verdict_cell(c) for c in row] for row in rows]))
    cell_table, links = cell_rows(merged, pages)
    parts.append("<h2>Cells</h2>" + table(("cell", "status", "device", "worker", "wall s", "ran beside", "error"),
                                          cell_table, links=links))
    env = environments(merged)
    if env:
        parts.append("<h2>Environment</h2>" + table(("host", "device", "GPU UUID", "driver", "python", "libraries"), env))
    parts.append(executor_html(merged.get("executor")))
    text = document("trtprof sweep", parts)
    atomic_write_text(out, text)
    return out, markdown(merged)
