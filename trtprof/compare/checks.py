"""A compare file's fields checked for type before any page or summary renders them.

Why: a compare.json may come from anyone (a colleague, a CI artifact, a fuzzer). The page escapes
every value (``kit.esc``), but a ``batch_size`` of ``"<script>"`` or a ``verdict`` of ``null`` is not
a compare result at all: it is refused with one line naming the field (exit 2), not rendered, and not
a traceback in a format string (issue 36).

Run once, when the file is read into its typed value (``report_value.CompareDocument.from_json``; a
bench file's stamps and blocks, and a sweep's counts and entries, in ``results_file.results_value``); here,
below the pages, because that value is made in ``compare``.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

from ..errors import BadInput

TEXT_FIELDS = ("baseline", "candidate", "verdict")  # strings in every comparison
OPTIONAL_TEXT = ("verdict_note", "stop_reason")
SPEEDUP_FIELDS = ("estimate", "ci_low", "ci_high")  # numbers (NaN allowed: an arm that could not be timed)
COUNT_FIELDS = ("loads", "rounds", "min_loads")  # non-negative integers when present


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    """int or float (NaN and ±inf included: compare writes them for an arm it could not time)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _bad(path: Path, where: str, value: Any, what: str) -> BadInput:
    return BadInput(f"{where}: {str(value)[:60]!r} is not {what}", path=path)


def check_comparison(c: Any, where: str, path: Path) -> None:
    if not isinstance(c, Mapping):
        raise _bad(path, where, c, "an object")
    if not _is_int(c.get("batch_size")) or c["batch_size"] < 1:
        raise _bad(path, f"{where}.batch_size", c.get("batch_size"), "an integer >= 1")
    for key in TEXT_FIELDS:
        if not isinstance(c.get(key), str):
            raise _bad(path, f"{where}.{key}", c.get(key), "a string")
    for key in OPTIONAL_TEXT:
        if c.get(key) is not None and not isinstance(c[key], str):
            raise _bad(path, f"{where}.{key}", c[key], "a string")
    for key in COUNT_FIELDS:
        if key in c and (not _is_int(c[key]) or c[key] < 0):
            raise _bad(path, f"{where}.{key}", c[key], "an integer >= 0")
    speedup = c.get("speedup")
    if not isinstance(speedup, Mapping):
        raise _bad(path, f"{where}.speedup", speedup, "an object")
    for key in SPEEDUP_FIELDS:
        if not _is_number(speedup.get(key)):
            raise _bad(path, f"{where}.speedup.{key}", speedup.get(key), "a number")
    for key in ("accuracy", "latency", "roofline", "shape"):
        if c.get(key) is not None and not isinstance(c[key], Mapping):
            raise _bad(path, f"{where}.{key}", c[key], "an object")
    for side in ("baseline", "candidate"):  # the per-arm blocks the page reads keys of
        for key in ("latency", "roofline", "shape"):
            block = (c.get(key) or {}).get(side)
            if block is not None and not isinstance(block, Mapping):
                raise _bad(path, f"{where}.{key}.{side}", block, "an object")
    for key in SPEEDUP_RATIOS:
        if speedup.get(key) is not None and not _is_number(speedup[key]):
            raise _bad(path, f"{where}.speedup.{key}", speedup[key], "a number")
    for side in ("baseline", "candidate"):
        check_shape((c.get("shape") or {}).get(side) or {}, f"{where}.shape.{side}", path)
    if c.get("accuracy"):
        check_accuracy(c["accuracy"], f"{where}.accuracy", path)
    diagnosis = c.get("diagnosis", [])
    if not isinstance(diagnosis, list):
        raise _bad(path, f"{where}.diagnosis", diagnosis, "a list")
    for j, f in enumerate(diagnosis):
        if not (isinstance(f, Mapping) and isinstance(f.get("rule"), str) and isinstance(f.get("message"), str)):
            raise _bad(path, f"{where}.diagnosis[{j}]", f, "a finding with a string rule and message")


SPEEDUP_RATIOS = ("median_ratio", "mean_ratio")  # optional numbers the page divides
SHAPE_NUMBERS = ("p99_over_median", "tail_ratio")  # optional numbers the shape caption formats


