"""A/B of any two models, engines or backends, and what-if experiments: the same loop, statistics and
verdicts as ``compare``'s precisions, with a check that the two take the same inputs.

Why the same machinery: "is my change faster?" — padded channels, an optimised graph, another opset,
another backend — is the question compare answers for precisions: two arms measured in independent
loads and interleaved rounds, a speedup with its load-level CI, four verdicts, the accuracy delta
between the two outputs. Only the arms differ: here each arm is (model, backend, precision), so the
engines come from different models and ``compare.select_records``'s one-model rule does not apply.

Two things are checked before any measurement: the arms take the same inputs (names, dtypes, dims;
a dynamic dim matches anything), and produce the same outputs (names) so the accuracy delta means
something; a mismatch is a ``BadInput`` naming it (exit 2). Where only the names differ and the
dtypes and shapes match in order, the pairs are made by position, in one line each: outputs when the
accuracy is compared, inputs by building the second arm from a copy with the first's input names
(``rename_inputs``).
"""
from __future__ import annotations

from dataclasses import replace, dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from . import whatif
from .rename_inputs import pair_inputs
from .report_value import CompareDocument
from .. import backends
from ..backends import resolve_for_build
from ..backends.torch import CHANNELS_LAST, MEMORY_FORMAT_OPTION
from ..builder.pipeline import BuildSettings, build_model_engines, load_model, open_model
from .core import BuildTally, CompareHooks, CompareOptions, compare_records, resolve_records
from ..errors import BadInput, TrtprofError
from ..model.inputs import make_inputs, resolve_shapes
from ..model.onnx_model import OnnxModel
from ..spec import Precision


@dataclass(frozen=True)
class ArmSpec:
    """One side of an A/B: a model (or engines dir) on a backend at a precision, with the build options
    that make it differ from the plain engine (channels-last: torch's ``memory_format``), as sorted pairs."""

    label: str
    model: Path
    backend: str
    precision: str
    options: tuple[tuple[str, Any], ...] = ()
    engines_dir: Path | None = None  # where this arm's engine is built (a what-if's: the what-if area); None: the run's
    # the arm's model already read (a user's ONNX file: ``load_arms``; a what-if's original and changed copy; a
    # renamed copy): checked and built from it, ``model`` not read again
    loaded: OnnxModel | None = field(default=None, compare=False, repr=False)


@dataclass
class AbOutcome:
    """The compare report plus what makes it an A/B (written under ``ab`` in the JSON)."""

    report: Any  # compare.CompareReport
    arms: list[ArmSpec]
    what_if: dict[str, Any] = field(default_factory=dict)

    def document(self) -> CompareDocument:
        """The report's ``CompareDocument`` (sealed first: the budget spent fixed) with the A/B block (``ab``)
        at its end: what the CLI prints and saves."""
        doc = self.report.seal().document()
        ab = {"arms": [{"label": a.label, "model": str(a.model), "backend": a.backend, "precision": a.precision,
                        **({"options": dict(a.options)} if a.options else {}),
                        **({"engines_dir": str(a.engines_dir)} if a.engines_dir is not None else {})}
                       for a in self.arms], **({"what_if": self.what_if} if self.what_if else {})}
        return replace(doc, blocks={**doc.blocks, "ab": ab})

    def to_json(self) -> dict[str, Any]:
        return self.document().to_json()

    def write_json(self, path: Path) -> None:
        self.document().write_json(path)


def ab_arms(models: Sequence[Path], precision: str, backends: Sequence[str] = ()) -> list[ArmSpec]:
    """Two models (one backend), or one model on two backends (``backends``): the arms, labelled so a
    reader knows which is which (file stems; backends names), baseline first."""
    if len(models) == 2 and len(backends) <= 1:
        backend = backends[0] if backends else "auto"
        stems = [m.stem if m.suffix else m.name for m in models]
        labels = stems if stems[0] != stems[1] else [f"A:{stems[0]}", f"B:{stems[1]}"]
        return [ArmSpec(labels[k], models[k], backend, precision) for k in range(2)]
    if len(models) == 1 and len(backends) == 2:
        if backends[0] == backends[1]:
            raise BadInput(f"--backends {','.join(backends)}: name two different backends")
        return [ArmSpec(b, models[0], b, precision) for b in backends]
    raise BadInput("an A/B needs two models (compare A.onnx B.onnx) or one model and --backends X,Y")


