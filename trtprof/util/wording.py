"""Words for counts: "1 layer", "3 layers" (never "1 layers" or "layer(s)"), and ratios a reader
takes in at a glance ("60×", "1.35×")."""
from __future__ import annotations


def plural(count: int, noun: str, plural_form: str | None = None) -> str:
    """``count`` and ``noun``, the noun in the plural unless the count is exactly 1."""
    return f"{count} {noun if count == 1 else (plural_form or noun + 's')}"


def times(ratio: float) -> str:
    """A ratio as "60×" (10 and above: whole numbers) or "1.35×" (three significant digits)."""
    return f"{ratio:.0f}×" if ratio >= 10 else f"{ratio:.3g}×"
