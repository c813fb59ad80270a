"""What a compare page is, said first: an A/B of two models or backends, a what-if (what was changed in the
copy and how it was checked), or fix-fp16 (the keep-list found and the command that reuses it).

The compare JSON of ``compare A B``/``--backends`` and ``--what-if`` carries an ``ab`` block
(``compare.ab.AbOutcome``), that of ``fix-fp16`` a ``fix_fp16`` block (``compare.fix_fp16.Search``); a plain
compare has neither and gets no intro. Every value is read defensively (a result file may come from
anyone): what is not the expected type is left out, never rendered as markup.
"""
from __future__ import annotations

import shlex
from typing import Any, Mapping, Sequence

from .kit import breakable, bullets, command, esc, fmt


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _items(value: Any) -> list[Any]:
    return list(value) if isinstance(value, list) else []


def arm_line(arm: Mapping[str, Any]) -> str:
    """One arm of an A/B in words: "b: b.onnx on onnxruntime at fp32 (options: memory_format=channels_last)"."""
    options = _mapping(arm.get("options"))
    said = f" (options: {', '.join(f'{k}={v}' for k, v in options.items())})" if options else ""
    return f"{arm.get('label')}: {arm.get('model')} on {arm.get('backend')} at {arm.get('precision')}{said}"


def change_lines(change: Mapping[str, Any]) -> list[str]:
    """What a pad-channels copy changed: per node each dimension "old → new"; what was left and why."""
    lines = []
    for node, dims in _mapping(change.get("padded")).items():
        said = [f"{dim} {old} → {new}" for dim, pair in _mapping(dims).items()
                if isinstance(pair, (list, tuple)) and len(pair) == 2 for old, new in [pair] if old != new]
        lines.append(f"{node}: " + (", ".join(said) or "unchanged dimensions"))
    lines += [f"{node}: left as it was ({why})" for node, why in _mapping(change.get("skipped")).items()]
    return lines


def what_if_html(ab: Mapping[str, Any]) -> str:
    """The what-if's intro: the experiment, the finding it tests, what the copy changed, and the identity check."""
    w = _mapping(ab.get("what_if"))
    experiment = w.get("experiment")
    suggested = f" It tests the advice of the diagnosis finding <b>{esc(w['suggested_by'])}</b>." \
        if w.get("suggested_by") else ""
    parts = [f"<h2>What-if: {esc(experiment)}</h2><p>This page is a <b>what-if experiment</b>, not a comparison "
             f"of precisions: the original model against a changed copy that must compute the same outputs, "
             f"measured as an A/B with the same loop and verdicts.{suggested}</p>"]
    changes = change_lines(_mapping(w.get("change")))
    if changes:
        multiple = _mapping(w.get("change")).get("multiple")
        parts.append(f"<p>What was padded (channels zero-padded to multiples of {esc(multiple)}):</p>"
                     + bullets(changes))
    if w.get("changed_model"):
        parts.append(f"<p>The changed copy: <code>{breakable(w['changed_model'])}</code></p>")
    if w.get("outputs_max_rel_diff") is not None:
        parts.append(f"<p>Outputs checked identical before measuring: largest relative difference "
                     f"{esc(fmt(w['outputs_max_rel_diff']))} (allowed {esc(fmt(w.get('identical_rtol')))}).</p>")
    parts.append(bullets([str(line) for line in _items(w.get("lines"))]))
    parts.append("<p>Arms:</p>" + bullets([arm_line(_mapping(a)) for a in _items(ab.get("arms"))]))
    return '<div class="intro">' + "".join(parts) + "</div>"


def ab_html(ab: Mapping[str, Any]) -> str:
    """An A/B's intro (two models, or one model on two backends): what each arm is, baseline first."""
    if ab.get("what_if"):
        return what_if_html(ab)
    arms = [_mapping(a) for a in _items(ab.get("arms"))]
    base = arms[0].get("label") if arms else "the first"
    return ('<div class="intro"><h2>A/B</h2><p>This page is an <b>A/B</b> of two arms, not a comparison of one '
            f"model's precisions: each arm is a model on a backend at a precision; the baseline is <b>{esc(base)}</b>"
            ", and a speedup above 1× means the other arm is faster.</p>"
            + bullets([arm_line(a) for a in arms]) + "</div>")


def reuse_command(search: Mapping[str, Any]) -> str:
    """The command fix-fp16 prints to reuse its keep-list ("trtprof build MODEL --fp16 --layer-precisions …")."""
    model = search.get("model")
    return f"trtprof build {shlex.quote(str(model)) if model else 'MODEL'} --fp16 {search.get('option') or ''}".rstrip()


def fix_fp16_html(search: Mapping[str, Any]) -> str:
    """fix-fp16's intro: what it searched, what it found (the keep-list, the command to reuse it) or not."""
    trials = _items(search.get("trials"))
    how = ("FP16 emulated with numpy float16 arithmetic (this backend computes its fp16 graph in FP32)"
           if search.get("evaluation") == "emulated" else "the backend's FP16 engines")
    parts = ["<h2>fix-fp16: a keep-list for FP16</h2><p>This page is a <b>fix-fp16</b> run: a search for the nodes "
             "to keep in FP32 so that FP16 meets the accuracy budget "
             f"<b>{esc(search.get('budget'))}</b>, judged on {esc(search.get('inputs'))} with {esc(how)}; "
             f"{esc(len(trials))} build(s) of at most {esc(search.get('max_builds'))}, "
             f"{esc(search.get('nodes'))} candidate nodes"
             + (f"; {esc(search['stopped'])}" if search.get("stopped") else "") + ".</p>"]
    keep = [str(k) for k in _items(search.get("keep"))]
    if not search.get("found"):
        parts.append("<p><b>No keep-list met the budget</b>: nothing below measures a fix.</p>")
    elif not keep:
        parts.append("<p><b>Nothing to keep in FP32</b>: plain FP16 meets the budget.</p>")
    else:
        parts.append(f"<p><b>Found: {esc(len(keep))} node(s) kept in FP32</b>: {breakable(', '.join(keep))}. "
                     "Below: FP16 with this keep-list measured against FP32.</p>")
    if search.get("found"):
        parts.append("<p>To reuse it:</p>" + command(f"reuse: {reuse_command(search)}"))
    return '<div class="intro">' + "".join(parts) + "</div>"


def intro_html(data: Mapping[str, Any]) -> str:
    """The page's opening box: what this comparison is and what was changed or found; '' for a plain compare."""
    if isinstance(data.get("fix_fp16"), Mapping):
        return fix_fp16_html(data["fix_fp16"])
    if isinstance(data.get("ab"), Mapping):
        return ab_html(data["ab"])
    return ""


def ratio_note(rows: Sequence[tuple[str, float, float | None, float | None]]) -> str:
    """Why the speedup is not the ratio of the two medians in the table, for each comparison where the two
    differ by more than 1 %: rows of (comparison label, speedup, baseline median ms, candidate median ms)."""
    differ = []
    for label, estimate, base, cand in rows:
        if base and cand and estimate and abs((base / cand) / estimate - 1) > 0.01:
            differ.append(f"{label}: speedup {estimate:.3f}×, ratio of the medians shown {base / cand:.3f}×")
    if not differ:
        return ""
    return ("<p><b>Why the speedup is not the ratio of the two medians shown:</b> the speedup is the geometric mean "
            "over loads of each load's ratio of the two arms' medians, in rounds of alternating order (every load "
            "weighs the same, an order effect cancels); the medians in the table pool every sample of every "
            "load. They differ when loads differ in speed or hold different numbers of samples.</p>"
            + bullets(differ))