def load_arms(arms: Sequence[ArmSpec]) -> list[ArmSpec]:
    """The arms, each whose model is an ONNX file carrying that file read once (``ArmSpec.loaded``; arms of one
    file, two backends', share one ``OnnxModel``): the input pairing, the compatibility check and the build all
    take it. An empty, truncated or non-ONNX ``.onnx`` file is refused here, naming it (``BadModel``), before
    either arm is built (issue 34). What is not an ONNX file (a TensorFlow model, an engines dir) is left to
    ``resolve_records``, as is an arm that already carries its model or has build options (a what-if's)."""
    read: dict[Path, OnnxModel] = {}
    loaded = []
    for arm in arms:
        path = Path(arm.model)
        if arm.loaded is None and not arm.options and path.suffix.lower() == ".onnx" and path.is_file():
            if path not in read:
                read[path] = OnnxModel.load(path)
            arm = replace(arm, loaded=read[path])
        loaded.append(arm)
    return loaded


def resolve_arms(arms: Sequence[ArmSpec], batch_sizes: Sequence[int], *, engines_dir: Path,
                 shapes: Mapping[str, tuple[int, ...]] | None = None,
                 on_built: Callable[[Any], None] | None = None) -> tuple[dict[str, Any], tuple[int, ...], Any]:
    """Build (or find) each arm's engine: label → record, the batch sizes, the baseline's ONNX model
    (``onnx_model.OnnxModel``, read once, or None). An arm that carries its model (``ArmSpec.loaded``: an ONNX
    file's, ``load_arms``; a what-if's) is built from it; arms of one file (a what-if's original and its changed
    arm built with options) share the model its first arm read; the others (TensorFlow, an engines dir) are
    found or built by ``resolve_records``."""
    records: dict[str, Any] = {}
    sizes: tuple[int, ...] = tuple(batch_sizes)
    models: dict[Path, Any] = {}  # the user's file → its OnnxModel, read once
    first = None
    for k, arm in enumerate(arms):
        model: OnnxModel | None
        settings = BuildSettings(shapes=shapes, engines_dir=Path(arm.engines_dir or engines_dir), backend=arm.backend)
        precisions = [Precision.parse(arm.precision)]
        if arm.options or arm.loaded is not None:  # a model read (an ONNX file, a what-if's): no engines dir to search
            arm_sizes = tuple(batch_sizes) or (1,)
            settings = replace(settings, options=dict(arm.options)) if arm.options else settings
            known = arm.loaded or models.get(Path(arm.model))
            model = known if known is not None else open_model(arm.model, precisions, settings)
            outcome, = build_model_engines(model, precisions, arm_sizes, settings, on_done=on_built)
            records[arm.label] = outcome.record
        else:
            found, model, arm_sizes = resolve_records(arm.model, precisions, batch_sizes, settings, on_built=on_built)
            records[arm.label] = found[arm.precision]
        if model is not None:
            models.setdefault(Path(arm.model), model)
        first = model if k == 0 else first
        sizes = tuple(s for s in (sizes or arm_sizes) if s in arm_sizes) if sizes else arm_sizes
    if not sizes:
        raise BadInput("the two arms were built for no common batch size; pass --batch-sizes")
    return records, sizes, first


def io_mismatch(a_label: str, a: Any, b_label: str, b: Any) -> str:
    """The first way two records' (or runners') inputs/outputs differ ("" when they match): input names, dtypes and
    dims (a symbolic dim matches any), then output names."""
    a_in, b_in = {t.name: t for t in a.inputs}, {t.name: t for t in b.inputs}
    if set(a_in) != set(b_in):
        return f"inputs differ: {a_label} takes {sorted(a_in)}, {b_label} takes {sorted(b_in)}"
    for name, ta in a_in.items():
        tb = b_in[name]
        if ta.dtype != tb.dtype:
            return f"input {name!r}: {a_label} takes {ta.dtype}, {b_label} takes {tb.dtype}"
        if len(ta.shape) != len(tb.shape):
            return f"input {name!r}: {a_label} has rank {len(ta.shape)}, {b_label} rank {len(tb.shape)}"
        for k, (da, db) in enumerate(zip(ta.shape, tb.shape)):
            if isinstance(da, int) and isinstance(db, int) and da > 0 and db > 0 and da != db:
                return f"input {name!r} dim {k}: {a_label} {list(ta.shape)} vs {b_label} {list(tb.shape)}"
    a_out, b_out = {t.name for t in a.outputs}, {t.name for t in b.outputs}
    if a_out != b_out and not outputs_by_position(a, b):
        return f"outputs differ: {a_label} gives {sorted(a_out)}, {b_label} gives {sorted(b_out)}"
    return ""


