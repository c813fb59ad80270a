"""Text, Markdown and HTML for a ``train-compare`` JSON. The HTML is built from the page kit
(``trtprof.report.kit``) and report.py's speedup plot, so training and inference pages look and read alike."""
from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Any, Mapping, Sequence

from ..util.files import atomic_write_text
from ..system.validity import stamp_lines
from ..report.stamp import page_validity, validity_html
from ..report.kit import document, esc, fixed_column, fmt, img, sections_table, table
from ..compare.result import ComparisonResult
from ..report.compare_page import environment_html, speedup_figure
from ..schemas import TRAIN_COMPARE as SCHEMA
from ..measure.results import read_json

HEADERS = ("batch", "comparison", "speedup [95% CI]", "verdict", "baseline step ms", "candidate step ms",
           "loss after N (base → cand)", "skipped", "peak alloc MiB (base → cand)")


def rows(data: Mapping[str, Any]) -> list[list[str]]:
    out = []
    for c in data["comparisons"]:
        s, lat, acc, memo = c["speedup"], c["latency"], c["accuracy"], c.get("memory") or {}
        b_mem, c_mem = (memo.get("baseline") or {}), (memo.get("candidate") or {})
        ci = f"[{s['ci_low']:.3g}, {s['ci_high']:.3g}]"
        out.append([
            str(c["batch_size"]), f"{c['candidate']} vs {c['baseline']}",
            f"— (95% CI {ci} too wide)" if c.get("not_measurable") else
            f"{s['estimate']:.3f}× [{s['ci_low']:.3f}, {s['ci_high']:.3f}]", c["verdict"],
            fmt(lat["baseline"]["median_ms"], ".4g"), fmt(lat["candidate"]["median_ms"], ".4g"),
            f"{fmt(acc['baseline_loss_last'], '.4g')} → {fmt(acc['candidate_loss_last'], '.4g')}",
            fmt(acc.get("candidate_skipped_steps"), ".4g"),
            f"{fmt(b_mem.get('peak_allocated_mib'), '.0f')} → {fmt(c_mem.get('peak_allocated_mib'), '.0f')}",
        ])
    return out


# The page's two tables (the one above, nine columns wide, broke its comparisons and intervals over two
# lines at 1280 px and its "a → b" cells lined up on nothing): speed, then what training did, both led by
# the batch and the comparison; base and candidate in columns of their own, one number of decimals each.
SPEED_HEADERS = ("batch", "comparison", "speedup [95% CI]", "verdict", "baseline step ms", "candidate step ms")
TRAINING_HEADERS = ("batch", "comparison", "steps", "baseline loss", "candidate loss", "skipped steps",
                    "baseline peak MiB", "candidate peak MiB")
# text columns left-aligned like text, the interval never broken, digits of one width so columns line up
TABLE_CSS = (".train td,.train th{font-variant-numeric:tabular-nums}.train td:nth-child(2),.train th:nth-child(2)"
             "{text-align:left;white-space:nowrap}.train.speed td:nth-child(3){white-space:nowrap}"
             ".train.speed td:nth-child(4),.train.speed th:nth-child(4){text-align:left}")


def _columns(cells: list[list[Any]], numeric: Sequence[int]) -> list[list[str]]:
    """Rows with each ``numeric`` column formatted as one ``kit.fixed_column``; the other cells as given."""
    fixed = {i: fixed_column([row[i] for row in cells]) for i in numeric}
    return [[fixed[i][r] if i in fixed else str(cell) for i, cell in enumerate(row)] for r, row in enumerate(cells)]


def speed_rows(data: Mapping[str, Any]) -> list[list[str]]:
    cells = []
    for c in data["comparisons"]:
        s, lat = c["speedup"], c["latency"]
        ci = f"[{s['ci_low']:.3g}, {s['ci_high']:.3g}]"
        cells.append([str(c["batch_size"]), f"{c['candidate']} vs {c['baseline']}",
                      f"— (95% CI {ci} too wide)" if c.get("not_measurable") else
                      f"{s['estimate']:.3f}× [{s['ci_low']:.3f}, {s['ci_high']:.3f}]", c["verdict"],
                      lat["baseline"]["median_ms"], lat["candidate"]["median_ms"]])
    return _columns(cells, (4, 5))


