"""One self-contained HTML page (plots embedded as base64 PNG) and a Markdown summary.

Why self-contained: a report gets mailed, attached to issues and archived with the engine; an HTML
file that loads images or scripts from beside it (or from the web) breaks the moment it moves.
Reads a ``trtprof compare`` JSON, or a ``trtprof bench`` results JSON (no verdicts then).
"""
from __future__ import annotations

import html
import tempfile
from collections import defaultdict
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from . import plots
from ..compare.accuracy import summary_line
from ..compare.result import ComparisonResult
from ..util.files import atomic_write_text
from ..errors import BadInput
from ..convert.fp16range import predicted_lines
from ..util.labels import engine_labels, fmt_ms, fmt_rate
from .layers_section import layers_section
from .intro import intro_html, ratio_note
from .timeline_page import compare_section
from ..compare.report_value import CompareDocument
from ..compare.results_file import ResultsFile, read_results
from .stamp import page_validity, validity_html
from .kit import Toned, breakable, bullets, document, esc, file_b64, flat_pairs, fmt, img, line_html, png_b64, pyplot, sections_table, table
from ..measure.results import BenchResult, ResultSet
from ..util.thirdparty import warning_lines
from ..util.wording import plural, times


def load(path: Path, doc: ResultsFile | None = None) -> dict[str, Any]:
    """What the page reads: the file's JSON (the typed value's ``to_json()``) with ``kind`` "compare" or
    "bench" and the typed entries, ``parsed_comparisons`` (``compare.result.ComparisonResult``) and
    ``parsed_results`` (``measure.results.BenchResult``). ``doc``: the file already read
    (``compare.results_file.read_results``; it is then not read again). One-line errors for anything else."""
    path = Path(path)
    if doc is None:
        doc = read_results(path)
    if isinstance(doc, CompareDocument):
        return {**doc.to_json(), "kind": "compare", "parsed_results": list(doc.results),
                "parsed_comparisons": list(doc.comparisons)}
    if isinstance(doc, ResultSet):  # a results file names no single model/backend: title it by what it holds
        data = doc.to_json()
        results = doc.results
        return {**data, "model": data.get("model") or ", ".join(sorted({r.model for r in results})) or path.stem,
                "backend": data.get("backend") or ", ".join(sorted({r.backend for r in results})),
                "kind": "bench", "parsed_results": results, "parsed_comparisons": []}
    raise BadInput(f"not a trtprof compare or results file (schema {doc.schema!r})", path=path)


# ---------------------------------------------------------------------------------------------
# Figures (matplotlib, Agg) → base64 PNG
# ---------------------------------------------------------------------------------------------


# Pairs at one batch size are drawn side by side, this fraction of an octave apart on the log-2 batch
# axis: fp16 and int8 at batch 8 must not sit on top of each other.
DODGE_OCTAVES = 0.12


def comparison_caveats_html(comparisons: Sequence[ComparisonResult], results: Sequence[BenchResult]) -> list[str]:
    """Per comparison that is not valid or whose results carry warnings: its stamp and each of its two
    results' warnings (clocks moved, CV, effective precision), under the verdict they qualify."""
    by_arm = {(r.batch_size, str(r.config.get("arm") or r.precision)): r for r in results}
    out = []
    for c in comparisons:
        stamp = c.validity or {}
        lines = [] if stamp.get("valid", True) else [str(stamp.get("stamp"))]
        for side in ("baseline", "candidate"):
            r = by_arm.get((c.batch_size, c.label(side)))
            lines += [f"{c.label(side)}: {w}" for w in (r.warnings + warning_lines(r.third_party_warnings)
                                                        if r is not None else [])]
        if lines:
            out.append(f'<div class="warn"><b>batch {esc(c.batch_size)}, {esc(c.candidate)} vs '
                       f'{esc(c.baseline)}</b>{bullets(lines)}</div>')
    return out


def result_caveats(r: BenchResult) -> list[str]:
    """What qualifies one result's numbers: its stamp when not valid, then its warnings."""
    stamp = (r.validity or {}).get("stamp")
    return ([stamp] if stamp and not r.validity.get("valid", True) else []) + list(r.warnings) \
        + warning_lines(r.third_party_warnings)  # the library's own, at load and while timing (issue 34)


