"""Plain-text tables: columns padded to their widest cell, a dashed rule under the header.

One helper for every table trtprof prints (the CLI's result tables, the layer table): the first
``left`` columns are names, left-aligned; the rest are numbers, right-aligned."""
from __future__ import annotations

from typing import Sequence


def grid(headers: Sequence[object], rows: Sequence[Sequence[object]], *, left: int = 1) -> list[str]:
    """The table's lines: header, rule, one line per row."""
    cells = [[str(h) for h in headers]] + [[str(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(cells[0]))]
    lines = ["  ".join(c.ljust(w) if i < left else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths)))
             for row in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return lines
