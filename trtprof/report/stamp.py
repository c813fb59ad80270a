"""The validity stamp at the top of a page (``trtprof.system.validity``): VALID, or NOT VALID with
each reason and what to do, before any number it qualifies."""
from __future__ import annotations

import html
from typing import Any, Mapping

from ..system.validity import Validity, merge


def page_validity(data: Mapping[str, Any]) -> Validity | None:
    """Every stamp a result file carries, as one: the file's own (compare, train-compare), else its
    results' and serving sweeps' (bench). None for a file made before stamps existed."""
    found = [Validity.from_json(data.get("validity"))]
    if found[0] is None:
        found = [Validity.from_json(r.get("validity")) for r in data.get("results", []) if isinstance(r, Mapping)]
    serving = data.get("serving")
    sweeps = serving if isinstance(serving, list) else [serving] if isinstance(serving, Mapping) else []
    found += [Validity.from_json(s.get("validity")) for s in sweeps]
    seen = [v for v in found if v is not None]
    return merge(seen) if seen else None


def validity_html(validity: Validity | Mapping[str, Any] | None, what: str = "") -> str:
    """A box: ``VALID`` (plain), or ``NOT VALID`` in the warning style with a list of reasons, each
    followed by its advice. Empty for a file without stamps."""
    v = validity if isinstance(validity, Validity) or validity is None else Validity.from_json(validity)
    if v is None:
        return ""
    prefix = f"{html.escape(what)}: " if what else ""
    if v.valid:
        return f'<p class="valid"><b>{prefix}VALID</b> (checked: {html.escape(", ".join(v.checked))})</p>'
    items = "".join(f"<li>{html.escape(r.text)}. <i>To fix:</i> {html.escape(r.advice)}</li>" for r in v.reasons)
    return f'<div class="warn"><b>{prefix}NOT VALID</b><ul>{items}</ul></div>'