def speedup_axes(comparisons: Sequence[ComparisonResult]) -> tuple[Any, Any]:
    """The speedup plot's figure and axes: a log y axis (a CI of [0.003, 141] and one of [0.98, 1.02]
    both stay readable, and 2× faster sits as far from 1 as 2× slower), each pair dodged around its
    batch size, and the 1× line labelled."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7, 4.5), layout="constrained")
    by_pair: dict[str, list[ComparisonResult]] = defaultdict(list)
    for c in comparisons:
        by_pair[f"{c.effective_label('candidate')} vs {c.effective_label('baseline')}"].append(c)
    finite = [v for c in comparisons for v in (c.speedup.ci_low, c.speedup.ci_high, c.speedup.estimate)
              if np.isfinite(v) and v > 0]
    floor, ceiling = (min(finite) / 2, max(finite) * 2) if finite else (0.5, 2.0)
    for i, (label, group) in enumerate(by_pair.items()):
        group = sorted(group, key=lambda c: c.batch_size)
        shift = 2.0 ** ((i - (len(by_pair) - 1) / 2) * DODGE_OCTAVES)
        b = [c.batch_size * shift for c in group]
        est = np.clip([c.speedup.estimate for c in group], floor, ceiling)
        low = np.clip([c.speedup.ci_low for c in group], floor, ceiling)
        high = np.clip([c.speedup.ci_high for c in group], floor, ceiling)
        ax.errorbar(b, est, yerr=[np.maximum(est - low, 0), np.maximum(high - est, 0)], marker="o", capsize=4,
                    linestyle="none", label=label)
    ax.axhline(1.0, color="grey", linestyle="--", linewidth=1, label="1× (no change)")
    ax.set_yscale("log")
    batches = sorted({c.batch_size for c in comparisons})
    ax.set_xscale("log", base=2)
    ax.set_xticks(batches, [str(b) for b in batches])
    if len(batches) == 1:
        ax.set_xlim(batches[0] / 2, batches[0] * 2)
    ax.minorticks_off()
    plots.ratio_ticks(ax)  # plain "0.5×, 1×, 2×", enough of them (minorticks_off left one, "10⁰")
    ax.set_xlabel("batch size")
    ax.set_ylabel("speedup (baseline / candidate median, log scale)")
    ax.set_title("Speedup with 95 % CI (above 1×: the candidate is faster)")
    plots.legend_below(fig, ax)
    return fig, ax


def speedup_figure(comparisons: Sequence[ComparisonResult]) -> str:
    """Speedup vs batch size with the bootstrap 95 % CI as error bars (``speedup_axes``), as base64 PNG."""
    fig, _ = speedup_axes(comparisons)
    return png_b64(fig)


def ecdf_figure(results: Sequence[BenchResult], batch_size: int) -> str:
    """Empirical CDFs of latency over the bulk of the data (``trtprof.report.plots``): shifts and tails at a glance."""
    return png_b64(plots.ecdf_figure(results, batch_size, engine_labels(results)))


def histogram_figures(results: Sequence[BenchResult]) -> dict[int, str]:
    """The bench plots' histograms (``trtprof.report.plots``), one per batch size, as base64 PNG."""
    with tempfile.TemporaryDirectory(prefix="trtprof-report-") as tmp:
        paths = plots.histograms(results, Path(tmp))
        out = {}
        for path in paths:
            batch = int(path.stem.replace("hist_batch", ""))
            out[batch] = file_b64(path)
        return out


def latency_figure(results: Sequence[BenchResult]) -> str:
    with tempfile.TemporaryDirectory(prefix="trtprof-report-") as tmp:
        return file_b64(plots.latency_vs_batch(results, Path(tmp)))


# ---------------------------------------------------------------------------------------------
# Text
# ---------------------------------------------------------------------------------------------


def median_ms(c: ComparisonResult, side: str) -> float | None:
    lat = c.latency.get(side)
    return lat.median_ms if lat is not None else None


def verdict_rows(comparisons: Sequence[ComparisonResult]) -> list[list[str]]:
    """One row per comparison: the speed columns then the accuracy columns (``VERDICT_HEADERS``)."""
    return [speed_row(c) + accuracy_row(c)[2:] for c in comparisons]


