"""One table shape for per-layer times on every backend, and its text rendering.

Each backend's profiler (ONNX Runtime session profiling, torch.profiler/CUPTI, TensorRT's
IProfiler) yields a ``PrecisionProfile``: per executed layer (an ONNX node, or a fused layer),
the median time over the profiled iterations and the kernels behind it. ``LayerTable`` joins the
profiles of several precisions by layer name, so a row reads "this layer: fp32 x ms, fp16 y ms,
ratio y/x, kernels (tensor cores or not)". Casts and reformats are rows of their own (kind
``cast``/``reformat``), never folded into a neighbour, because they are what FP16 adds.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from ..util.texttable import grid
from ..util.wording import plural

COMPUTE = "compute"
CAST = "cast"
REFORMAT = "reformat"
OTHER = "other"

# Separate run: say so wherever the numbers are shown (the profilers add per-layer events and, for
# TensorRT and torch.profiler, synchronisation or callbacks that the latency run does not have).
SEPARATE_RUN_NOTE = ("per-layer times come from a separate profiled run (profiling perturbs timing); "
                     "the latency numbers come from the unprofiled timing loop")

# A layer is "FP16-slower" when its FP16 median is this much above the baseline's: smaller
# differences are within what one profiled run reproduces (profiler jitter of a few µs per layer).
SLOWER_MARGIN = 0.05
# Words in a kernel name that say the engine ran this layer on FP32 kernels whatever precision it asked
# for (layers.ort.BEHIND_CASTS_MARK, layers.ort.RUNS_FP32_MARK): the FP32 baseline's kernels.
FP32_MARKS = ("FP32 behind inserted casts", "runs FP32")
FP32_PRECISIONS = ("fp32", "tf32")


@dataclass(frozen=True)
class KernelTime:
    """One kernel name behind a layer: median time per iteration (all its launches) and launches."""

    name: str
    median_ms: float
    calls: int = 1
    tensor_core: bool | None = None

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "median_ms": self.median_ms, "calls": self.calls, "tensor_core": self.tensor_core}


@dataclass(frozen=True)
class LayerTiming:
    name: str
    op_type: str
    kind: str  # COMPUTE | CAST | REFORMAT | OTHER
    median_ms: float
    kernels: tuple[KernelTime, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "op_type": self.op_type, "kind": self.kind, "median_ms": self.median_ms,
                "kernels": [k.to_json() for k in self.kernels]}


@dataclass(frozen=True)
class PrecisionProfile:
    """Per-layer medians of one engine (one precision) at one batch size, from one profiler."""

    precision: str
    backend: str
    source: str  # which profiler, in words
    batch_size: int
    iterations: int
    layers: tuple[LayerTiming, ...]
    # median over iterations of the summed kernel/node time of one iteration (what the GPU or the
    # CPU was busy with), which may differ from the sum of per-layer medians
    iteration_total_ms: float | None = None
    config: Mapping[str, Any] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    # its layer times are GPU kernel times (True), or host times (False); None: as its backend's capabilities
    # say (``Capabilities.kernel_times``). ONNX Runtime's CUDA EP has GPU kernel times where CUPTI captured them.
    kernel_times: bool | None = None
    # a GPU-time profile's host-time twin from the same run (ONNX Runtime's CUDA EP), used when the other
    # precisions of its table have host times only: one table never mixes the two (layers.profile)
    host_fallback: "PrecisionProfile | None" = field(default=None, repr=False, compare=False)
    # the other way round: a host-time profile shown in place of its GPU-time twin (``one_clock``) keeps that twin,
    # whose per-layer kernels (names, tensor cores) still hold though their times are not the table's clock
    gpu_twin: "PrecisionProfile | None" = field(default=None, repr=False, compare=False)

    @property
    def total_ms(self) -> float:
        return float(sum(layer.median_ms for layer in self.layers))

    def to_json(self) -> dict[str, Any]:
        return {"precision": self.precision, "backend": self.backend, "source": self.source,
                "batch_size": self.batch_size, "iterations": self.iterations, "total_ms": self.total_ms,
                "iteration_total_ms": self.iteration_total_ms, "config": dict(self.config), "notes": list(self.notes),
                **({"kernel_times": self.kernel_times} if self.kernel_times is not None else {}),
                "layers": [layer.to_json() for layer in self.layers]}


def kind_of(op_type: str, name: str = "") -> str:
    """Cast/reformat/compute from the op (or layer type) and name, the same words on every backend."""
    op = op_type.lower()
    low = name.lower()
    if op == "cast" or "cast" in op:
        return CAST
    if op in ("reformat", "reformatting", "reorderinput", "reorderoutput", "memcpytohost", "memcpyfromhost") \
            or low.startswith("reformatting copynode") or "reorder" in op:
        return REFORMAT
    if op in ("input", "output", "identity", "constant", "shape", "reshape", "flatten", "squeeze", "unsqueeze"):
        return OTHER
    return COMPUTE


@dataclass(frozen=True)
class LayerRow:
    name: str
    op_type: str
    kind: str
    time_ms: dict[str, float | None]
    share: dict[str, float | None]
    kernels: dict[str, tuple[KernelTime, ...]]
    graph: Mapping[str, Any] | None = None  # graph facts (shapes, tensor-core eligibility), if the node is known

    def ratio(self, candidate: str, baseline: str) -> float | None:
        """candidate time / baseline time (> 1: the candidate is slower on this layer)."""
        b, c = self.time_ms.get(baseline), self.time_ms.get(candidate)
        if b is None or c is None or b <= 0:
            return None
        return c / b

    def runs_fp32(self, precision: str) -> bool:
        """True when every kernel this layer ran in ``precision``'s engine says it ran FP32 (``FP32_MARKS``)."""
        kernels = self.kernels.get(precision, ())
        return bool(kernels) and all(any(mark in k.name for mark in FP32_MARKS) for k in kernels)

    def tensor_core(self, precision: str) -> bool | None:
        """True when a kernel of this layer uses tensor cores; False only when every kernel is known
        not to; None when some kernel's name does not tell (e.g. cuBLASLt's ``nvjet_*`` GEMMs)."""
        flags = [k.tensor_core for k in self.kernels.get(precision, ())]
        if any(f is True for f in flags):
            return True
        if not flags or any(f is None for f in flags):
            return None
        return False


