"""The page kit: HTML document shell, CSS, tables, embedded figures and number formatting.

Why a room of its own: the compare/bench page (``report``), the train-compare page (``train.page``)
and the sweep matrix (``sweep.matrix``) all need the same few pieces. While they lived in
``report.py`` as private helpers, the other pages borrowed them through imports inside functions
and the modules ended up importing each other. Everything here is public and imports nothing of
trtprof but the generator tag (``util.outputs``), so any page can use it; matplotlib is imported only when a figure is drawn.

Pages are self-contained: every figure is a base64 ``data:`` URI, nothing is loaded from beside the
file or from the web (a report gets mailed, attached to issues and archived with the engine).
"""
from __future__ import annotations

import base64
import html
import io
import math
import re
from pathlib import Path
from typing import Any, Mapping, Sequence

from ..util.console import unescape_figure_text
from ..util.outputs import GENERATOR_META

CSS = """
body{font-family:system-ui,sans-serif;margin:2em;max-width:1100px;color:#222}
table{border-collapse:collapse;margin:1em 0;font-size:.9em}th,td{border:1px solid #ccc;padding:.3em .6em;text-align:right}
th{background:#f3f3f3}td:first-child,th:first-child{text-align:left}.v-faster{background:#d8f5d0}.v-slower{background:#f8d4d4}
.v-no{background:#eee}.v-equivalent{background:#e3ecf7}.v-inconclusive{background:#eee}.v-provisional{background:#fff0c2}
.v-broken{background:#f1d3f4;font-weight:bold}.warn{background:#fff0c2;border-left:5px solid #e0a000;padding:.5em 1em;margin:.5em 0}
img{max-width:100%;display:block;margin:.5em 0}pre{background:#f7f7f7;padding:1em;overflow:auto;font-size:.8em}
li{margin:.3em 0}p,li,td,th,.warn{overflow-wrap:break-word}
pre.cmd{white-space:pre;overflow-x:auto;max-width:100%;margin:.3em 0;padding:.5em 1em}
.intro{background:#eef4fb;border-left:5px solid #4a7fc1;padding:.5em 1em;margin:.5em 0}
.v-difference{background:#eee}.valid{margin:.5em 0}
"""


def fmt(value: Any, spec: str = ".3g") -> str:
    """``value`` formatted with ``spec``; "–" for None, ``str`` for non-finite or unformattable values."""
    if value is None:
        return "–"
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    try:
        return format(value, spec)
    except (TypeError, ValueError):
        return str(value)


def fixed_column(values: Sequence[Any], significant: int = 4, most: int = 6) -> list[str]:
    """A table column of numbers with one number of decimals for all (right-aligned, their points line up:
    "39.95", "131.00", "251.30", not "39.95", "131", "251.3"), enough for ``significant`` digits of the
    smallest, at most ``most``; thousands separated; "–" for None, non-finite values as ``fmt`` says."""
    finite = [abs(float(v)) for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)
              and math.isfinite(v) and v != 0]
    decimals = 0 if not finite else min(most, max(0, significant - 1 - math.floor(math.log10(min(finite)))))
    return [fmt(v, f",.{decimals}f") if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
            else fmt(v) for v in values]


# the words a verdict cell may start with, each a CSS class (v-<word>); anything else gets no class
VERDICT_WORDS = frozenset({"faster", "slower", "equivalent", "inconclusive", "difference", "no"})


def esc(value: Any) -> str:
    """Any value as page text: ``str`` of it, HTML-escaped (quotes too, so it is safe in an attribute).
    The one escaping helper of every page: a result file may come from anyone (issue 36)."""
    return html.escape("–" if value is None else str(value), quote=True)


# tones a cell may carry besides its first word (compare.verdict_words: a provisional verdict, one whose
# accuracy is BROKEN): never the verdict's own colour
TONES = VERDICT_WORDS | {"provisional", "broken"}


class Toned(str):
    """Cell text that names its colour (``tone``, one of ``TONES``) instead of leaving it to its first word:
    "faster (provisional: 2 of 6 loads)" is amber, not green."""

    tone: str = ""

    def __new__(cls, text: str, tone: str) -> "Toned":
        cell = super().__new__(cls, text)
        cell.tone = tone
        return cell


def verdict_class(cell: Any) -> str:
    """`` class="v-<tone>"`` for a ``Toned`` cell, else ``v-<first word>`` for a known verdict word, else '':
    data never becomes markup."""
    tone = getattr(cell, "tone", "")
    if tone:
        return f' class="v-{tone}"' if tone in TONES else ""
    words = str(cell).split()
    return f' class="v-{words[0]}"' if words and words[0] in VERDICT_WORDS else ""


# A token longer than this (a keep-list of node names joined by commas, 1,137 characters on a real model; a
# CUDA kernel's C++ name) may break after each comma, slash, semicolon or "::" and before a "(" or "<"; a
# piece of it still longer (a cuDNN kernel's 151-character name) also after its underscores; a shorter token
# never breaks, so "[0.93, 1.07]" and "a,b" stay whole
LONG_TOKEN = 40
BREAK_AT = re.compile(r"(?<=[,/;])|(?<=::)|(?=[(<])")
BREAK_LONG_PIECE_AT = re.compile(r"(?<=_)")