def speed_row(c: ComparisonResult) -> list[str]:
    """The speed half of a comparison's row (``SPEED_HEADERS``)."""
    s, shown = c.speedup, c.shown()
    return [str(c.batch_size), f"{c.effective_label('candidate')} vs {c.effective_label('baseline')}",
            f"{s.estimate:.3f}× [{s.ci_low:.3f}, {s.ci_high:.3f}]", shown.page_words if shown.plain else Toned(shown.page_words, shown.tone),
            f"{c.loads} × {'?' if c.rounds is None else c.rounds}",
            fmt(median_ms(c, "baseline")), fmt(median_ms(c, "candidate"))]


def accuracy_row(c: ComparisonResult) -> list[str]:
    """The accuracy half of a comparison's row, led by its batch and comparison (``ACCURACY_HEADERS``)."""
    acc, nonfinite = c.accuracy or {}, c.nonfinite
    return [str(c.batch_size), f"{c.effective_label('candidate')} vs {c.effective_label('baseline')}",
            accuracy_cell(acc), fmt(acc.get("cosine"), ".6f"),
            fmt(acc.get("top1"), ".2%") if acc.get("top1") is not None else "–",
            fmt(acc.get("max_err_scaled")),
            (f"{nonfinite} ⚠" if nonfinite else str(nonfinite if nonfinite is not None else "–")),
            _predicted_cell(acc)]


def accuracy_cell(acc: Mapping[str, Any]) -> str:
    """The accuracy verdict and the inputs it was measured on ("OK (random inputs)")."""
    v = acc.get("verdict") or {}
    if not v:
        return "–"
    return f"{v.get('label', v.get('verdict'))} ({acc.get('inputs', 'random inputs')})"


def _predicted_cell(acc: Mapping[str, Any]) -> str:
    """Predicted FP16 overflow/underflow (range analysis of the FP32 model): counts, or –."""
    predicted = acc.get("predicted")
    if not predicted or predicted.get("skipped"):
        return "–"
    findings = predicted.get("findings", [])
    open_ = [f for f in findings if not f.get("covered")]
    over = sum(f.get("kind") == "overflow" for f in open_)
    under = sum(f.get("kind") == "underflow" for f in open_)
    kept = f", {len(findings) - len(open_)} kept FP32" if len(open_) < len(findings) else ""
    if not over and not under:
        return "none" + kept
    return (f"{over} overflow ⚠, {under} underflow" if over else f"{under} underflow") + kept


def accuracy_notes(comparison: ComparisonResult) -> list[str]:
    """The verdict, the metrics (scale-aware first, on which inputs), the caveat when the candidate
    did not compute in FP16, and the FP16 range analysis' prediction (``trtprof.convert.fp16range``), one
    line each."""
    acc = comparison.accuracy or {}
    if not acc:
        return []
    v = acc.get("verdict") or {}
    lines = [f"verdict: {v.get('label')} against {v.get('budget')}: {v.get('reason')}"] if v else []
    lines.append(f"observed: {summary_line(acc)}")
    if acc.get("caveat"):
        lines.append(f"caveat: {acc['caveat']}")
    lines += [f"predicted: {line}" for line in predicted_lines(acc.get("predicted"))]
    return lines


def accuracy_legend(comparisons: Sequence[ComparisonResult]) -> list[str]:
    """One line per accuracy metric, from the JSON's own field docs (what each number means)."""
    docs = next(((c.accuracy or {}).get("field_docs") for c in comparisons if (c.accuracy or {}).get("field_docs")),
                None)
    return [f"{name}: {doc}" for name, doc in (docs or {}).items()]


# The page shows these as two tables (speed, then accuracy, each led by batch and comparison) so that
# neither is wider than a 1280 px window (issue 34); the Markdown summary keeps the one wide row.
SPEED_HEADERS = ("batch", "comparison", "speedup [95% CI]", "verdict", "loads × rounds", "baseline median ms",
                 "candidate median ms")
ACCURACY_HEADERS = ("batch", "comparison", "accuracy (inputs)", "cosine", "top-1", "max err / max abs ref",
                    "non-finite", "predicted FP16")
VERDICT_HEADERS = SPEED_HEADERS + ACCURACY_HEADERS[2:]