@dataclass(frozen=True)
class LayerTable:
    batch_size: int
    precisions: tuple[str, ...]  # the first is the baseline
    profiles: Mapping[str, PrecisionProfile]
    graph: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)  # node name → graph facts

    @property
    def baseline(self) -> str:
        return self.precisions[0]

    @property
    def rows(self) -> list[LayerRow]:
        order: list[str] = []
        by_prec: dict[str, dict[str, LayerTiming]] = {}
        for p in self.precisions:
            prof = self.profiles.get(p)
            by_prec[p] = {}
            if prof is None:
                continue
            for layer in prof.layers:
                by_prec[p][layer.name] = layer
                if layer.name not in order:
                    order.append(layer.name)
        totals = {p: (self.profiles[p].total_ms if p in self.profiles else 0.0) for p in self.precisions}
        rows = []
        for name in order:
            first = next(by_prec[p][name] for p in self.precisions if name in by_prec[p])
            # a row is a cast/reformat when any precision runs it as one (the FP16 output copy casts,
            # the FP32 one only copies)
            kinds = [by_prec[p][name].kind for p in self.precisions if name in by_prec[p]]
            kind = next((k for k in kinds if k in (CAST, REFORMAT)), first.kind)
            times = {p: (by_prec[p][name].median_ms if name in by_prec[p] else None) for p in self.precisions}
            rows.append(LayerRow(
                name=name, op_type=first.op_type, kind=kind, time_ms=times,
                share={p: (t / totals[p] if t is not None and totals[p] > 0 else None) for p, t in times.items()},
                kernels={p: by_prec[p][name].kernels for p in self.precisions if name in by_prec[p]},
                graph=self.graph.get(name),
            ))
        return rows

    def gpu_kernels(self, precision: str) -> dict[str, tuple[KernelTime, ...]]:
        """Layer name → the kernels behind it in ``precision``'s profile; where the table shows that precision's
        host times in place of its GPU kernel times (``layers.profile.one_clock``), the GPU twin's kernels: their
        names and tensor-core use hold whatever clock the table compares on, their times are GPU times. {} for a
        precision the table does not hold."""
        source = self._kernel_profile(precision)
        return {layer.name: layer.kernels for layer in source.layers} if source is not None else {}

    def gpu_total_ms(self, precision: str) -> float | None:
        """``precision``'s summed per-layer time on the clock of ``gpu_kernels`` (None without the profile)."""
        source = self._kernel_profile(precision)
        return source.total_ms if source is not None else None

    def _kernel_profile(self, precision: str) -> PrecisionProfile | None:
        """``precision``'s profile, or the GPU twin it stands in for (``gpu_kernels``); None where there is none."""
        prof = self.profiles.get(precision)
        return prof.gpu_twin if prof is not None and prof.gpu_twin is not None else prof

    def totals_ms(self) -> dict[str, float]:
        return {p: self.profiles[p].total_ms for p in self.precisions if p in self.profiles}

    def share_of_kind(self, precision: str, kinds: Sequence[str]) -> float:
        total = self.profiles[precision].total_ms if precision in self.profiles else 0.0
        if total <= 0:
            return 0.0
        return sum(r.time_ms[precision] or 0.0 for r in self.rows if r.kind in kinds) / total

    def to_json(self) -> dict[str, Any]:
        base = self.baseline
        rows = []
        for r in self.rows:
            rows.append({
                "name": r.name, "op_type": r.op_type, "kind": r.kind, "time_ms": r.time_ms, "share": r.share,
                "ratio_vs_baseline": {p: r.ratio(p, base) for p in self.precisions[1:]},
                "tensor_core": {p: r.tensor_core(p) for p in self.precisions if p in r.kernels},
                "kernels": {p: [k.to_json() for k in ks] for p, ks in r.kernels.items()},
                "graph": dict(r.graph) if r.graph else None,
            })
        return {"batch_size": self.batch_size, "precisions": list(self.precisions), "baseline": base,
                "note": SEPARATE_RUN_NOTE, "totals_ms": self.totals_ms(),
                "profiles": {p: {k: v for k, v in prof.to_json().items() if k != "layers"}
                             for p, prof in self.profiles.items()},
                "rows": rows}