def outputs_by_position(a: Any, b: Any) -> dict[str, str]:
    """{b's output name: a's} when the names differ but the outputs match one to one in order (same
    count, dtype and rank, static dims equal): a model and the same model plus a layer name their
    outputs differently ('r2' vs 'r3'). {} when the names already match or the outputs do not."""
    ao, bo = list(a.outputs), list(b.outputs)
    if [t.name for t in ao] == [t.name for t in bo] or len(ao) != len(bo) or not ao:
        return {}
    for ta, tb in zip(ao, bo):
        if ta.dtype != tb.dtype or len(ta.shape) != len(tb.shape):
            return {}
        if any(isinstance(x, int) and isinstance(y, int) and x > 0 and y > 0 and x != y
               for x, y in zip(ta.shape, tb.shape)):
            return {}
    return {tb.name: ta.name for ta, tb in zip(ao, bo)}


def model_io(path: Path) -> Any:
    """The inputs and outputs an ONNX file declares, read without its weights; None when it is not an ONNX
    file (a SavedModel: converted by the build). An empty, truncated or non-ONNX ``.onnx`` file is refused
    here, naming it (``BadModel``), before the other arm is built (issue 34)."""
    path = Path(path)
    if path.suffix.lower() != ".onnx" or not path.is_file():
        return None
    from ..model.onnx_model import describe, load_onnx

    return describe(load_onnx(path, weights=False), path, sha256="-")


def arm_io(arm: ArmSpec) -> Any:
    """``model_io`` of an arm: the inputs and outputs of the model it carries (``loaded``), else of its file
    (None for what is not an ONNX file: ``load_arms`` read every ONNX file an A/B names)."""
    return arm.loaded.info if arm.loaded is not None else model_io(arm.model)


def check_models_compatible(arms: Sequence[ArmSpec]) -> None:
    """``check_compatible`` on the ONNX models themselves (``arm_io``), before any engine is built or loaded."""
    infos = [(a, arm_io(a)) for a in arms if not a.options]
    known = [(a, i) for a, i in infos if i is not None]
    for (a, ia), (b, ib) in zip(known, known[1:]):
        why = io_mismatch(a.label, ia, b.label, ib)
        if why:
            raise BadInput(f"cannot A/B {a.model} and {b.model}: {why}")


def check_compatible(records: Mapping[str, Any]) -> None:
    """Refuse (exit 2, one line) arms that do not take the same inputs, from their records' input and
    output specs (the model's, as each build recorded them; the ONNX Runtime and torch runners expose
    exactly these, a TensorRT engine may drop an unused input), without loading them: a load here cost 5.9 s on
    the H200 for two 100-layer torch MLPs, on the clock of the time budget, and the accuracy pass loads
    every arm anyway."""
    labels = list(records)
    base = labels[0]
    for other in labels[1:]:
        why = io_mismatch(base, records[base], other, records[other])
        if why:
            raise BadInput(f"cannot A/B {records[base].model_path} and {records[other].model_path}: {why}")


