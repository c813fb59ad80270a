"""FP16 range analysis: which activations would overflow or underflow in FP16, predicted from the
FP32 model before anything runs in FP16.

Why: where FP16 does not really execute (ONNX Runtime's CPU provider runs an "fp16" graph in FP32
behind casts) an activation of 1e9 comes out finite, yet on a GPU that computes in FP16 the same
tensor is ``inf``. The FP32 activations say so directly: the FP32 model runs once through ONNX
Runtime (CPU, graph optimizations off so every tensor keeps its ONNX name) with every intermediate
float tensor exposed as an output, on the bench inputs of one batch. Per tensor: max |x|, and the
share of its non-zero values below FP16's smallest normal (2⁻¹⁴ ≈ 6.1e-5: kept as subnormals, fewer
bits) and at or below half its smallest subnormal (2⁻²⁵ ≈ 2.98e-8: rounded to 0, lost). The limits are
the rounding boundaries of float32 → float16 (round to nearest, ties to even, as numpy and the GPUs
convert): |x| ≥ 65520 becomes inf (65519.99 still rounds to 65504), |x| ≤ 2⁻²⁵ becomes 0 (just above
it rounds up to 2⁻²⁴).

Findings name the tensor, the node that produces it and the value, and give the option that keeps
that tensor out of FP16: its producer *and* its readers kept in FP32 (keeping only the producer would
still cast its output to FP16 for the readers).

Cost is bounded: one batch (its first ``MAX_BATCH`` samples when the batch dimension is dynamic), and
tensors fetched in runs of at most ``MAX_RUN_ELEMENTS`` values; a model needing more than ``MAX_RUNS``
runs has its tensors sampled evenly (the result says so, and the input shapes analysed are shown).

This module runs the analysis, checks the keep-lists it suggests and hooks it into build and compare; what
an analysis is (the limits, ``TensorRange``, ``RangeFinding``, ``RangeAnalysis``, ``findings_of``,
``predicted_lines``) lives in ``fp16range_records`` and is importable from here too.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

import numpy as np

from ..util.wording import plural
from .fp16range_records import (  # noqa: F401  (re-exported: build, compare and the tests import them from here)
    FINDINGS_SHOWN, FP16_INF_FROM, FP16_ZERO_UPTO, LARGEST_KEPT, OVERFLOW, STATS_DTYPE, UNDERFLOW,
    UNDERFLOW_MIN_VALUES, UNDERFLOW_SHARE, RangeAnalysis, RangeFinding, TensorRange, findings_of, merge_ranges,
    option_text, predicted_lines, tensor_range)

if TYPE_CHECKING:
    import onnx

    from ..convert.keeplist import KeepFp32

MAX_RUN_ELEMENTS = 32_000_000  # values fetched per ONNX Runtime run (~128 MB of float32)
MAX_RUNS = 8  # runs of the model per analysis; beyond that, tensors are sampled
# Samples analysed at most (of a dynamic batch): the cost is runs × one inference of this batch.
MAX_BATCH = 8


def _estimated_elements(model: "onnx.ModelProto", input_shapes: Mapping[str, tuple[int, ...]]) -> dict[str, int]:
    """Element count per tensor from shape inference with the real input shapes (best effort; a
    tensor with an unknown dimension is not in the result)."""
    import onnx

    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    for inp in copy.graph.input:
        shape = input_shapes.get(inp.name)
        if shape is None:
            continue
        dims = inp.type.tensor_type.shape.dim
        if len(dims) == len(shape):
            for dim, size in zip(dims, shape):
                dim.ClearField("dim_param")
                dim.dim_value = int(size)
    try:
        inferred = onnx.shape_inference.infer_shapes(copy)
    except Exception:  # noqa: BLE001 - best effort: unknown sizes are planned conservatively
        return {}
    out = {}
    for info in inferred.graph.value_info:
        dims = info.type.tensor_type.shape.dim
        if dims and all(d.HasField("dim_value") for d in dims):
            out[info.name] = int(np.prod([d.dim_value for d in dims]))
    return out


def plan_runs(names: Sequence[str], sizes: Mapping[str, int], unknown_size: int,
              max_run_elements: int = MAX_RUN_ELEMENTS, max_runs: int = MAX_RUNS) -> list[list[str]]:
    """Group tensors into runs of at most ``max_run_elements`` values (a bigger tensor runs alone);
    when that needs more than ``max_runs`` runs, keep an evenly spaced subset that fits."""
    def group(chosen: Sequence[str]) -> list[list[str]]:
        runs: list[list[str]] = []
        current: list[str] = []
        total = 0
        for name in chosen:
            size = sizes.get(name, unknown_size)
            if current and total + size > max_run_elements:
                runs.append(current)
                current, total = [], 0
            current.append(name)
            total += size
        if current:
            runs.append(current)
        return runs

    runs = group(names)
    keep = len(names)
    while len(runs) > max_runs and keep > 1:
        keep = max(1, min(keep - 1, int(keep * max_runs / len(runs))))
        idx = np.unique(np.linspace(0, len(names) - 1, keep).round().astype(int))
        runs = group([names[i] for i in idx])
    return runs


@dataclass(frozen=True)
class Deadline:
    """compare's bound on the analysis (issue 44 #2: 7.1 s of a 6-s budget went to it): no run of the model
    and no keep-list check starts after ``at`` (a ``clock()`` value), the first run excepted (without it there
    is no analysis); ``say`` hears a line as each part begins, so the start-up is reported as it runs."""

    at: float
    clock: Callable[[], float] = time.perf_counter
    say: Callable[[str], None] | None = None

    def passed(self) -> bool:
        return self.clock() > self.at

    def tell(self, line: str) -> None:
        if self.say is not None:
            self.say(line)


def analyze(model: "onnx.ModelProto", feeds: Mapping[str, np.ndarray] | Sequence[Mapping[str, np.ndarray]], *,
            keep: "KeepFp32 | None" = None, max_run_elements: int = MAX_RUN_ELEMENTS, max_runs: int = MAX_RUNS,
            inputs: str = "random inputs", deadline: Deadline | None = None) -> RangeAnalysis:
    """Run the FP32 ``model`` once per planned run on ``feeds`` (one batch, or a list of batches: the
    user's samples; ranges merged over them); the range of every float tensor a node produces
    (Constant outputs are weights: the conversion's weight report covers them). With a ``deadline`` no run
    after the first starts past it (the analysis says what it left out)."""
    batches = [feeds] if isinstance(feeds, Mapping) else list(feeds)
    feeds = batches[0]
    import onnx

    from .ort import import_ort
    from ..convert.fp16 import prepare_for_fp16, tensor_elem_types
    from ..convert.fp16_fixes import DETACH_NODE_PREFIX, DETACHED_SUFFIX

    started = time.perf_counter()
    prepared, _ = prepare_for_fp16(model)  # the node names the FP16 build and --layer-precisions use
    graph = prepared.graph
    types = tensor_elem_types(prepared)
    producer: dict[str, tuple[str, str]] = {}
    readers: dict[str, list[str]] = {}
    for node in graph.node:
        for name in node.input:
            readers.setdefault(name, []).append(node.name)
        if node.name.startswith(DETACH_NODE_PREFIX):
            continue  # added by prepare_for_fp16; the tensor is reported under its producer
        for out in node.output:
            if out and node.op_type != "Constant" and types.get(out) == onnx.TensorProto.FLOAT:
                producer.setdefault(out, (node.name, node.op_type))
    names = list(producer)
    shapes = {k: tuple(int(d) for d in np.shape(v)) for k, v in feeds.items()}
    sizes = _estimated_elements(prepared, shapes)
    unknown = max((int(np.size(v)) for v in feeds.values()), default=1)
    runs = plan_runs(names, sizes, unknown, max_run_elements, max_runs)
    exposed = {out.name for out in graph.output}
    for name in (n for run in runs for n in run):
        if name not in exposed:
            graph.output.append(onnx.helper.make_tensor_value_info(name, onnx.TensorProto.FLOAT, None))
    ort = import_ort()
    options = ort.SessionOptions()
    options.log_severity_level = 3
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(prepared.SerializeToString(), options, providers=["CPUExecutionProvider"])
    if deadline is not None:
        deadline.tell(f"FP16 range analysis of the FP32 model: {plural(len(names), 'float tensor')} in "
                      f"{plural(len(runs), 'run')} of ONNX Runtime on the CPU")
    ranges, stopped = _ranges(session, runs, batches, producer, deadline)
    ops = {node.name: node.op_type for node in graph.node}
    readers = {k.removesuffix(DETACHED_SUFFIX): [r for r in v if not r.startswith(DETACH_NODE_PREFIX)]
               for k, v in readers.items()}
    return RangeAnalysis(findings=findings_of(ranges, readers, keep, ops), tensors=tuple(ranges),
                         float_tensors=len(names), analysed=len(ranges), runs=len(runs), input_shapes=shapes,
                         seconds=time.perf_counter() - started, inputs=inputs, stopped=stopped,
                         samples=0 if inputs == "random inputs" else sum(_batch_of(b) for b in batches))


def _ranges(session: Any, runs: Sequence[Sequence[str]], batches: Sequence[Mapping[str, np.ndarray]],
            producer: Mapping[str, tuple[str, str]], deadline: Deadline | None) -> tuple[list[TensorRange], str]:
    """Every planned run of ``session`` on every batch, each tensor's ranges merged over the batches; no run
    after the first starts past ``deadline``. Returns the ranges and what was left out ("" when nothing)."""
    from ..convert.fp16_fixes import DETACHED_SUFFIX

    wanted = {i.name for i in session.get_inputs()}
    ranges: list[TensorRange] = []
    for done, run in enumerate(runs):
        if done and deadline is not None and deadline.passed():
            total = sum(len(r) for r in runs)
            return ranges, f"{done} of {len(runs)} runs, {len(ranges)} of {total} float tensors analysed"
        per_tensor: dict[str, list[TensorRange]] = {}
        for batch in batches:
            batch_feeds = {k: v for k, v in batch.items() if k in wanted}
            for name, values in zip(run, session.run(list(run), batch_feeds)):
                node, op = producer[name]
                per_tensor.setdefault(name, []).append(tensor_range(name.removesuffix(DETACHED_SUFFIX), node, op, values))
        ranges += [merge_ranges(parts) for parts in per_tensor.values()]
    return ranges, ""


def _batch_of(feeds: Mapping[str, np.ndarray]) -> int:
    return int(np.shape(next(iter(feeds.values())))[0]) if feeds else 0


def analyze_safely(model: Any, feeds: Any, *, keep: "KeepFp32 | None" = None, inputs: str = "random inputs",
                   known: Mapping[tuple, str] | None = None, deadline: Deadline | None = None) -> RangeAnalysis:
    """``analyze`` for a build or a compare: a model ONNX Runtime cannot run (custom ops, a missing
    onnxruntime) costs a skipped analysis with its reason, never the build or the measurement.
    ``model``: an ``OnnxModel`` (read once by its caller), a parsed graph, or a path (read here);
    ``known``/``deadline``: as ``check_suggestions`` and ``analyze`` take them."""
    from ..errors import TrtprofError
    from ..model.onnx_model import OnnxModel, load_onnx

    try:
        if isinstance(model, OnnxModel):
            proto = model.proto
        else:
            proto = load_onnx(model) if not hasattr(model, "graph") else model
        return check_suggestions(proto, analyze(proto, feeds, keep=keep, inputs=inputs, deadline=deadline), keep,
                                 known=known, deadline=deadline)
    except TrtprofError as err:
        return RangeAnalysis(skipped=str(err))
    except Exception as err:  # noqa: BLE001 - onnxruntime/onnx raise many types; the analysis is advisory
        from .ort import ort_cause

        return RangeAnalysis(skipped=f"{type(err).__name__}: {ort_cause(str(err))}")


# Keep-lists built to check them per analysis (each: one FP16 conversion and one ONNX Runtime load,
# ~0.1–2 s on ResNet-50-sized models): the combined one and the findings printed first.
MAX_CHECKED = 1 + 2 * FINDINGS_SHOWN


def build_error(model: "onnx.ModelProto", nodes: Sequence[str], ops: Sequence[str] = ()) -> str:
    """"" when trtprof's FP16 conversion keeping ``nodes`` (and ``ops``) in FP32 builds and ONNX
    Runtime loads it (type checks included: what refused the keep-lists of issue 23); else why not.
    Every converting backend (ONNX Runtime, torch keep-lists, TensorRT >= 11, TensorRT-RTX) builds
    from this same converted graph."""
    from .ort import import_ort, ort_cause
    from ..convert.fp16 import convert_fp16

    try:
        converted = convert_fp16(model, keep_fp32_nodes=nodes, keep_fp32_ops=ops).model
        ort = import_ort()
        options = ort.SessionOptions()
        options.log_severity_level = 3
        ort.InferenceSession(converted.SerializeToString(), options, providers=["CPUExecutionProvider"])
    except Exception as err:  # noqa: BLE001 - any failure means: do not suggest it
        return ort_cause(str(err)).splitlines()[0] if str(err) else type(err).__name__
    return ""


def check_key(nodes: Sequence[str], ops: Sequence[str]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """A keep-list as ``check_suggestions`` checks it: its nodes in order, duplicates dropped, and its ops."""
    return tuple(dict.fromkeys(nodes)), tuple(ops)


def check_suggestions(model: "onnx.ModelProto", analysis: RangeAnalysis, keep: "KeepFp32 | None", *,
                      known: Mapping[tuple, str] | None = None, deadline: Deadline | None = None) -> RangeAnalysis:
    """Build every keep-list the analysis would print (the combined one, and each printed finding's)
    before it is suggested; one that does not build is reported with its cause instead. ``known``: checks
    already made (``check_key`` → error, "" where it built: what the engine's build recorded,
    ``recorded_checks``), not built again (issue 44 #2: 5.4 s of a 6-s budget rebuilt six of them); past
    the ``deadline`` no check starts: the combined keep-list is then not suggested, a finding's is shown
    unchecked, and the analysis says how many were left."""
    kept = list(keep.nodes) if keep else []
    kept_ops = list(keep.ops) if keep else []
    known = known or {}
    budget, left = MAX_CHECKED, 0

    def check(nodes: Sequence[str]) -> str | None:  # None: not checked (the deadline)
        nonlocal left
        key = check_key(nodes, kept_ops)
        if key in known:
            return known[key]
        if deadline is not None and deadline.passed():
            left += 1
            return None
        return build_error(model, list(key[0]), kept_ops)

    wanted = (1 if analysis.open_nodes else 0) + sum(1 for f in analysis.findings if not f.covered)
    if deadline is not None and wanted:
        deadline.tell(f"checking that up to {plural(min(wanted, MAX_CHECKED), 'keep-list')} build "
                      f"({len(known)} already checked by the build)")
    suggestion_error = ""
    if analysis.open_nodes:
        error = check([*kept, *analysis.open_nodes])
        suggestion_error = "not checked: the time budget" if error is None else error
        budget -= 1
    findings = []
    shown: dict[str, int] = {}
    for f in analysis.findings:
        shown[f.kind] = shown.get(f.kind, 0) + 1
        if f.covered or budget <= 0 or shown[f.kind] > FINDINGS_SHOWN:
            findings.append(f)
            continue
        error = check([*kept, *f.keep_nodes])
        budget -= 1
        findings.append(f if error is None else replace(f, built=not error, build_error=error))
    stopped = ", ".join(filter(None, [analysis.stopped, plural(left, "keep-list") + " not checked" if left else ""]))
    return replace(analysis, findings=tuple(findings), suggestion_error=suggestion_error, stopped=stopped)


def recorded_checks(recorded: Mapping[str, Any] | None, keep: "KeepFp32 | None") -> dict[tuple, str]:
    """The keep-list checks an engine's build made (its metadata's ``fp16_range``, ``RangeAnalysis.to_json``),
    as ``check_suggestions`` takes them: ``check_key`` → error ("" where it built). Both were made with the
    same keep-list (the fp16 record's spec) on the same model (the engine's key holds its hash)."""
    if not recorded or recorded.get("skipped"):
        return {}
    kept = list(keep.nodes) if keep else []
    ops = list(keep.ops) if keep else []
    out: dict[tuple, str] = {}
    findings = [f for f in recorded.get("findings") or [] if isinstance(f, Mapping)]
    for f in findings:
        if f.get("built") is not None:
            out[check_key([*kept, *f.get("keep_nodes", [])], ops)] = str(f.get("build_error") or "")
    open_nodes = list(dict.fromkeys(n for f in findings if not f.get("covered") for n in f.get("keep_nodes", [])))
    error = recorded.get("suggestion_error")
    if open_nodes and (recorded.get("suggested_option") or error) and error != "not checked: the time budget":
        out[check_key([*kept, *open_nodes], ops)] = str(error or "")
    return out


# ---------------------------------------------------------------------------------------------
# Hooks for build and compare
# ---------------------------------------------------------------------------------------------


def inputs_key(data: Any) -> str:
    """What the analysis ran on, as a key: ``random`` (the bench's default inputs, seed 0: the same for
    one engine spec) or a digest of the user's arrays (names, dtypes, shapes, bytes). A cached engine's
    analysis is reused only for the same key (issue 36: one of another --inputs was kept)."""
    import hashlib

    if data is None:
        return "random"
    arrays = getattr(data, "arrays", None)
    if not isinstance(arrays, Mapping):
        return f"unkeyed-{id(data)}"  # never equal to a recorded key: rerun
    digest = hashlib.sha256()
    for name in sorted(arrays):
        a = np.ascontiguousarray(arrays[name])
        digest.update(f"{name}|{a.dtype.str}|{a.shape}|".encode())
        digest.update(a.reshape(-1).view(np.uint8).data if a.dtype.hasobject is False else a.tobytes())
    return "sha256:" + digest.hexdigest()


def for_build(onnx_path: Any, inputs: Sequence[Any], batch_size: int,
              shapes: Mapping[str, tuple[int, ...]] | None, spec: Any, data: Any = None) -> RangeAnalysis:
    """The analysis ``trtprof build --fp16`` records: the bench's default inputs (seed 0) at the
    smallest batch size, or all of the user's samples (``data``), findings already covered by the
    spec's keep-list marked so."""
    from ..model.inputs import make_inputs, resolve_shapes

    keep = _keep_list(spec, spec.backend)
    if data is not None:
        return analyze_safely(onnx_path, sample_batches(data, inputs, batch_size), keep=keep, inputs=data.describe())
    where = str(getattr(onnx_path, "path", onnx_path))  # an OnnxModel's file, or the path itself
    feeds = make_inputs(inputs, resolve_shapes(inputs, batch_size, shapes, model_path=where))
    return analyze_safely(onnx_path, first_samples(feeds, inputs), keep=keep)


# Samples of the user's --inputs the range analysis runs at most: its cost grows with them (one
# inference per batch per run), its answer (a maximum, a share) settles long before.
MAX_SAMPLES = 512


def sample_batches(data: Any, inputs: Sequence[Any], batch_size: int) -> list[dict[str, np.ndarray]]:
    """The user's samples (at most ``MAX_SAMPLES``) in batches: of ``MAX_BATCH`` when the batch
    dimension is dynamic, else of the model's static batch."""
    from ..model.user_inputs import InputData

    dynamic = all(not isinstance(t.shape[0], int) for t in inputs if t.shape) and bool(inputs)
    size = MAX_BATCH if dynamic else batch_size
    kept = data if data.samples <= MAX_SAMPLES else \
        InputData(f"{data.source} (first {MAX_SAMPLES})", {k: v[:MAX_SAMPLES] for k, v in data.arrays.items()})
    dtypes = {t.name: np.dtype(t.dtype) for t in inputs}
    batches = list(kept.batches(size, dtypes))
    if dynamic and kept.samples % size:  # the last batch holds the remainder only: no sample counted twice
        rest = kept.samples % size
        batches[-1] = {k: v[:rest] for k, v in batches[-1].items()}
    return batches


def first_samples(feeds: Mapping[str, np.ndarray], inputs: Sequence[Any],
                  max_batch: int = MAX_BATCH) -> dict[str, np.ndarray]:
    """The first ``max_batch`` samples of a larger batch when every input's batch dimension is
    dynamic (a static batch must be fed whole): the analysis' cost grows with the batch, its answer
    hardly does (random inputs, one distribution)."""
    dynamic = all(not isinstance(t.shape[0], int) for t in inputs if t.shape) and bool(inputs)
    if not dynamic or not all(np.ndim(v) and np.shape(v)[0] > max_batch for v in feeds.values()):
        return dict(feeds)
    return {k: v[:max_batch] for k, v in feeds.items()}


@dataclass(frozen=True)
class RecordedAnalysis:
    """The analysis an FP16 engine's build recorded (its metadata's ``fp16_range``), given to compare as it
    was: the same model (the engine key holds its hash), keep-list and inputs, so the same answer without
    running it again (issue 44 #2). Compare only reads its JSON (``annotate``)."""

    recorded: Mapping[str, Any]

    def to_json(self) -> dict[str, Any]:
        return dict(self.recorded)


def reusable(record: Any, feeds: Mapping[str, np.ndarray], seeded_as_build: bool) -> Mapping[str, Any] | None:
    """``record``'s recorded analysis where compare's would be the same one: the build's random inputs
    (``seeded_as_build``: compare's seed and integer range are the build's defaults), at the same shapes."""
    meta = getattr(record, "backend_metadata", None) or {}
    recorded = meta.get("fp16_range")
    if not seeded_as_build or not isinstance(recorded, Mapping) or meta.get("fp16_range_inputs") != "random":
        return None
    if recorded.get("skipped") or recorded.get("stopped") or recorded.get("samples"):
        return None
    shapes = {k: list(np.shape(v)) for k, v in first_samples(feeds, record.inputs).items()}
    return recorded if recorded.get("input_shapes") == shapes else None


def for_compare(onnx_path: Any, records: Mapping[str, Any], feeds: Mapping[str, np.ndarray],
                data: Any = None, *, seeded_as_build: bool = False,
                deadline: Deadline | None = None) -> RangeAnalysis | RecordedAnalysis | None:
    """The analysis compare puts beside the observed FP16 error: None when no candidate is FP16;
    on all of the user's samples with ``data``. ``onnx_path``: the FP32 source, an ``OnnxModel``
    (compare's, read once) or a path. The fp16 engine's recorded analysis where it is the same one
    (``reusable``); else run here, bounded by ``deadline``, the keep-lists its build checked not built again."""
    if not any(getattr(r, "precision", None) == "fp16" for r in records.values()):
        return None
    if onnx_path is None:
        return RangeAnalysis(skipped="the FP32 source model is not available (engines dir without its model)")
    fp16 = next(r for r in records.values() if r.precision == "fp16")
    recorded = reusable(fp16, feeds, seeded_as_build and data is None)
    if recorded is not None:
        if deadline is not None:
            deadline.tell("FP16 range analysis: the one the fp16 engine's build recorded (same model, keep-list "
                          "and inputs)")
        return RecordedAnalysis(recorded)
    keep = _keep_list(fp16.spec, fp16.backend)
    known = recorded_checks((getattr(fp16, "backend_metadata", None) or {}).get("fp16_range"), keep)
    if data is not None:
        batch = int(np.shape(next(iter(feeds.values())))[0]) if feeds else 1
        return analyze_safely(onnx_path, sample_batches(data, fp16.inputs, batch), keep=keep, inputs=data.describe(),
                              known=known, deadline=deadline)
    return analyze_safely(onnx_path, first_samples(feeds, fp16.inputs), keep=keep, known=known, deadline=deadline)


def _keep_list(spec: Any, backend: str) -> Any:
    """The spec's FP32 keep-list, to mark findings it already covers; None where the rules are not
    a plain node/op list (TensorRT < 11's wildcard rules): then nothing is marked as covered."""
    from ..convert.keeplist import KeepFp32

    try:
        return KeepFp32.from_spec(spec, backend=backend)
    except Exception:  # noqa: BLE001
        return None


# Effective precisions of an "fp16" engine that did not compute in FP16 (ORT CPU: FP32 behind casts;
# TensorRT choosing FP32 kernels everywhere).
NOT_FP16 = ("fp32+casts", "mixed", "fp32")


def caveat(candidate: str, effective: str) -> str | None:
    """The accuracy caveat for an fp16 candidate whose arithmetic was not (all) FP16."""
    if candidate != "fp16" or effective not in NOT_FP16:
        return None
    how = {"fp32+casts": "every compute node ran in FP32 behind casts (the weights were rounded to FP16)",
           "mixed": "some compute nodes ran in FP32 behind casts",
           "fp32": "the engine chose FP32 kernels for every layer"}[effective]
    return (f"observed error is not FP16's: the fp16 engine ran {effective}: {how}; FP16 arithmetic on a GPU "
            "can overflow or underflow where this did not: see the FP16 range analysis (predicted)")


def annotate(accuracy: Any, analysis: RangeAnalysis | None, candidate_result: Any) -> Any:
    """The accuracy delta with the prediction and the caveat beside the observation (fp16 only)."""
    if accuracy is None or getattr(candidate_result, "precision", None) != "fp16":
        return accuracy
    effective = str(candidate_result.engine.get("effective_precision", candidate_result.precision))
    return replace(accuracy, predicted=analysis.to_json() if analysis is not None else None,
                   caveat=caveat(candidate_result.precision, effective))
