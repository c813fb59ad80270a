"""Names for engines in tables, CSV and legends that tell two engines apart.

"convnet fp16 [onnxruntime]" is enough until two engines of the same model, precision and backend
meet in one results file (built for different batch profiles or options); then the label adds what
differs — the batch profile, the options — and, if nothing visible differs, the cache key.
"""
from __future__ import annotations

import math
from collections import defaultdict
from typing import Any, Mapping, Protocol, Sequence


class Labelled(Protocol):
    """What a label reads of a result (``results.BenchResult`` has it). A protocol, not an import:
    results.py imports this module for its CSV, and labels need nothing else of it."""

    @property
    def model(self) -> str: ...
    @property
    def precision(self) -> str: ...
    @property
    def backend(self) -> str: ...
    @property
    def engine(self) -> Mapping[str, Any]: ...


def fmt_ms(value: float, significant: int = 4) -> str:
    """Fixed-point with ``significant`` significant digits: 0.01234, 1.234, 12.35, 12345."""
    if not math.isfinite(value):
        return str(value)
    if value == 0:
        return "0"
    decimals = max(0, significant - 1 - int(math.floor(math.log10(abs(value)))))
    return f"{value:.{decimals}f}"


def fmt_rate(value: float | None) -> str:
    """A rate (samples/s, requests/s) for people: thousands separators from 100 up (253,900), four
    significant digits below (12.35, 0.4567), never scientific notation ("2.539e+05" is what ``:,.4g``
    prints for 253,900)."""
    if value is None or not math.isfinite(value):
        return "-" if value is None else str(value)
    if abs(value) >= 100:
        return f"{value:,.0f}"
    if value == 0:
        return "0"
    return fmt_ms(value) if abs(value) >= 1e-4 else f"{value:.6f}"


def precision_text(r: "Labelled") -> str:
    eff = r.engine.get("effective_precision", r.precision)
    return r.precision if eff == r.precision else f"{r.precision} ({eff})"


def base_label(r: "Labelled") -> str:
    return f"{r.model} {precision_text(r)} [{r.backend}]"


def _details(r: "Labelled") -> dict[str, str]:
    spec: dict[str, Any] = r.engine.get("spec") or {}
    out: dict[str, str] = {}
    sizes = spec.get("batch_sizes") or []
    if sizes:
        out["profile"] = f"built b{min(sizes)}" + (f"–{max(sizes)}" if max(sizes) != min(sizes) else "")
    for k, v in sorted((spec.get("options") or {}).items()):
        out[f"opt:{k}"] = f"{k}={v}"
    for k, v in sorted((spec.get("shapes") or {}).items()):
        out[f"shape:{k}"] = f"{k}:{'x'.join(str(d) for d in v)}"
    return out


def _short_option(key: str, value: Any) -> str:
    """One option as a label part: the calibration by its data's hash or seed ("calib 3f2a…",
    "calib seed 1"), others as ``k=v``."""
    text = str(value)
    if key == "calibration_data":
        if "sha256 " in text:
            return f"calib {text.split('sha256 ', 1)[1][:4]}…"
        if "seed " in text:
            return f"calib seed {text.rsplit('seed ', 1)[1]}"
    return f"{key}={text if len(text) <= 24 else text[:23] + '…'}"


def variant_label(precision: str, options: Mapping[str, Any], first: Mapping[str, Any], key: str = "") -> str:
    """The label of a second engine of ``precision`` beside one with options ``first``: what differs
    (``int8 (calib 3f2a…)``, ``fp16 (keep_fp32=…)``), not a number; the cache key when nothing does."""
    keys = sorted(k for k in set(options) | set(first) if options.get(k) != first.get(k))
    keys.sort(key=lambda k: (k != "calibration_data", k))  # the calibration source first: it names the data
    if keys:
        return f"{precision} ({', '.join(_short_option(k, options.get(k)) for k in keys[:2])})"
    return f"{precision} (engine {key[:8]})" if key else f"{precision} (another engine)"


def engine_labels(results: Sequence["Labelled"]) -> list[str]:
    """One label per result; results of one engine share a label, different engines never do."""
    by_base: dict[str, dict[str, "Labelled"]] = defaultdict(dict)
    for r in results:
        by_base[base_label(r)].setdefault(str(r.engine.get("key", id(r))), r)
    names: dict[tuple[str, str], str] = {}
    for base, engines in by_base.items():
        if len(engines) == 1:
            (key,) = engines
            names[(base, key)] = base
            continue
        details = {key: _details(r) for key, r in engines.items()}
        keys = sorted({k for d in details.values() for k in d})
        differing = [k for k in keys if len({d.get(k, "") for d in details.values()}) > 1]
        for key, d in details.items():
            extra = ", ".join(d[k] for k in differing if k in d)
            names[(base, key)] = f"{base} {{{extra}}}" if extra else base
        labels = [names[(base, key)] for key in engines]
        if len(set(labels)) < len(labels):  # nothing visible differs: the key does
            for key in engines:
                names[(base, key)] = f"{names[(base, key)]} #{key[:8]}"
    return [names[(base_label(r), str(r.engine.get("key", id(r))))] for r in results]
