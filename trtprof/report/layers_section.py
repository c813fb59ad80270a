"""The per-layer section of the HTML report: top layers per batch size, FP16-slower rows highlighted.

Its own module so the compare page stays one page builder and this section one idea; in ``report/`` (it was
``layers/html.py``) so that every page is drawn with the page kit (issue 41 item 5): ``layers/`` owns the
table's data (``layers.table``), the report draws it.
"""
from __future__ import annotations

import html
from typing import Any, Mapping

from ..util.wording import plural
from .kit import breakable, esc
from ..layers.table import SEPARATE_RUN_NOTE, SLOWER_MARGIN, fmt_layer_ms, rows_by_time, same_fp32_kernels

TOP_ROWS = 15
# names (layer, op, kind) left-aligned like text; the numbers stay right-aligned; a layer's name (a long path
# without spaces, "/layer1/layer1.0/conv1/Conv") may wrap anywhere so the table fits a 1280 px window (issue 34)
CSS = (".l-slower{background:#f8d4d4}.l-cast{background:#fff0c2}"
       ".layers td:nth-child(-n+3),.layers th:nth-child(-n+3){text-align:left}"
       ".layers td:first-child{overflow-wrap:anywhere;min-width:8em}")


def layers_section(layers: Mapping[str, Mapping[str, Any]], top: int = TOP_ROWS) -> str:
    """HTML for ``compare --layers`` tables ({batch: table JSON}); '' when there are none."""
    if not layers:
        return ""
    parts = [f"<style>{CSS}</style><h2>Layers: where the time goes</h2>",
             f"<p>{html.escape(SEPARATE_RUN_NOTE)}. Rows by largest time; red: slower than the baseline by more "
             f"than {SLOWER_MARGIN:.0%} (never a layer that ran the same FP32 kernels in both); yellow: casts and reformats. TC: kernels using tensor cores / kernels "
             "whose name tells.</p>"]
    for batch, table in sorted(layers.items(), key=lambda kv: int(kv[0])):
        precisions = list(table["precisions"])
        base = precisions[0]
        rows = rows_by_time(table["rows"])
        head = ["layer", "op", "kind"] + [h for p in precisions for h in (f"{p} ms", f"{p} share")] \
            + [f"{p}/{base}" for p in precisions[1:]] + [f"TC {p}" for p in precisions]
        body = []
        for r in rows[:top]:
            ratios = [r["ratio_vs_baseline"].get(p) for p in precisions[1:]]
            slower = any(x is not None and x > 1 + SLOWER_MARGIN and not same_fp32_kernels(r, p, base)
                         for p, x in zip(precisions[1:], ratios))
            cls = "l-slower" if slower else "l-cast" if r["kind"] in ("cast", "reformat") else ""
            cells = [r["name"], r["op_type"], r["kind"]]
            for p in precisions:
                share = r["share"].get(p)
                cells += [fmt_layer_ms(r["time_ms"].get(p), missing="–"), "–" if share is None else f"{share:.1%}"]
            cells += ["–" if x is None else f"{x:.2f}" for x in ratios]
            for p in precisions:
                ks = [k for k in r["kernels"].get(p, []) if k.get("tensor_core") is not None]
                cells.append(f"{sum(1 for k in ks if k['tensor_core'])}/{len(ks)}" if ks else "–")
            body.append(f'<tr class="{cls}">' + "".join(f"<td>{breakable(c)}</td>" for c in cells) + "</tr>")
        totals = ", ".join(f"{html.escape(p)} {fmt_layer_ms(v, missing='–')} ms"
                           for p, v in table.get("totals_ms", {}).items())
        parts.append(f"<h3>batch {html.escape(str(batch))} (sum of layer medians: {totals})</h3>"
                     "<table class=\"layers\"><thead><tr>" + "".join(f"<th>{esc(h)}</th>" for h in head)
                     + "</tr></thead><tbody>" + "".join(body) + "</tbody></table>")
        if len(rows) > top:
            parts.append(f"<p>… and {plural(len(rows) - top, 'more layer')} (JSON has all).</p>")
    return "".join(parts)