def fmt_layer_ms(value: float | None, missing: str = "-") -> str:
    if value is None:
        return missing
    return f"{value:.4f}" if value < 1 else f"{value:.3f}"


def rows_by_time(rows: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """A layer table's JSON rows by their largest time over the precisions, largest first (stable)."""
    return sorted(rows, key=lambda r: -max((t or 0.0) for t in r["time_ms"].values()))


def _tc_cell(kernels: Sequence[Mapping[str, Any]]) -> str:
    known = [k for k in kernels if k.get("tensor_core") is not None]
    if not known:
        return "?" if kernels else "-"
    return f"{sum(1 for k in known if k['tensor_core'])}/{len(known)}"


NAME_WIDTH = 48  # layer names longer than this are shortened in the text table (the JSON keeps them whole)
ELLIPSIS = "…"


def _window(name: str, start: int, width: int) -> str:
    """``width`` characters of ``name`` from ``start``, with "…" where text was left out."""
    start = max(0, min(start, len(name) - width))
    head = ELLIPSIS if start > 0 else ""
    body_width = width - len(head)
    tail = ELLIPSIS if start + len(head) + body_width < len(name) else ""
    body = name[start:start + body_width - len(tail)] if tail else name[start:start + body_width]
    return head + body + tail


def short_names(names: Sequence[str], width: int = NAME_WIDTH) -> list[str]:
    """Each name in at most ``width`` characters, names that differ still reading differently.

    A long name keeps its start and its end ("StatefulPartitionedCall/…/conv2d_3/Conv2D"): TensorFlow
    and PyTorch names share long prefixes and differ near the end. Names that still read the same
    show the window around their first difference instead; any left equal get " #2", " #3"."""
    head = width // 3

    def cut(name: str) -> str:
        return name if len(name) <= width else name[:head] + ELLIPSIS + name[len(name) - (width - head - 1):]

    out = [cut(n) for n in names]
    groups: dict[str, list[int]] = {}
    for i, text in enumerate(out):
        groups.setdefault(text, []).append(i)
    for text, idx in groups.items():
        distinct = sorted({names[i] for i in idx})
        if len(distinct) < 2:
            continue
        first_diff = next((k for k, chars in enumerate(zip(*distinct)) if len(set(chars)) > 1),
                          min(len(n) for n in distinct))
        for i in idx:
            out[i] = _window(names[i], first_diff - width // 2, width)
    seen: dict[str, int] = {}
    for i, text in enumerate(out):
        seen[text] = seen.get(text, 0) + 1
        if seen[text] > 1 and names[i] != names[out.index(text)]:
            suffix = f" #{seen[text]}"
            out[i] = text[:width - len(suffix)] + suffix
    return out


def ran_fp32(kernels: Sequence[Mapping[str, Any]]) -> bool:
    """``LayerRow.runs_fp32`` on a row's JSON kernels of one precision."""
    return bool(kernels) and all(any(mark in str(k.get("name", "")) for mark in FP32_MARKS) for k in kernels)


def same_fp32_kernels(row: Mapping[str, Any], precision: str, baseline: str) -> bool:
    """A row (JSON) that ran FP32 kernels in ``precision``'s engine and the baseline's FP32 ones: its ratio
    says nothing about ``precision`` (never marked slower; ``diagnose.layer_rules.fp16_slower_layers``)."""
    kernels = row.get("kernels") or {}
    return ran_fp32(kernels.get(precision, [])) and (baseline.split("#")[0] in FP32_PRECISIONS
                                                     or ran_fp32(kernels.get(baseline, [])))


def format_table(table: Mapping[str, Any], top: int | None = 20, effective: Mapping[str, str] | None = None) -> str:
    """Text table of a layer table's JSON form, rows by their largest time, FP16-slower marked ``!``.

    ``effective``: precision → what its engine really computed in, where that differs (a CPU "fp16"
    that is ``fp32+casts``): its columns say so and carry no "slower in FP16" mark, since no layer
    of it ran in FP16. Tensor-core columns are left out where no kernel name could say (a CPU)."""
    effective = dict(effective or {})
    precisions = list(table["precisions"])
    base = precisions[0]
    rows = rows_by_time(table["rows"])
    shown = rows if top is None else rows[:top]

    def label(p: str) -> str:
        return f"{p} ({effective[p]})" if p in effective else p

    with_tc = [p for p in precisions if any(_tc_cell(r["kernels"].get(p, [])) not in ("?", "-") for r in rows)]
    headers = ["layer", "op", "kind"]
    for p in precisions:
        headers += [f"{label(p)} ms", f"{label(p)} %"]
    for p in precisions[1:]:
        headers.append(f"{label(p)}/{base}")
    headers += [f"TC kernels {p}" for p in with_tc]
    lines_rows = []
    same_fp32 = False
    for r, name in zip(shown, short_names([r["name"] for r in shown])):
        cells = [name, r["op_type"], r["kind"]]
        for p in precisions:
            share = r["share"].get(p)
            cells += [fmt_layer_ms(r["time_ms"].get(p)), "-" if share is None else f"{share:.1%}"]
        for p in precisions[1:]:
            ratio = r["ratio_vs_baseline"].get(p)
            fp32 = same_fp32_kernels(r, p, base)
            same_fp32 = same_fp32 or (fp32 and ratio is not None)
            mark = "=" if fp32 else ("!" if ratio is not None and ratio > 1 + SLOWER_MARGIN and p not in effective else "")
            cells.append("-" if ratio is None else f"{ratio:.2f}{mark}")
        cells += [_tc_cell(r["kernels"].get(p, [])) for p in with_tc]
        lines_rows.append(cells)
    out = grid(headers, lines_rows, left=3)
    if top is not None and len(rows) > top:
        rest = rows[top:]
        parts = []
        for p in precisions:
            total = table["totals_ms"].get(p) or 0.0
            t = sum(r["time_ms"].get(p) or 0.0 for r in rest)
            parts.append(f"{p} {fmt_layer_ms(t)} ms ({t / total:.1%})" if total else f"{p} -")
        out.append(f"… {plural(len(rest), 'more layer')}: " + ", ".join(parts))
    totals = ", ".join(f"{p} {fmt_layer_ms(v)} ms" for p, v in table["totals_ms"].items())
    tc = "; TC = kernels with tensor cores / kernels named" if with_tc else ""
    same = f"; '=' = ran the same FP32 kernels as {base}" if same_fp32 else ""
    out.append(f"sum of layer medians: {totals}  (batch {table['batch_size']}; '!' = slower than {base} by "
               f"> {SLOWER_MARGIN:.0%}{same}{tc})")
    out.append(f"note: {table.get('note', SEPARATE_RUN_NOTE)}")
    profiles = table.get("profiles", {})
    clocked = [p for p in precisions if (profiles.get(p) or {}).get("kernel_times")]
    if clocked:
        out.append(f"note: {', '.join(clocked)}: GPU kernel time per layer ({profiles[clocked[0]].get('source', '')})")
    for p in precisions:
        out += [f"note ({p}): {n}" for n in (profiles.get(p) or {}).get("notes", [])]
    return "\n".join(out)