def markdown_summary(data: Mapping[str, Any]) -> str:
    """The verdict table and the diagnosis lines, as Markdown (printed by ``trtprof report``)."""
    backend = data.get("backend") or ", ".join(dict.fromkeys(
        p.get("backend", "") for sweep in data.get("serving") or [] for p in sweep.get("points", [])))
    lines = [f"# trtprof: {data.get('model', '')}" + (f" [{backend}]" if backend else ""), ""]
    stamp = page_validity(data)
    if stamp is not None:  # first: VALID or NOT VALID and why
        lines += [f"**{stamp.stamp}**", *[f"- to fix [{r.code}]: {r.advice}" for r in stamp.reasons], ""]
    if data["kind"] == "compare":
        lines += ["| " + " | ".join(VERDICT_HEADERS) + " |", "|" + "---|" * len(VERDICT_HEADERS)]
        comparisons: list[ComparisonResult] = data["parsed_comparisons"]
        lines += ["| " + " | ".join(row) + " |" for row in verdict_rows(comparisons)]
        for w in data.get("warnings", []):
            lines += ["", f"**WARNING:** {w}"]
        for c in comparisons:
            if c.verdict_note:
                lines += ["", f"**Batch {c.batch_size}, {c.candidate} vs {c.baseline}: {c.shown().page_words}** — "
                              f"{c.verdict_note}"]
            if c.diagnosis:
                lines += ["", f"**Batch {c.batch_size}, {c.candidate} vs {c.baseline}: why**", ""]
                lines += [f"- `{f.rule}`: {f.message}" for f in c.diagnosis]
        for c in comparisons:
            notes = accuracy_notes(c)
            if notes:
                lines += ["", f"**Batch {c.batch_size}, {c.candidate} vs {c.baseline}: accuracy, "
                              "predicted vs observed**", ""]
                lines += [f"- {line}" for line in notes]
        legend = accuracy_legend(comparisons)
        if legend:
            lines += ["", "**Accuracy metrics**", ""] + [f"- {line}" for line in legend]
    elif data["parsed_results"] or not data.get("serving"):
        lines += ["| engine | batch | median ms | p99 ms | n |", "|---|---|---|---|---|"]
        for r, label in zip(data["parsed_results"], engine_labels(data["parsed_results"])):
            lines.append(f"| {label} | {r.batch_size} | {fmt_ms(r.latency.p50)} | {fmt_ms(r.latency.p99)} | "
                         f"{r.latency.n} |")
    if data["kind"] != "compare":
        from .serving_page import sweep_summary

        for sweep in data.get("serving") or []:
            lines += sweep_summary(sweep)
    return "\n".join(lines) + "\n"


def _shape_captions(data: Mapping[str, Any]) -> dict[int, str]:
    """Per batch size: what the latency distributions look like (modes, heavy tails, mean vs median)."""
    out: dict[int, list[str]] = defaultdict(list)
    for c in data.get("parsed_comparisons", []) if data.get("kind") == "compare" else []:
        for side in ("baseline", "candidate"):
            shape = c.shape.get(side) or {}
            name = c.label(side)
            if shape.get("multimodal"):
                modes = ", ".join(f"{m:.4g}" for m in shape.get("mode_ms", []))
                out[c.batch_size].append(f"{name}: {shape['modes']} modes ({modes} ms) — the median sits in one")
            if shape.get("heavy_tail"):
                ratio = shape.get("p99_over_median")
                out[c.batch_size].append(f"{name}: heavy tail" + (f" (p99 = {times(ratio)} the median)" if ratio else ""))
        mean, median = c.speedup.mean_ratio, c.speedup.median_ratio
        if mean and median and abs(mean / median - 1) > 0.01:
            out[c.batch_size].append(f"{c.candidate} vs {c.baseline}: median ratio {median:.3f}×, "
                                     f"mean ratio {mean:.3f}×")
    return {b: "; ".join(dict.fromkeys(v)) for b, v in out.items()}


# Where the method is written out in plain words (docs/method.md); the page is self-contained and
# gets mailed, so the link names the file in trtprof's source as well.
METHOD_DOC = "docs/method.md"