def breakable(value: Any) -> str:
    """``esc(value)`` with a line-break opportunity (``<wbr>``) at each ``BREAK_AT`` inside a token longer than
    ``LONG_TOKEN`` characters: a page never scrolls sideways for a list of names, and a name never breaks
    inside a word ("layer-precisions", "fp32")."""
    out = []
    for token in re.split(r"(\s+)", "–" if value is None else str(value)):
        if len(token) > LONG_TOKEN:
            pieces = [p for part in BREAK_AT.split(token) if part
                      for p in (BREAK_LONG_PIECE_AT.split(part) if len(part) > LONG_TOKEN else [part]) if p]
            out.append("<wbr>".join(esc(piece) for piece in pieces))
        else:
            out.append(esc(token))
    return "".join(out)


def command(text: Any) -> str:
    """A command to copy (``trtprof build m.onnx --fp16 --layer-precisions …``) as a ``<pre class="cmd">``
    block that scrolls on its own: the page keeps its width, the command keeps every character on one line."""
    return f'<pre class="cmd"><code>{esc(text)}</code></pre>'


# where a line's copyable part starts: a trtprof command, or a build option given on its own
COMMAND_START = re.compile(r"(trtprof (?:build|compare|bench|profile) |--layer-precisions )")


def line_html(line: Any) -> str:
    """One line of prose as HTML: its copyable tail (from ``COMMAND_START``, when the tail is longer than
    ``LONG_TOKEN``) as a ``command`` block, the prose before it breakable."""
    text = str(line)
    found = COMMAND_START.search(text)
    if found is None or len(text) - found.start() <= LONG_TOKEN:
        return breakable(text)
    return breakable(text[:found.start()].rstrip()) + command(text[found.start():])


def bullets(lines: Sequence[Any]) -> str:
    """``<ul>`` of ``line_html`` items; '' for no lines."""
    return f"<ul>{''.join(f'<li>{line_html(line)}</li>' for line in lines)}</ul>" if lines else ""


def table(headers: Sequence[str], rows: Sequence[Sequence[str]], verdict_col: int | None = None,
          links: Mapping[tuple[int, int], str] | None = None) -> str:
    """An HTML table, every cell escaped (``breakable``); the cells of ``verdict_col`` get the class
    ``v-<first word>`` so the CSS colours faster/slower/equivalent/inconclusive, a ``Toned`` cell its tone in
    any column; ``links``: {(row, column): href} makes that cell a link."""
    head = "".join(f"<th>{esc(h)}</th>" for h in headers)
    body = []
    for i, row in enumerate(rows):
        cells = []
        for j, cell in enumerate(row):
            cls = verdict_class(cell) if j == verdict_col or isinstance(cell, Toned) else ""
            text = breakable(cell)
            if links and (i, j) in links:
                text = f'<a href="{esc(links[(i, j)])}">{text}</a>'
            cells.append(f"<td{cls}>{text}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def flat_pairs(prefix: str, value: Any) -> list[tuple[str, str]]:
    """(dotted key, text) pairs of a nested JSON value, lists of scalars joined with commas: settings, an
    environment or an executor as table rows one reads, not a JSON dump."""
    if isinstance(value, Mapping):
        return [pair for k, v in value.items() for pair in flat_pairs(f"{prefix}.{k}" if prefix else str(k), v)]
    if isinstance(value, (list, tuple)) and not any(isinstance(v, (Mapping, list, tuple)) for v in value):
        return [(prefix, ", ".join(fmt(v, ".4g") for v in value) or "–")]
    if isinstance(value, (list, tuple)):
        return [pair for i, v in enumerate(value) for pair in flat_pairs(f"{prefix}[{i}]", v)]
    return [(prefix, fmt(value, ".4g") if isinstance(value, float) else str(value))]


def sections_table(sections: Sequence[tuple[str, Any]]) -> str:
    """(section, nested value) pairs as one left-aligned (section, item, value) table, each section named once."""
    rows = []
    for section, value in sections:
        for i, (key, text) in enumerate(flat_pairs("", value if isinstance(value, Mapping) else {"value": value})):
            rows.append([section if i == 0 else "", key, text])
    return ('<style>.env td,.env th{text-align:left}</style><div class="env">'
            + table(("section", "item", "value"), rows) + "</div>")


def img(b64: str, alt: str) -> str:
    """An ``<img>`` of a base64 PNG, embedded as a data: URI."""
    return f'<img alt="{html.escape(alt)}" src="data:image/png;base64,{b64}">'


def document(title: str, parts: Sequence[str], css: str = CSS) -> str:
    """The whole page: doctype, title (escaped), the style sheet and the body's parts (HTML, as given)."""
    return (f"<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">{GENERATOR_META}<title>{html.escape(title)}</title>"
            f"<style>{css}</style></head><body>{''.join(parts)}</body></html>\n")


def pyplot() -> Any:
    """matplotlib's pyplot on the Agg backend (no display needed); imported on first use, not with trtprof."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def png_b64(fig: Any) -> str:
    """A matplotlib figure as base64 PNG (the figure is closed)."""
    buf = io.BytesIO()
    unescape_figure_text(fig)  # a non-ASCII model name under LC_ALL=C
    fig.savefig(buf, format="png", dpi=100)
    pyplot().close(fig)
    return base64.b64encode(buf.getvalue()).decode("ascii")


def file_b64(path: Path) -> str:
    """A file's bytes (a PNG that ``trtprof.report.plots`` wrote) as base64."""
    return base64.b64encode(Path(path).read_bytes()).decode("ascii")