def compare_ab(arms: Sequence[ArmSpec], batch_sizes: Sequence[int], options: CompareOptions = CompareOptions(), *,
               engines_dir: Path, analyse_baseline: bool = False,
               hooks: CompareHooks = CompareHooks()) -> AbOutcome:
    """Resolve, check, then measure the arms through ``compare.compare_records`` (baseline first).

    The roofline and FP16 range analysis read one source graph: with two different models they are
    skipped (one graph's FLOPs would be wrong for the other), with two backends of one model kept.
    ``analyse_baseline``: analyse the baseline's graph anyway (a what-if: the original's; its arms come
    first), the caller drops what does not apply to the changed arm."""
    arms = load_arms(arms)  # each ONNX file read once: paired, checked and built from that OnnxModel
    # inputs that differ only in name: the second arm built from a copy with the first's (rename_inputs)
    arms, paired = pair_inputs(arms, whatif.whatif_dir(Path(engines_dir)), arm_io)
    check_models_compatible(arms)  # before anything is built: a mismatch costs a second, not two builds
    builds = BuildTally(hooks.on_built)
    records, sizes, model = resolve_arms(arms, batch_sizes, engines_dir=engines_dir, shapes=options.shapes,
                                         on_built=builds)
    options = options.leaving_out(builds.seconds)  # engine builds: a one-off, left out of the time budget
    check_compatible(records)
    base = next(iter(records))
    pairs = {label: found for label, r in records.items()
             if label != base and (found := outputs_by_position(records[base], r))}
    if pairs:
        options = replace(options, output_pairs=pairs)
    same_model = len({str(a.model) for a in arms}) == 1
    report = compare_records(records, sizes, options, model=model if same_model or analyse_baseline else None,
                             hooks=hooks)
    report.warnings.extend(paired)
    for label, found in pairs.items():  # one line: what was compared with what
        report.warnings.append(f"outputs paired by position ({label} → {base}): "
                               + ", ".join(f"{b} ↔ {a}" for b, a in found.items())
                               + " (the names differ; dtypes and shapes match)")
    report.model = " vs ".join(dict.fromkeys(r.model for r in records.values()))
    report.backend = " vs ".join(dict.fromkeys(r.backend for r in records.values()))
    if not same_model and not analyse_baseline:
        report.warnings.append("A/B of two models: roofline and FP16 range analysis skipped (they read one graph)")
    return AbOutcome(report, list(arms))


def what_if_experiment(what_if: str) -> Callable[..., AbOutcome]:
    """The function that runs ``--what-if what_if``: ``compare_pad_channels``, ``compare_channels_last``,
    ``compare_nhwc``, ``compare_ort_fusions`` or ``compare_keep_fp32``, each called as ``(path, precision, batch_sizes, options, *,
    engines_dir, backend, hooks)``; an unknown experiment is a ``BadInput`` naming the known ones."""
    if what_if not in whatif.WHAT_IFS:
        raise BadInput(f"--what-if {what_if}: known experiments are {', '.join(whatif.WHAT_IFS)}")
    return {whatif.CHANNELS_LAST: compare_channels_last, whatif.NHWC: compare_nhwc,
            whatif.ORT_FUSIONS: compare_ort_fusions, whatif.KEEP_FP32: compare_keep_fp32}.get(what_if,
                                                                                              compare_pad_channels)


def compare_pad_channels(path: Path, precision: str, batch_sizes: Sequence[int],
                         options: CompareOptions = CompareOptions(), *, engines_dir: Path, backend: str = "auto",
                         hooks: CompareHooks = CompareHooks()) -> AbOutcome:
    """``--what-if pad-channels``: the original against its padded copy (outputs checked identical
    first), at ``precision``; at fp16 the original's fp32 is the baseline, so the line reads
    "fp16 vs fp32 0.76× → padded fp16 vs fp32 …×" — the finding's number and the measured answer."""
    what_if = whatif.PAD_CHANNELS
    source = what_if_model(path, engines_dir)
    area = whatif.whatif_dir(Path(engines_dir))
    change, copy = whatif.pad_channels(source, area / f"{source.path.stem}.{what_if}.onnx")
    padded = copy.path
    if not change.padded:
        raise BadInput(f"{path}: --what-if {what_if}: every Conv/Gemm already has channels in multiples of "
                       f"{whatif.PAD_MULTIPLE} (or none can be padded: {change.skipped}); nothing to measure")
    caught: list[str] = []  # ONNX Runtime's warnings while checking the copy: for the JSON, not the terminal
    identical = whatif.check_identical(source.path, padded, what_if_feeds(source, batch_sizes, options), caught)
    label = f"{precision}+{what_if}"
    arms = original_arms(source, backend, precision)
    arms.append(ArmSpec(label, padded, backend, precision, engines_dir=area, loaded=copy))
    outcome = compare_ab(arms, batch_sizes, options, engines_dir=engines_dir, analyse_baseline=True, hooks=hooks)
    outcome.report.model = source.path.stem
    for c in outcome.report.comparisons:  # the original's FLOPs are not the padded copy's
        if c.candidate == label:
            c.roofline.pop("candidate", None)
    outcome.report.warnings.append(f"{label}: roofline of the changed copy skipped (its FLOPs are not the original's); "
                                   "the FP16 range analysis is the original's")
    outcome.what_if = {"experiment": what_if, "suggested_by": whatif.SUGGESTED_BY[what_if],
                       "changed_model": str(padded), "change": change.to_json(),
                       "outputs_max_rel_diff": identical, "identical_rtol": whatif.IDENTICAL_RTOL,
                       "lines": what_if_lines(outcome.report, what_if, arms), "warnings": caught}
    return outcome