def training_rows(data: Mapping[str, Any]) -> list[list[str]]:
    cells = []
    for c in data["comparisons"]:
        acc, memo = c["accuracy"], c.get("memory") or {}
        cells.append([str(c["batch_size"]), f"{c['candidate']} vs {c['baseline']}", fmt(acc.get("steps")),
                      acc["baseline_loss_last"], acc["candidate_loss_last"], fmt(acc.get("candidate_skipped_steps")),
                      (memo.get("baseline") or {}).get("peak_allocated_mib"),
                      (memo.get("candidate") or {}).get("peak_allocated_mib")])
    rows = _columns(cells, (3, 4))
    for row, cell in zip(rows, cells):  # MiB: whole numbers with separators ("14,307"), as on the serving page
        row[6], row[7] = (fmt(v, ",.0f") for v in cell[6:8])
    return rows


def tables_html(data: Mapping[str, Any]) -> str:
    """The verdict's two tables, each fitting a 1280 px window (``tests/report/test_page_width.py``)."""
    return (f"<style>{TABLE_CSS}</style><div class=\"train speed\">"
            + table(SPEED_HEADERS, speed_rows(data), verdict_col=3) + "</div>"
            "<h3>Training: loss after the timed steps, skipped steps, peak memory</h3><div class=\"train steps\">"
            + table(TRAINING_HEADERS, training_rows(data)) + "</div>")


def header_lines(data: Mapping[str, Any]) -> list[str]:
    """What the numbers depend on, said first: cuDNN autotuning and what the model source lost."""
    backend = (data.get("environment") or {}).get("backend") or {}
    # files written before the setting was recorded in "settings" carry the flag as it was in the backend
    bench = data.get("settings", {}).get("cudnn_benchmark", backend.get("cudnn_benchmark"))
    if bench is None:
        tuning = "cuDNN autotuning: not applicable (" + ("CPU" if data.get("device") == "cpu" else "not PyTorch") + ")"
    else:
        tuning = ("cuDNN autotuning: on (cudnn.benchmark = True, tuned before timing)" if bench else
                  "cuDNN autotuning: OFF (cudnn.benchmark = False: kernels chosen by heuristics)")
    return [tuning] + list((backend.get("source") or {}).get("notes", []))


def summary_lines(data: Mapping[str, Any]) -> list[str]:
    lines = header_lines(data)
    for c, row in zip(data["comparisons"], rows(data)):
        lines.extend(stamp_lines(c.get("validity")))  # each verdict's first line: VALID or NOT VALID and why
        speed = f"NOT MEASURABLE HERE: {c['not_measurable']}" if c.get("not_measurable") else \
            f"speedup {row[2]}  {row[3].upper()}"
        lines.append(f"batch {row[0]}: {row[1]}  {speed}  "
                     f"(step {row[4]} → {row[5]} ms, {c['rounds']} rounds, stopped: {c['stop_reason']})")
        lines.append(f"  loss after {c['accuracy']['steps']} steps {row[6]}, skipped steps {row[7]}, peak allocated {row[8]} MiB")
        for f in c["diagnosis"]:
            lines.append(f"  why [{f['rule']}]: {f['message']}")
    for b in data.get("batches", []):
        for arm, mb in (b.get("max_batch") or {}).items():
            if mb:
                more = "≥" if mb.get("at_limit") else ""
                lines.append(f"largest batch that fits, {arm}: {more}{mb['largest_fit']}")
    if data.get("device") == "cpu":
        lines.append("NOTE: measured on a CPU — a correctness run; training speed claims need a GPU")
    for w in data.get("warnings", []):
        lines.append(f"WARNING: {w}")
    return lines