def check_shape(shape: Mapping[str, Any], where: str, path: Path) -> None:
    """One arm's latency-distribution shape as the page's caption reads it: a multimodal arm's ``modes`` an
    integer and ``mode_ms`` a list of numbers; the tail ratios numbers (the results fuzz found each as a traceback)."""
    if shape.get("multimodal"):
        if not _is_int(shape.get("modes")):
            raise _bad(path, f"{where}.modes", shape.get("modes"), "an integer")
        modes = shape.get("mode_ms", [])
        if not isinstance(modes, list) or not all(_is_number(m) for m in modes):
            raise _bad(path, f"{where}.mode_ms", modes, "a list of numbers")
    for key in SHAPE_NUMBERS:
        value = shape.get(key)
        if value is not None and not _is_number(value):
            raise _bad(path, f"{where}.{key}", value, "a number")


ACCURACY_OBJECTS = ("verdict", "predicted", "field_docs")  # read with .get by the page
ACCURACY_TEXT = ("caveat", "inputs")
# formatted as numbers by the verdict table and accuracy.summary_line
ACCURACY_NUMBERS = ("cosine", "top1", "top5", "snr_db", "max_err_scaled", "mean_err_scaled", "max_abs_err",
                    "max_rel_err", "mismatch_fraction", "rtol", "atol")
ACCURACY_MAY_BE_NULL = ("top1", "top5", "snr_db")  # what a writer leaves null (no classes; an exact match)


def check_accuracy(acc: Mapping[str, Any], where: str, path: Path) -> None:
    """The accuracy block's parts the page walks into: objects where it reads keys, strings where it
    prints text, the predicted findings a list of objects (issue 36's fuzz test found ``predicted: NaN``)."""
    for key in ACCURACY_OBJECTS:
        if acc.get(key) is not None and not isinstance(acc[key], Mapping):
            raise _bad(path, f"{where}.{key}", acc[key], "an object")
    for key in ACCURACY_TEXT:
        if acc.get(key) is not None and not isinstance(acc[key], str):
            raise _bad(path, f"{where}.{key}", acc[key], "a string")
    for key in ACCURACY_NUMBERS:
        if acc.get(key) is not None and not _is_number(acc[key]):
            raise _bad(path, f"{where}.{key}", acc[key], "a number")
        if key in acc and acc[key] is None and key not in ACCURACY_MAY_BE_NULL:  # formatted whenever present
            raise _bad(path, f"{where}.{key}", None, "a number")
    findings = (acc.get("predicted") or {}).get("findings", [])
    if not isinstance(findings, list) or not all(isinstance(f, Mapping) for f in findings):
        raise _bad(path, f"{where}.predicted.findings", findings, "a list of objects")


REASON_TEXT = ("code", "text", "advice")


def check_validity(v: Any, where: str, path: Path) -> None:
    """A validity stamp (``system.validity``) as the page reads it: an object whose reasons are objects
    with string code/text/advice and whose ``checked`` is a list of strings; absent or null is none."""
    if v is None:
        return
    if not isinstance(v, Mapping):
        raise _bad(path, where, v, "an object")
    reasons, checked = v.get("reasons", []), v.get("checked", [])
    if not isinstance(reasons, list):
        raise _bad(path, f"{where}.reasons", reasons, "a list")
    for j, r in enumerate(reasons):
        if not isinstance(r, Mapping) or not all(isinstance(r.get(k), str) for k in REASON_TEXT):
            raise _bad(path, f"{where}.reasons[{j}]", r, "a reason with string code, text and advice")
    if not isinstance(checked, list) or not all(isinstance(c, str) for c in checked):
        raise _bad(path, f"{where}.checked", checked, "a list of strings")
    if "valid" in v and not isinstance(v["valid"], bool):  # a float stamp was a traceback (issue 45)
        raise _bad(path, f"{where}.valid", v["valid"], "true or false")
    if v.get("stamp") is not None and not isinstance(v["stamp"], str):
        raise _bad(path, f"{where}.stamp", v["stamp"], "a string")