def method_paragraph(settings: Mapping[str, Any]) -> str:
    """Two plain sentences on how the speedup and the verdict were obtained, and where the details are."""
    confidence = fmt(settings.get("confidence", 0.95), ".0%")
    margin = fmt(settings.get("equivalence_margin", 0.01), ".0%")
    if str(settings.get("source", "")).startswith("trtexec"):
        return ("<p>Imported trtexec runs, <b>one process and one engine load each, not interleaved</b>: each run's "
                "iterations were cut into consecutive blocks and block i of one run paired with block i of the other. "
                f"The {confidence} interval covers the noise within the two runs only, <b>not drift between them or "
                "process-to-process variance</b>; there is no accuracy (trtexec's exports hold no outputs). The verdict "
                f"is <i>faster</i> or <i>slower</i> only when the whole interval lies beyond ±{margin}, <i>equivalent</i> "
                f"when it lies within ±{margin}, and <i>inconclusive</i> otherwise.</p>")
    return ("<p>trtprof ran the two engines in alternating rounds on the same inputs, repeated in several "
            "separate processes, so that clock drift and background load hit both alike; the speedup is how many "
            f"times faster the candidate's typical (median) latency is, with a {confidence} confidence interval "
            "that includes the differences between those processes. The verdict is <i>faster</i> or <i>slower</i> "
            f"only when the whole interval lies beyond ±{margin}, <i>equivalent</i> when it lies within ±{margin}, "
            f"and <i>inconclusive</i> otherwise (details: <a href=\"{METHOD_DOC}\">{METHOD_DOC}</a> in trtprof's "
            "source; the exact method is listed under Environment and settings).</p>")


def environment_sections(data: Mapping[str, Any]) -> list[tuple[str, Any]]:
    """The environment (host, packages, GPUs, backend), the device's peak rates and the measurement
    settings as (section, value) pairs for ``kit.sections_table``: a table one reads, not a JSON dump."""
    env = data.get("environment") or {}
    sections: list[tuple[str, Any]] = [(k, v) for k, v in env.items() if k != "gpus"]
    sections += [(f"GPU {g.get('index', i)}", {k: v for k, v in g.items() if k != "index"})  # index: in the name
                 for i, g in enumerate(env.get("gpus") or []) if isinstance(g, Mapping)]
    if data.get("device_peak"):
        sections.append(("device peak", data["device_peak"]))
    if data.get("settings"):
        sections.append(("settings", data["settings"]))
    return sections


def environment_rows(data: Mapping[str, Any]) -> list[list[str]]:
    """``environment_sections`` as (section, item, value) rows, the section named on its first row."""
    return [[section if i == 0 else "", key, text] for section, value in environment_sections(data)
            for i, (key, text) in enumerate(flat_pairs("", value if isinstance(value, Mapping) else {"value": value}))]


def verdict_table_html(comparisons: Sequence[ComparisonResult]) -> str:
    """The verdict as two tables that each fit a 1280 px window: speed (the verdict) and accuracy, both led
    by the batch and the comparison (left-aligned like the text it is); the interval never breaks."""
    speed = table(SPEED_HEADERS, [speed_row(c) for c in comparisons], verdict_col=3)
    accuracy = ("<h3>Accuracy of the same comparisons</h3>" + table(ACCURACY_HEADERS, [accuracy_row(c) for c in
                                                                                      comparisons])
                if any(c.accuracy or c.nonfinite for c in comparisons) else "")
    return ("<style>.verdict td:nth-child(2),.verdict th:nth-child(2){text-align:left}.speed td:nth-child(3)"
            "{white-space:nowrap}.speed td:nth-child(4),.speed th:nth-child(4),.accuracy td:nth-child(3),"
            ".accuracy th:nth-child(3){text-align:left}</style><div class=\"verdict speed\">"
            + speed + "</div><div class=\"verdict accuracy\">" + accuracy + "</div>")


def environment_html(data: Mapping[str, Any]) -> str:
    """The environment and settings section: ``environment_rows`` as a left-aligned table."""
    return "<h2>Environment and settings</h2>" + sections_table(environment_sections(data))


def render_html(data: Mapping[str, Any]) -> str:
    """The page: what it is (``intro``), the stamp, verdict, warnings, speedup plot, per-batch histograms and
    ECDFs, diagnosis, roofline, environment. Every image is a data: URI; no external resource is referenced."""
    results: list[BenchResult] = data["parsed_results"]
    title = f"trtprof report: {data.get('model', '')}" + (f" [{data['backend']}]" if data.get("backend") else "")
    parts = [f"<h1>{html.escape(title)}</h1>",
             f"<p>created {html.escape(str(data.get('created', '')))}</p>",
             intro_html(data),  # an A/B, a what-if, a fix-fp16: said first, with what was changed or found
             validity_html(page_validity(data))]  # the stamp before any number (trtprof.report.stamp)
    if data["kind"] == "compare":
        parts += compare_parts(data)
    else:
        parts += bench_parts(results)
    parts += distribution_parts(data, results)
    from .serving_page import sections

    parts.extend(sections(data))
    parts.append(environment_html(data))
    return document(title, parts)