def compare_keep_fp32(path: Path, precision: str, batch_sizes: Sequence[int],
                      options: CompareOptions = CompareOptions(), *, engines_dir: Path, backend: str = "auto",
                      hooks: CompareHooks = CompareHooks()) -> AbOutcome:
    """``--what-if keep-fp32``: the original's fp16 against its fp16 built with the layers that cannot fill tensor
    cores kept in FP32 (``whatif.keep_fp32_targets`` at the smallest batch size; the ``layer_precisions`` build
    option, in the engine's cache key), both against the original's fp32: "fp16 vs fp32 0.33× → fp16+keep-fp32 vs
    fp32 …×". Refused in one line, before anything is built, at a precision other than fp16 and for a model with no
    such layer."""
    from .fix_fp16 import keep_option

    what_if = whatif.KEEP_FP32
    if precision != "fp16":
        raise BadInput(f"--what-if {what_if} changes an fp16 engine (which layers it keeps in FP32); --precision "
                       f"{precision} has none to change: use --precision fp16")
    source = what_if_model(path, engines_dir)
    shapes = what_if_shapes(source, batch_sizes, options)
    targets = whatif.keep_fp32_targets(source, shapes)
    label = f"{precision}+{what_if}"
    option = {"layer_precisions": keep_option(list(targets))}
    arms = original_arms(source, backend, precision)
    arms.append(ArmSpec(label, source.path, backend, precision, tuple(option.items()),
                        engines_dir=whatif.whatif_dir(Path(engines_dir)), loaded=source))
    outcome = compare_ab(arms, batch_sizes, options, engines_dir=engines_dir, analyse_baseline=True, hooks=hooks)
    outcome.report.model = source.path.stem
    outcome.what_if = {"experiment": what_if, "suggested_by": whatif.SUGGESTED_BY[what_if], "changed_model": None,
                       "option": option,
                       "change": {"kept_fp32": targets, "at_shapes": {k: list(v) for k, v in shapes.items()}},
                       "identity_check": "none: the kept layers compute in FP32; the accuracy pass judges the arm "
                                         "against fp32",
                       "lines": what_if_lines(outcome.report, what_if, arms)}
    return outcome


def what_if_model(path: Path, engines_dir: Path) -> OnnxModel:
    """A what-if's original, the user's file ``path`` read once (``load_model``: a TensorFlow model converted
    into ``engines_dir``): its targets, its changed copy, the identity check's inputs and its arms all take
    this ``OnnxModel``. Its engines are named after the ONNX file measured, as its copies are (no ``origin``)."""
    return replace(load_model(Path(path), BuildSettings(engines_dir=Path(engines_dir))), origin=None)


def original_arms(source: OnnxModel, backend: str, precision: str) -> list[ArmSpec]:
    """The original's arms of a what-if: at fp16 its fp32 (the baseline) and its fp16, else ``precision``;
    each carries ``source``, read once."""
    if precision == "fp16":
        return [ArmSpec("fp32", source.path, backend, "fp32", loaded=source),
                ArmSpec("fp16", source.path, backend, "fp16", loaded=source)]
    return [ArmSpec(precision, source.path, backend, precision, loaded=source)]