def markdown(data: Mapping[str, Any]) -> str:
    lines = [f"# trtprof train-compare: {data.get('model', '')} [{data.get('backend', '')}, {data.get('device', '')}]", "",
             *[f"- {h}" for h in header_lines(data)], "",
             "| " + " | ".join(HEADERS) + " |", "|" + "---|" * len(HEADERS)]
    lines += ["| " + " | ".join(r) + " |" for r in rows(data)]
    for c in data["comparisons"]:
        if c.get("not_measurable"):
            lines += ["", f"**Batch {c['batch_size']}, {c['candidate']} vs {c['baseline']}: not measurable here** — "
                      f"{c['not_measurable']}"]
        if c.get("diagnosis"):
            lines += ["", f"**Batch {c['batch_size']}, {c['candidate']} vs {c['baseline']}: why**", ""]
            lines += [f"- `{f['rule']}`: {f['message']}" for f in c["diagnosis"]]
    for w in data.get("warnings", []):
        lines += ["", f"**WARNING:** {w}"]
    return "\n".join(lines) + "\n"


def per_arm_sections(data: Mapping[str, Any]) -> list[tuple[str, Any]]:
    """Each batch's solo pass as table sections (median step, each arm without its loss curve, the largest
    batch that fits): read as a table through the page kit, not a JSON dump."""
    out = []
    for b in data.get("batches", []):
        arms = {k: {kk: vv for kk, vv in v.items() if kk != "losses"} for k, v in (b.get("arms") or {}).items()}
        out.append((f"batch {b.get('batch_size')}", {"median_step_ms": b.get("median_step_ms"), "arms": arms,
                                                     "max_batch": b.get("max_batch")}))
    return out


def render_html(data: Mapping[str, Any]) -> str:
    title = f"trtprof train-compare: {data.get('model', '')} [{data.get('backend', '')}, {data.get('device', '')}]"
    parts = [f"<h1>{html.escape(title)}</h1>", f"<p>created {html.escape(str(data.get('created', '')))}</p>",
             validity_html(page_validity(data)),
             "<ul>" + "".join(f"<li>{html.escape(h)}</li>" for h in header_lines(data)) + "</ul>",
             "<h2>Verdict (one training step: forward + loss + backward + optimizer)</h2>",
             tables_html(data)]
    if data.get("device") == "cpu":
        parts.append('<div class="warn">Measured on a CPU: a correctness run; speed claims need a GPU.</div>')
    for w in data.get("warnings", []):
        parts.append(f'<div class="warn"><b>WARNING:</b> {html.escape(w)}</div>')
    measured = [c for c in data["comparisons"] if not c.get("not_measurable")]
    if measured:
        figure = speedup_figure([ComparisonResult.from_json(c) for c in measured])  # the fields it reads are compare's
        parts.append("<h2>Speedup vs batch size</h2>" + img(figure, "speedup"))
    parts.append("<h2>Why</h2>")
    for c in data["comparisons"]:
        items = "".join(f"<li><b>{html.escape(f['rule'])}</b>: {html.escape(f['message'])}</li>"
                        for f in c.get("diagnosis", [])) or "<li>no rule found evidence</li>"
        parts.append(f"<h3>batch {esc(c['batch_size'])}: {html.escape(c['candidate'])} vs {html.escape(c['baseline'])}</h3>"
                     f"<ul>{items}</ul>")
    parts.append("<h2>Per arm (solo pass)</h2>" + sections_table(per_arm_sections(data)))
    parts.append(environment_html(data))  # the same readable table as the inference pages, not a JSON dump
    return document(title, parts)


def write_html(data: Mapping[str, Any], out: Path) -> Path:
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out, render_html(data))
    return out


def write_report(path: Path, out: Path) -> tuple[Path, str]:
    """The page for a stored train-compare JSON (``trtprof report`` uses it); returns (html, Markdown)."""
    data = read_json(Path(path))  # bounded, one-line errors, and a .json.gz read as its JSON
    return write_html(data, out), markdown(data)