def compare_parts(data: Mapping[str, Any]) -> list[str]:
    """A compare page's own sections, from the verdict to the roofline."""
    comparisons: list[ComparisonResult] = data["parsed_comparisons"]
    # the two sentences on how the verdict was reached above the tables they explain (docs/report.md)
    parts = ["<h2>Verdict</h2>" + method_paragraph(data.get("settings", {})) + verdict_table_html(comparisons),
             ratio_note([(f"batch {c.batch_size}, {c.effective_label('candidate')} vs {c.effective_label('baseline')}",
                          c.speedup.estimate, median_ms(c, "baseline"), median_ms(c, "candidate"))
                         for c in comparisons])]
    parts.extend(comparison_caveats_html(comparisons, data["parsed_results"]))  # stamp + warnings beside each
    for c in comparisons:
        if c.verdict_note:
            parts.append(f"<p><b>batch {esc(c.batch_size)}, {esc(c.effective_label('candidate'))} vs "
                         f"{esc(c.baseline)}: {esc(c.shown().page_words)}</b> — {breakable(c.verdict_note)}</p>")
    for w in data.get("warnings", []):
        parts.append(f'<div class="warn"><b>WARNING:</b> {line_html(w)}</div>')
    if comparisons:
        parts.append("<h2>Speedup vs batch size</h2>" + img(speedup_figure(comparisons), "speedup vs batch size"))
    parts.append(diagnosis_html(comparisons))
    parts.append(accuracy_html(comparisons))
    if data.get("layers"):
        parts.append(layers_section(data["layers"]))
    parts.append(compare_section(data))  # compare --timeline ('' without one)
    parts.append(roofline_html(comparisons))
    return [p for p in parts if p]


def diagnosis_html(comparisons: Sequence[ComparisonResult]) -> str:
    """Why: each comparison's findings, under its batch, arms, loads and why it stopped."""
    parts = ["<h2>Why: diagnosis</h2>"]
    for c in comparisons:
        items = "".join(f"<li><b>{esc(f.rule)}</b>: {line_html(f.message)}</li>"
                        for f in c.diagnosis) or "<li>no rule found evidence</li>"
        parts.append(f"<h3>batch {esc(c.batch_size)}: {esc(c.effective_label('candidate'))} vs "
                     f"{esc(c.baseline)} ({esc(plural(c.loads, 'load'))} × "
                     f"{esc(plural(c.rounds or 0, 'round'))}, stopped: {esc(c.stop_reason or '?')})</h3><ul>{items}</ul>")
    return "".join(parts)


def accuracy_html(comparisons: Sequence[ComparisonResult]) -> str:
    """Accuracy, predicted vs observed, per comparison (a keep-list to copy as a command block), and the legend."""
    acc_parts = [f"<h3>batch {esc(c.batch_size)}: {esc(c.effective_label('candidate'))} vs {esc(c.baseline)}</h3>"
                 + bullets(accuracy_notes(c)) for c in comparisons if accuracy_notes(c)]
    if not acc_parts:
        return ""
    legend = bullets(accuracy_legend(comparisons))
    return ("<h2>Accuracy: verdict, predicted vs observed</h2>" + "".join(acc_parts)
            + (f"<h3>What the metrics mean</h3>{legend}" if legend else ""))


def roofline_html(comparisons: Sequence[ComparisonResult]) -> str:
    """The roofline table (FLOPs, bytes, achieved and peak FLOP/s per arm); '' when no arm has one."""
    rows = []
    for c in comparisons:
        for side in ("baseline", "candidate"):
            r = c.roofline.get(side)
            if r:
                rows.append([str(c.batch_size), c.label(side), fmt(r.get("flops")), fmt(r.get("bytes")),
                             fmt(r.get("intensity_flop_per_byte")), fmt(r.get("achieved_flops_per_s")),
                             fmt(r.get("peak_flops_per_s")), fmt(r.get("share_of_peak"), ".1%")
                             if r.get("share_of_peak") is not None else "–"])
    if not rows:
        return ""
    return ("<h2>Roofline</h2><p>FLOPs count Conv, ConvTranspose, MatMul and Gemm (2 per MAC); bytes are "
            "weights plus every activation written once (unfused).</p>"
            + table(("batch", "precision", "FLOPs", "bytes", "FLOP/byte", "achieved FLOP/s", "peak FLOP/s",
                     "share of peak"), rows))