def what_if_feeds(source: OnnxModel, batch_sizes: Sequence[int], options: CompareOptions) -> dict[str, Any]:
    """The inputs the identity checks run on: the smallest batch size, the run's seed and shapes."""
    return make_inputs(source.inputs, what_if_shapes(source, batch_sizes, options), seed=options.seed)


def what_if_shapes(source: OnnxModel, batch_sizes: Sequence[int], options: CompareOptions) -> dict[str, Any]:
    """The input shapes a what-if's checks and targets are read at: the smallest batch size, the run's shapes."""
    return resolve_shapes(source.inputs, min(batch_sizes or (1,)), options.shapes or {})


def compare_channels_last(path: Path, precision: str, batch_sizes: Sequence[int],
                          options: CompareOptions = CompareOptions(), *, engines_dir: Path, backend: str = "auto",
                          hooks: CompareHooks = CompareHooks()) -> AbOutcome:
    """``--what-if channels-last``: the same model on the torch backend, the changed arm built with the
    ``memory_format`` option (module and Conv-fed 4-D inputs NHWC: cuDNN's NHWC kernels) — a setting
    of the engine, in its cache key and metadata, not a second model file. Refused, before anything is
    built, on another backend ("auto" means torch here), for a model with nothing to change, and when
    torch cannot run (no GPU); the NCHW and NHWC modules' FP32 outputs are checked equal first."""
    what_if = whatif.CHANNELS_LAST
    able = [n for n in backends.names() if backends.capabilities(n).memory_format_option]
    if backend not in (*able, "auto") or not able:
        raise BadInput(f"--what-if {what_if} runs on --backend {' or '.join(able) or '(none installed)'} only (it sets "
                       f"PyTorch's memory format; --backend {backend} has none to set)")
    runtime = able[0] if backend == "auto" else backend
    source = what_if_model(path, engines_dir)
    targets = whatif.channels_last_targets(source)
    resolve_for_build(runtime)  # no GPU here: the one-line "cannot build here", before any build
    identical = whatif.check_channels_last(source, what_if_feeds(source, batch_sizes, options))
    label = f"{precision}+{what_if}"
    arms = original_arms(source, runtime, precision)
    arms.append(ArmSpec(label, source.path, runtime, precision, ((MEMORY_FORMAT_OPTION, CHANNELS_LAST),),
                        engines_dir=whatif.whatif_dir(Path(engines_dir)), loaded=source))
    outcome = compare_ab(arms, batch_sizes, options, engines_dir=engines_dir, analyse_baseline=True, hooks=hooks)
    outcome.report.model = source.path.stem
    outcome.what_if = {"experiment": what_if, "suggested_by": whatif.SUGGESTED_BY[what_if],
                       "changed_model": None, "option": {MEMORY_FORMAT_OPTION: CHANNELS_LAST}, "change": targets,
                       "outputs_max_rel_diff": identical, "identical_rtol": whatif.CHANNELS_LAST_RTOL,
                       "identity_check": "torch runner, fp32 (TF32 off), NCHW vs channels_last, on the GPU",
                       "lines": what_if_lines(outcome.report, what_if, arms)}
    return outcome


def layout_backends() -> dict[str, str]:
    """Backend name → its NHWC layout runner option, for every backend that has one (capabilities)."""
    return {n: option for n in backends.names() if (option := backends.capabilities(n).layout_option)}