def check_stamps(data: Mapping[str, Any], path: Path) -> None:
    """Every validity stamp a compare or bench file carries (the file's, each comparison's, each result's,
    each serving sweep's), checked before the page draws them."""
    check_validity(data.get("validity"), "validity", path)
    for key in ("comparisons", "results"):
        items = data.get(key)
        for i, item in enumerate(items if isinstance(items, list) else []):  # not a list: refused by its reader
            if isinstance(item, Mapping):
                check_validity(item.get("validity"), f"{key}[{i}].validity", path)
    serving = data.get("serving")
    for i, sweep in enumerate(serving if isinstance(serving, list) else [serving] if serving else []):
        if isinstance(sweep, Mapping):
            check_validity(sweep.get("validity"), f"serving[{i}].validity", path)


# top-level blocks every page walks into as objects (report.compare_page.environment_rows)
PAGE_OBJECTS = ("environment", "device_peak", "settings")


def check_page_objects(data: Mapping[str, Any], path: Path) -> None:
    """The top-level blocks a compare or bench page reads keys of: objects (or null) only."""
    for key in PAGE_OBJECTS:
        if data.get(key) is not None and not isinstance(data[key], Mapping):
            raise _bad(path, key, data[key], "an object")
    if "settings" in data and data["settings"] is None:  # every writer writes an object or no key (issue 45)
        raise _bad(path, "settings", None, "an object")
    gpus = (data.get("environment") or {}).get("gpus")
    if gpus is not None and not isinstance(gpus, list):  # `gpus: -1` was a traceback (issue 45)
        raise _bad(path, "environment.gpus", gpus, "a list")


def check_compare(data: Mapping[str, Any], path: Path) -> None:
    """Refuse (BadInput naming the field) a compare file whose rendered fields have the wrong type."""
    comparisons = data.get("comparisons")
    if not isinstance(comparisons, list):
        raise _bad(path, "comparisons", comparisons, "a list")
    for i, c in enumerate(comparisons):
        check_comparison(c, f"comparisons[{i}]", path)
    warnings = data.get("warnings", [])
    if not isinstance(warnings, list) or not all(isinstance(w, str) for w in warnings):
        raise _bad(path, "warnings", warnings, "a list of strings")
    for key in ("model", "backend", "created"):
        if data.get(key) is not None and not isinstance(data[key], str):
            raise _bad(path, key, data[key], "a string")
    if data.get("settings") is not None and not isinstance(data["settings"], Mapping):
        raise _bad(path, "settings", data["settings"], "an object")
    check_timeline(data.get("timeline"), path)


def check_timeline(block: Any, path: Path) -> None:
    """``compare --timeline``'s block: a batch size, timelines that parse, findings with messages."""
    if block is None:
        return
    if not isinstance(block, Mapping) or not _is_int(block.get("batch_size")) \
            or not isinstance(block.get("timelines"), list) or not isinstance(block.get("findings", []), list):
        raise _bad(path, "timeline", block, "a timeline block (batch_size, timelines, findings)")
    for key in ("chosen_by", "recorded_after"):
        if block.get(key) is not None and not isinstance(block[key], str):
            raise _bad(path, f"timeline.{key}", block[key], "a string")
    from ..layers.timeline import Timeline

    for i, t in enumerate(block["timelines"]):
        try:
            Timeline.from_json(t)
        except (KeyError, TypeError, ValueError, AttributeError) as err:
            raise BadInput(f"timeline.timelines[{i}]: not a timeline ({type(err).__name__}: {err})", path=path) from err


SWEEP_COUNTS = ("cells_ok", "cells_failed", "cells_missing", "cells_total")  # numbers on the sweep's page


def check_sweep(data: Mapping[str, Any], path: Path) -> None:
    """A sweep's merged file (``sweep.matrix`` renders it): its counts are integers >= 0, checked as numbers
    and not rendered as given (issue 36), and its entries a list of objects."""
    for key in SWEEP_COUNTS:
        value = data.get(key)
        if value is not None and (not _is_int(value) or value < 0):
            raise _bad(path, key, value, "an integer >= 0")
    sweep_entries(data, path)


def sweep_entries(merged: Mapping[str, Any], path: Path) -> list[dict[str, Any]]:
    """The sweep's entries, each an object (BadInput naming the first that is not)."""
    items = merged.get("entries", [])
    if not isinstance(items, list):
        raise BadInput(f"entries: expected a list, not {type(items).__name__}", path=path)
    for i, e in enumerate(items):
        if not isinstance(e, dict):
            raise BadInput(f"entries[{i}]: expected an object, not {type(e).__name__}", path=path)
    return items