# a caveat's own words (what was measured on this row) end at its first ": " within this many characters;
# what follows (why it matters, what to do) is the same paragraph on every row it qualifies
CAVEAT_HEAD_CHARS = 100


def split_caveat(text: str) -> tuple[str, str]:
    """(the row's own words, the explanation): "latency CV is 18.8% (> 10%)" and "the CPU numbers are noisy
    …: run on a quiet machine …"; ("", text) when the text has no such head."""
    head, sep, rest = text.partition(": ")
    return (head, rest) if sep and rest and len(head) <= CAVEAT_HEAD_CHARS else ("", text)


def caveat_notes(results: Sequence[BenchResult]) -> tuple[list[str], list[str]]:
    """Each result's caveats as its own words with note numbers ("latency CV is 18.8% (> 10%) (note 2)",
    "–" for none) and the distinct notes in order: the paragraph that explains a caveat of six engines is
    written once under the table, not in six cells."""
    notes: dict[str, int] = {}
    cells = []
    for r in results:
        said = []
        for text in dict.fromkeys(result_caveats(r)):
            head, rest = split_caveat(text)
            number = notes.setdefault(rest, len(notes) + 1)
            said.append(f"{head} (note {number})" if head else f"note {number}")
        cells.append("; ".join(said) or "–")
    return cells, list(notes)


def bench_parts(results: Sequence[BenchResult]) -> list[str]:
    """A bench page's results table (each caveat a numbered note below it) and latency vs batch size."""
    parts = []
    cells, notes = caveat_notes(results)
    rows = [[label, str(r.batch_size), fmt_ms(r.latency.p50), fmt_ms(r.latency.p99), str(r.latency.n),
             fmt_rate(r.throughput_per_s), cell] for r, label, cell in zip(results, engine_labels(results), cells)]
    if rows:  # a serving-only file has no bench results: no empty table (its sections follow)
        listed = "".join(f'<li id="note-{i}">{line_html(n)}</li>' for i, n in enumerate(notes, 1))
        parts.append("<h2>Results</h2><style>.bench td:last-child,.bench th:last-child{text-align:left}</style>"
                     '<div class="bench">' + table(("engine", "batch", "median ms", "p99 ms", "n", "samples/s",
                                                     "validity and warnings"), rows) + "</div>"
                     + (f'<h3>Notes</h3><ol class="notes">{listed}</ol>' if notes else ""))
    if len({r.batch_size for r in results}) > 1:
        parts.append("<h2>Latency vs batch size</h2>" + img(latency_figure(results), "latency vs batch"))
    return parts


def distribution_parts(data: Mapping[str, Any], results: Sequence[BenchResult]) -> list[str]:
    """Per batch size: the distributions' shape in words, the histogram and the ECDF."""
    if not results:
        return []
    parts = ["<h2>Latency distributions</h2>"]
    hists = histogram_figures(results)
    by_batch: dict[int, list[BenchResult]] = defaultdict(list)
    for r in results:
        by_batch[r.batch_size].append(r)
    shapes = _shape_captions(data)
    for batch, group in sorted(by_batch.items()):
        parts.append(f"<h3>batch {esc(batch)}</h3>")
        if shapes.get(batch):
            parts.append(f"<p>{breakable(shapes[batch])}</p>")
        if batch in hists:
            parts.append(img(hists[batch], f"histogram batch {batch}"))
        parts.append(img(ecdf_figure(group, batch), f"ECDF batch {batch}"))
    return parts


def write_report(path: Path, out: Path, doc: ResultsFile | None = None) -> tuple[Path, str]:
    """Write the HTML page of a compare or bench file next to nothing else; return (html path, Markdown
    summary). ``doc``: the file already read (``trtprof.cli.pages`` reads it to pick the page)."""
    data = load(path, doc)
    page = render_html(data)
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out, page)
    return out, markdown_summary(data)