def compare_nhwc(path: Path, precision: str, batch_sizes: Sequence[int], options: CompareOptions = CompareOptions(),
                 *, engines_dir: Path, backend: str = "auto", hooks: CompareHooks = CompareHooks()) -> AbOutcome:
    """``--what-if nhwc``: the same engine file on a backend whose capabilities name a ``layout_option``
    (ONNX Runtime's CUDA EP: ``prefer_nhwc``), the changed arm loaded with that option at "1" — a runner
    option in the engine's cache key, as channels-last is torch's. Refused in one line, before anything
    is built, on a backend without the option ("auto" means the first with one), for a model without
    Conv/BatchNorm/pooling nodes, and where the backend cannot run; the two layouts' FP32 outputs are
    checked equal first (``whatif.check_nhwc``)."""
    what_if = whatif.NHWC
    able = layout_backends()
    if backend not in (*able, "auto") or not able:
        raise BadInput(f"--what-if {what_if} runs on --backend {' or '.join(able) or '(none installed)'} only (it sets "
                       f"the runtime's NHWC layout option{', ' + ', '.join(sorted(set(able.values()))) if able else ''}; "
                       f"--backend {backend} has none to set)")
    runtime = next(iter(able)) if backend == "auto" else backend
    option = able[runtime]
    source = what_if_model(path, engines_dir)
    targets = whatif.nhwc_targets(source, option)
    resolve_for_build(runtime)  # no GPU or no CUDA EP here: the one-line "cannot build here", before any build
    caught: list[str] = []
    identical = whatif.check_nhwc(source.path, what_if_feeds(source, batch_sizes, options), option, caught)
    label = f"{precision}+{what_if}"
    arms = original_arms(source, runtime, precision)
    arms.append(ArmSpec(label, source.path, runtime, precision, ((option, whatif.NHWC_ON),),
                        engines_dir=whatif.whatif_dir(Path(engines_dir)), loaded=source))
    outcome = compare_ab(arms, batch_sizes, options, engines_dir=engines_dir, analyse_baseline=True, hooks=hooks)
    outcome.report.model = source.path.stem
    outcome.what_if = {"experiment": what_if, "suggested_by": whatif.SUGGESTED_BY[what_if],
                       "changed_model": None, "option": {option: whatif.NHWC_ON}, "change": targets,
                       "outputs_max_rel_diff": identical, "identical_rtol": whatif.NHWC_RTOL,
                       "identity_check": f"{runtime}, fp32 (TF32 off), {option} 0 vs {whatif.NHWC_ON}",
                       "lines": what_if_lines(outcome.report, what_if, arms), "warnings": caught}
    return outcome


def contrib_op_backends() -> list[str]:
    """The backends that run ONNX Runtime's contrib ops (capabilities), in ``auto``'s order."""
    able = [n for n in backends.names() if backends.capabilities(n).ort_contrib_ops]
    return sorted(able, key=lambda n: backends.auto_order().index(n) if n in backends.auto_order() else len(able))


def first_available(names: Sequence[str]) -> str:
    """The first of ``names`` that can run here (what ``auto`` picks among them); the first when none can
    (``resolve_for_build`` then says why in one line)."""
    for name in names:
        try:
            if backends.get(name).available().ok:
                return name
        except TrtprofError:
            continue
    return names[0]


def compare_ort_fusions(path: Path, precision: str, batch_sizes: Sequence[int],
                        options: CompareOptions = CompareOptions(), *, engines_dir: Path, backend: str = "auto",
                        hooks: CompareHooks = CompareHooks()) -> AbOutcome:
    """``--what-if ort-fusions``: the original against a copy run through ONNX Runtime's transformer optimizer
    (``whatif.ort_fusions``: attention, layer-norm and Gelu patterns fused into ORT's contrib ops), written
    into the what-if area, its outputs checked close to the original's on ORT's CPU provider first. Refused
    in one line, before anything is built: on a backend that does not run ORT's contrib ops ("auto": the
    first of those that can run here), where that backend cannot run, where the optimizer cannot be
    imported, and for a graph in which it fuses nothing. The roofline and FP16 range analysis are the
    original's: the fused copy computes the same products."""
    what_if = whatif.ORT_FUSIONS
    able = contrib_op_backends()
    if backend not in (*able, "auto") or not able:
        raise BadInput(f"--what-if {what_if} runs on --backend {' or '.join(able) or '(none installed)'} only (the "
                       f"fused copy uses ONNX Runtime's contrib ops, com.microsoft; --backend {backend} does not run them)")
    runtime = first_available(able) if backend == "auto" else backend
    resolve_for_build(runtime)  # no GPU for onnxruntime-cuda: its one line, before the optimizer runs
    source = what_if_model(path, engines_dir)
    area = whatif.whatif_dir(Path(engines_dir))
    fused = area / f"{source.path.stem}.{what_if}.onnx"
    change = whatif.ort_fusions(source, fused)
    if not change.fused:
        raise BadInput(f"{path}: --what-if {what_if}: onnxruntime.transformers.optimizer (model type "
                       f"{change.model_type}) fused nothing here (no attention, layer-norm or Gelu pattern it "
                       "knows); nothing to measure")
    caught = list(change.log)  # the optimizer's and ORT's lines: for the JSON, not the terminal
    close = whatif.check_fused(source.path, fused, what_if_feeds(source, batch_sizes, options), caught)
    label = f"{precision}+{what_if}"
    arms = original_arms(source, runtime, precision)
    arms.append(ArmSpec(label, fused, runtime, precision, engines_dir=area))
    outcome = compare_ab(arms, batch_sizes, options, engines_dir=engines_dir, analyse_baseline=True, hooks=hooks)
    outcome.report.model = source.path.stem
    outcome.report.warnings.append(f"{label}: roofline and FP16 range analysis are the original's (the fused copy "
                                   "computes the same products)")
    outcome.what_if = {"experiment": what_if, "suggested_by": whatif.SUGGESTED_BY[what_if],
                       "changed_model": str(fused), "change": change.to_json(),
                       "outputs_max_rel_diff": close, "identical_rtol": whatif.ORT_FUSIONS_RTOL,
                       "identity_check": "onnxruntime CPU provider, fp32, original vs fused copy",
                       "lines": what_if_lines(outcome.report, what_if, arms), "warnings": caught}
    return outcome


