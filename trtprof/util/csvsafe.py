"""CSV cells that a spreadsheet would run as a formula are written as text.

Why: a model named ``=cmd|' -C calc'!A0.onnx`` put a cell starting with ``=`` into ``bench --csv`` and
``sweep.csv``; Excel and LibreOffice evaluate such a cell when the file is opened (CSV injection).
OWASP's advice, followed here: a cell that begins with ``= + - @``, a tab or a carriage return is
prefixed with ``'``, which spreadsheets show as text. Numbers are never touched (a negative
number is a number, written by trtprof, not text a user chose).
"""
from __future__ import annotations

from typing import Any

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def csv_cell(value: Any) -> Any:
    """``value`` for a CSV cell: a string that would start a formula gets a leading ``'``."""
    if isinstance(value, str) and value.startswith(FORMULA_STARTS):
        return "'" + value
    return value