def what_if_lines(report: Any, what_if: str, arms: Sequence[ArmSpec]) -> list[str]:
    """Per batch size: "<finding> (raised here | not raised here) → <what-if> measured: A× → B×: <outcome>"
    ("no finding suggested it" for an experiment no rule motivates); the outcome says whether the change
    helped (``what_if_outcome``): a change that makes no difference says the finding is not what holds the model
    back; one that makes it slower says that answer to the finding costs more than it saves (another may help)."""
    rule = whatif.SUGGESTED_BY[what_if]
    original, changed = arms[-2].label, arms[-1].label
    lines = []
    for batch in sorted({c.batch_size for c in report.comparisons}):
        here = {c.candidate: c for c in report.comparisons if c.batch_size == batch}
        raised = any(f.rule == rule for c in here.values() for f in c.diagnosis)
        new = here[changed].speedup
        why = f"{rule} ({'raised here' if raised else 'not raised here'})" if rule else "no finding suggested it"
        head = f"batch {batch}: {why} → {what_if} measured: "
        if original in here:  # fp16: both against the original's fp32
            old = here[original].speedup
            line = head + (f"{original} vs {arms[0].label} {old.estimate:.3f}× → {changed} vs {arms[0].label} "
                           f"{new.estimate:.3f}× [{new.ci_low:.3f}, {new.ci_high:.3f}] ({new.verdict})")
            effect = "faster" if new.ci_low > old.ci_high else "slower" if new.ci_high < old.ci_low else "unclear"
        else:
            line = head + (f"{changed} vs {original} {new.estimate:.3f}× [{new.ci_low:.3f}, {new.ci_high:.3f}] "
                           f"({new.verdict})")
            effect = {"faster": "faster", "slower": "slower", "equivalent": "same"}.get(new.verdict, "unclear")
        lines.append(f"{line}: {what_if_outcome(effect, rule, raised)}")
    return lines


def what_if_outcome(effect: str, rule: str | None, raised: bool) -> str:
    """What the measured change says of the finding that suggested it: ``effect`` is the changed arm against
    the original ("faster", "slower", "same", "unclear": the two intervals overlap or the verdict is open)."""
    cause = f"{rule} " + ("is" if raised else "would be") if rule else None
    if effect == "faster":
        return f"the change helps — {cause} a cause here" if cause else "the change helps"
    if effect == "unclear":
        return "no clear change (the intervals overlap): more loads or --target-ci decide it"
    if effect == "same":
        moved = "the change makes no difference"
        return f"{moved} — {rule} is not what holds it back here" if rule else moved
    # slower: the change removed the cause and cost more than that saved (pad-channels on 3-channel convs multiplies
    # their products), which does not say the cause is absent: another answer to it may still help
    moved = "the change makes it slower"
    return f"{moved} — this answer to {rule} costs more than it saves here" if rule else moved
