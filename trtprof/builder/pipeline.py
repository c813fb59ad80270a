"""`trtprof build` as a library call: model → (convert) → one cached engine per precision."""
from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from .. import backends
from ..convert import fp16range
from ..system import model_memory, preflight
from ..backends.onnxruntime_cuda import LAYOUT_OPTION
from ..backends.torch import MEMORY_FORMAT_OPTION
from ..engines.cache import EngineCache, EngineRecord
from ..util.files import now_iso
from ..convert.quantize import calibration_feeds, quantization_options
from ..errors import BadInput, BadModel
from ..model.inputs import resolve_shapes
from ..model.onnx_model import OnnxModel
from ..spec import BuildSpec, CacheKey, Precision, TensorSpec

DEFAULT_BATCH_SIZES = (1,)
# Build options that only shape an FP16 engine (trtprof.convert.keeplist): kept out of other specs.
FP16_KEEP_OPTIONS = ("layer_precisions", "keep_fp32_ops")
# A backend whose artifact does not depend on the batch sizes asked for (its capabilities say
# ``batch_independent``: ONNX Runtime keeps the ONNX graph with its dynamic batch; PyTorch converts it to
# a module): its cache key leaves the batch set and the TensorRT-only options out, so one engine serves
# every batch set. TensorRT bakes the batch profile into the plan; there an engine whose profile covers
# the request is reused instead. The FP16 keep-lists do change these artifacts (they choose what the
# conversion leaves in FP32): they stay.
# Options the runner applies at load (torch's memory format, ONNX Runtime CUDA's prefer_nhwc): the artifact
# file is the same, what runs is not, so they stay in every key — an NCHW and an NHWC engine of one model
# never share an entry.
# A backend that builds at fixed shapes (``Capabilities.fixed_shapes``: torch) folds a graph with shape
# arithmetic at each batch size (convert.fixed_shapes): that artifact holds one module per batch size, so
# its key keeps the batch set. Whether the graph has such arithmetic is read from the model (a cheap scan,
# ``has_shape_arithmetic``); a graph whose fold then leaves it alone (data-dependent shapes) is keyed by
# its batch sizes all the same — one extra build per batch set, never a wrong engine.
RUNNER_OPTIONS = (MEMORY_FORMAT_OPTION, LAYOUT_OPTION)


def key_spec(spec: BuildSpec, proto: Any = None) -> BuildSpec:
    """The part of ``spec`` that changes the artifact, for the cache key; ``proto`` (the ONNX graph the
    engine is built from, ``OnnxModel.proto``) tells whether a fixed-shape backend folds it at each batch size."""
    caps = backends.capabilities(spec.backend)
    if caps.batch_independent:
        # the calibration (int8/fp8) changes the artifact too; its batch is recorded among its options
        kept = tuple((k, v) for k, v in spec.options
                     if k in FP16_KEEP_OPTIONS or k in RUNNER_OPTIONS or k.startswith("calibration"))
        batches = spec.batch_sizes if caps.fixed_shapes and folds_at_each_batch(spec, proto) else ()
        return dataclasses.replace(spec, batch_sizes=batches, options=kept)
    return spec


def folds_at_each_batch(spec: BuildSpec, proto: Any) -> bool:
    """Does a fixed-shape backend build the graph ``proto`` at each batch size (it has shape arithmetic on a
    dynamic input; fp8's module is rebuilt from the MLP chain, unfolded)? Without a graph, no: the key of
    a batch-independent engine (``build_one`` always passes the graph it builds from)."""
    if spec.precision is Precision.FP8 or proto is None:
        return False
    from ..convert.fixed_shapes import has_shape_arithmetic

    return has_shape_arithmetic(proto)


@dataclass
class BuildOutcome:
    record: EngineRecord
    built: bool  # False: cache hit
    seconds: float  # wall time of this call for this engine (lookup or build)
    model: OnnxModel  # the ONNX model it was built from, read once (compare hands it on)

    @property
    def status(self) -> str:
        return "built" if self.built else "cache hit"


def is_tensorflow_model(path: Path) -> bool:
    """SavedModel dir, Keras file or frozen GraphDef: the inputs `trtprof convert` handles."""
    path = Path(path)
    if path.is_dir():
        return True  # only a SavedModel can be a model directory; convert says why if it is not one
    return path.suffix.lower() in (".keras", ".h5", ".hdf5", ".pb")


def as_onnx(
    path: Path,
    engines_dir: Path,
    *,
    check: bool = True,
    on_convert: Callable[[Any], None] | None = None,
    **convert_options: Any,
) -> Path:
    """``path`` itself when it is ONNX; a TensorFlow model is converted first (cached by content).

    ``on_convert`` receives the ``ConversionResult`` (conversion time, check, cache hit or not)."""
    path = Path(path)
    if not path.exists():
        raise BadModel("no such file or directory", path=path)
    if is_tensorflow_model(path):
        from ..convert.tf.cache import convert_cached_result  # imports TensorFlow lazily, raises MissingDependency

        result = convert_cached_result(path, Path(engines_dir) / "onnx", check=check, **convert_options)
        if on_convert is not None:
            on_convert(result)
        return result.onnx_path
    return path


def key_shapes(inputs: Sequence[TensorSpec], shapes: Mapping[str, tuple[int, ...]] | None) -> dict[str, tuple[int, ...]]:
    """The shape overrides an engine is built and keyed by: only those that fix a dim the model leaves
    open besides the batch, each with its batch dim as 1. Dim 0 never reaches an artifact (every
    use replaces it with the batch size: ``resolve_shapes``), and an override of an input whose every other
    dim the model fixes changes nothing (``resolve_shapes`` refused any that disagrees). So ``--inputs X.npz``
    (its arrays' shapes stand in for ``--shape``, dim 0 its sample count) or ``--shape x:8x3x224x224`` on a
    model fixed at ``[1, 3, 224, 224]`` builds and finds the engine that the same command without them does,
    instead of a twin keyed by a sample count (issue 44)."""
    declared = {spec.name: spec.shape for spec in inputs}
    out = {}
    for name, dims in (shapes or {}).items():
        shape = declared.get(name)
        if shape is None or not dims:
            out[name] = tuple(dims)  # unknown names are refused by resolve_shapes before this is used
            continue
        if all(isinstance(d, int) for d in shape[1:]):
            continue
        out[name] = (1, *dims[1:])
    return out


def check_range_memory(inputs: Sequence[TensorSpec], batch_size: int, shapes: Mapping[str, tuple[int, ...]] | None,
                       onnx_path: Path) -> None:
    """The FP16 range analysis makes the bench's inputs at the smallest batch on the host: refuse one
    whose inputs alone exceed free memory before allocating (the same pre-check as bench)."""
    resolved = resolve_shapes(inputs, batch_size, shapes, model_path=str(onnx_path))
    preflight.check_memory(batch_size, preflight.input_bytes(inputs, resolved))


@dataclass(frozen=True)
class BuildSettings:
    """How to build, as one frozen object instead of a dozen loose keywords (``trtprof build`` fills
    it from its flags; tests and benchmarks name only what they change).

    ``shapes``: input shape overrides (name → shape); ``engines_dir``: the engine cache; ``backend``:
    a backend name or "auto"; ``rebuild``: build even when a cached engine fits; ``options``: backend
    build options (the FP16 keep-lists go into the FP16 spec only); ``check`` and ``convert_options``:
    the TensorFlow conversion's faithfulness check and tf2onnx options; ``range_check``: an FP16
    engine records the FP16 range analysis of the FP32 model in its metadata and notes (on all of the
    user's samples with ``data``, user_inputs.InputData)."""

    shapes: Mapping[str, tuple[int, ...]] | None = None
    engines_dir: Path = Path("engines")
    backend: str = "auto"
    rebuild: bool = False
    options: Mapping[str, Any] | None = None
    check: bool = True
    convert_options: Mapping[str, Any] | None = None
    range_check: bool = True
    data: Any = None


def load_model(path: Path, settings: BuildSettings = BuildSettings(), *,
               on_convert: Callable[[Any], None] | None = None) -> OnnxModel:
    """The user's model file read once: an ONNX file as it is, a TensorFlow model converted first (cached
    by content in ``settings.engines_dir``, with ``settings.check`` and ``settings.convert_options``;
    ``on_convert`` hears it), its ``origin`` then the TensorFlow path the engines are named after."""
    path = Path(path)
    onnx_path = as_onnx(path, Path(settings.engines_dir), check=settings.check, on_convert=on_convert,
                        **(settings.convert_options or {}))
    model = OnnxModel.load(onnx_path)
    return model if onnx_path == path else dataclasses.replace(model, origin=path)


def open_model(path: Path, precisions: Sequence[Precision], settings: BuildSettings = BuildSettings(), *,
               on_convert: Callable[[Any], None] | None = None) -> OnnxModel:
    """The front step of a build from the user's argument: the backend and every precision are checked
    first (a bad backend or precision says so before any file is read), then the file ``path`` becomes the
    ``OnnxModel`` every later step takes (``load_model``: read once, a TensorFlow model converted first;
    ``on_convert`` hears it). ``trtprof build``, compare and fix-fp16 call it, then ``build_model_engines``."""
    _checked(settings, precisions)
    return load_model(path, settings, on_convert=on_convert)


def build_engines(
    path: Path,
    precisions: Sequence[Precision],
    batch_sizes: Sequence[int] = DEFAULT_BATCH_SIZES,
    settings: BuildSettings = BuildSettings(),
    *,
    on_convert: Callable[[Any], None] | None = None,
    on_done: Callable[[BuildOutcome], None] | None = None,
    on_source: Callable[[OnnxModel], None] | None = None,
) -> list[BuildOutcome]:
    """``build_model_engines`` for a caller holding the user's file ``path`` (ONNX or TensorFlow: tests,
    benchmarks, the demo): ``open_model`` (``on_convert`` hears a TensorFlow conversion), then the build
    from that ``OnnxModel`` (``on_done``, ``on_source``: as there)."""
    model = open_model(path, precisions, settings, on_convert=on_convert)
    return build_model_engines(model, precisions, batch_sizes, settings, on_done=on_done, on_source=on_source)


def build_model_engines(
    model: OnnxModel,
    precisions: Sequence[Precision],
    batch_sizes: Sequence[int] = DEFAULT_BATCH_SIZES,
    settings: BuildSettings = BuildSettings(),
    *,
    on_done: Callable[[BuildOutcome], None] | None = None,
    on_source: Callable[[OnnxModel], None] | None = None,
) -> list[BuildOutcome]:
    """Build (or find in the cache) one engine per precision of ``model`` (read once: ``open_model``).

    Everything that can be checked before building is checked first — backend, every precision,
    every batch size against the model's shapes — so a bad request fails before any file is written.
    ``on_done`` hears each engine built or found; ``on_source`` gets the model after those checks and
    before any engine is built or looked up (compare's memory preflight: a compare that cannot fit is
    refused before it builds)."""
    return _build_all(model, _checked(settings, precisions), batch_sizes, settings, on_done, on_source)


def _checked(settings: BuildSettings, precisions: Sequence[Precision]) -> tuple[Any, list[Precision], Any]:
    """(the backend, the precisions without repeats (FP32 when none), its options as it normalizes them),
    every precision checked against the backend."""
    impl = backends.resolve_for_build(settings.backend)
    precisions = list(dict.fromkeys(precisions)) or [Precision.FP32]
    return impl, precisions, _checked_options(impl, settings, precisions)


def _build_all(model: OnnxModel, checked: tuple[Any, list[Precision], Any], batch_sizes: Sequence[int],
               settings: BuildSettings, on_done: Callable[[BuildOutcome], None] | None,
               on_source: Callable[[OnnxModel], None] | None) -> list[BuildOutcome]:
    impl, precisions, options = checked
    info = model.info
    _check_request(model, precisions, batch_sizes, settings, options)
    if on_source is not None:
        on_source(model)
    environment = impl.environment()
    cache = EngineCache(Path(settings.engines_dir))
    outcomes = []
    for precision in precisions:
        spec = BuildSpec.make(
            model_sha256=info.sha256,
            backend=impl.name,
            precision=precision,
            batch_sizes=batch_sizes,
            shapes=key_shapes(info.inputs, settings.shapes),
            options=(dict(options or {}) if precision is Precision.FP16 else
                     {k: v for k, v in (options or {}).items() if k not in FP16_KEEP_OPTIONS})
            | quantization_options(precision, batch=min(batch_sizes), data=settings.data),
        )
        outcome = build_one(impl, cache, environment, spec, model, settings)
        outcomes.append(outcome)
        if on_done is not None:
            on_done(outcome)
    return outcomes


def _checked_options(impl: Any, settings: BuildSettings, precisions: Sequence[Precision]) -> Mapping[str, Any] | None:
    """The backend's options as it normalizes them, after every precision was checked against it."""
    options = settings.options
    normalize = getattr(impl, "normalize_options", None)  # e.g. TensorRT-RTX: --compute-capability current
    if normalize is not None:
        options = normalize(dict(options or {}))
    check_targets = getattr(impl, "check_targets", None)  # TensorRT-RTX: FP8 needs 8.9+ targets
    for precision in precisions:
        impl.check_precision(precision)
        if check_targets is not None:
            check_targets(precision, dict(options or {}))
    return options


def _check_request(model: OnnxModel, precisions: Sequence[Precision], batch_sizes: Sequence[int],
                   settings: BuildSettings, options: Mapping[str, Any] | None) -> None:
    """What can be checked against the model before any engine is built: the user's inputs, every batch
    size's shapes, the FP16 range analysis' memory, FP16-only options without an FP16 build."""
    onnx_path, info = model.path, model.info
    if settings.data is not None:
        settings.data.check(info.inputs, model_path=str(onnx_path))
        preflight.check_data_indices(onnx_path, settings.data, model.proto)  # ids past an embedding: before any build
    for batch in batch_sizes:
        resolve_shapes(info.inputs, batch, settings.shapes, model_path=str(onnx_path))
    if settings.range_check and Precision.FP16 in precisions:
        check_range_memory(info.inputs, min(batch_sizes), settings.shapes, onnx_path)
    keep_options = {k: v for k, v in (options or {}).items() if k in FP16_KEEP_OPTIONS and v is not None}
    if keep_options and Precision.FP16 not in precisions:
        raise BadInput(f"{', '.join('--' + k.replace('_', '-') for k in keep_options)} apply to --fp16 builds only")


def build_one(impl: Any, cache: EngineCache, environment: dict[str, Any], spec: BuildSpec, model: OnnxModel,
              settings: BuildSettings) -> BuildOutcome:
    """One engine: a cached engine whose batch profile covers ``spec`` (TensorRT), else the cache's
    entry for the exact key, else a build (the backend reads ``model.path``: its build takes a file);
    an FP16 build records the FP16 range analysis of ``model``'s graph. The engine is named after the
    user's file (``model.origin``: a TensorFlow model's, else the ONNX file)."""
    onnx_path, info, named = model.path, model.info, model.user_path
    key = CacheKey.derive(key_spec(spec, model.proto), environment)
    started = time.perf_counter()
    covering = (None if settings.rebuild or backends.capabilities(spec.backend).batch_independent
                else cache.find_covering(spec, environment))
    stem_name = named.stem if named.is_file() else named.name
    if covering is not None:
        covering = range_for_these_inputs(as_named(covering, stem_name, named), model, spec, settings)
        return BuildOutcome(record=covering, built=False, seconds=time.perf_counter() - started, model=model)

    def build(tmp: Path) -> EngineRecord:
        t0 = time.perf_counter()
        model_memory.check_build(model_memory.weight_bytes(model.proto, onnx_path.parent),
                                 preflight.available_memory_bytes(), onnx_path.name)  # issue 36: before the build
        quantized = ({"calibration": calibration_feeds(info.inputs, spec, settings.data)}
                     if spec.option("calibration") else {})
        report = impl.build(onnx_path, spec, tmp, **quantized)
        if settings.range_check and spec.precision is Precision.FP16:
            analysis = fp16range.for_build(model, info.inputs, spec.min_batch, spec.shape_overrides(), spec,
                                           data=settings.data)
            report.metadata.update(range_metadata(analysis, settings.data))
            report.notes.extend(analysis.lines())
        return EngineRecord(
            key=key.hexdigest,
            model=stem_name,
            model_path=str(named.resolve()),
            spec=spec,
            environment=environment,
            artifact="",
            artifact_sha256="",
            inputs=info.inputs,
            outputs=info.outputs,
            build_seconds=round(time.perf_counter() - t0, 3),
            created=now_iso(),
            backend_metadata=report.metadata,
            notes=report.notes,
        )

    record, built = cache.get_or_build(
        key, cache.entry_stem(stem_name, spec, key), impl.artifact_suffix, build, rebuild=settings.rebuild
    )
    if not built:  # the engine is the same, the inputs its analysis ran on may not be
        record = range_for_these_inputs(as_named(record, stem_name, named), model, spec, settings)
    return BuildOutcome(record=record, built=built, seconds=time.perf_counter() - started, model=model)


def as_named(record: EngineRecord, stem_name: str, path: Path) -> EngineRecord:
    """A cache hit served for a renamed copy (the user's file ``path``) of the model it was built from (same
    bytes, same key) is reported under this name, in memory (the entry on disk keeps its own): was the first name."""
    if record.model == stem_name:
        return record
    return dataclasses.replace(record, model=stem_name, model_path=str(path.resolve()))


def range_metadata(analysis: Any, data: Any) -> dict[str, Any]:
    """The FP16 range analysis as an engine records it, with the key of the inputs it ran on."""
    return {"fp16_range": analysis.to_json(), "fp16_range_inputs": fp16range.inputs_key(data),
            "fp16_range_lines": analysis.lines()}


def range_for_these_inputs(record: EngineRecord, model: OnnxModel, spec: BuildSpec,
                           settings: BuildSettings) -> EngineRecord:
    """A cached FP16 engine whose range analysis ran on other inputs (another --inputs, or random ones)
    gets the analysis rerun on these, in memory (the cache entry keeps its own): its notes and metadata
    then say what these inputs do, not what earlier ones did."""
    if not settings.range_check or spec.precision is not Precision.FP16 or "fp16_range" not in record.backend_metadata:
        return record
    if record.backend_metadata.get("fp16_range_inputs") == fp16range.inputs_key(settings.data):
        return record
    analysis = fp16range.for_build(model, model.inputs, spec.min_batch, spec.shape_overrides(), spec,
                                   data=settings.data)
    old = record.backend_metadata.get("fp16_range_lines")
    if old is None:  # recorded before the key: its lines are the stored analysis's
        old = fp16range.predicted_lines(record.backend_metadata["fp16_range"], fp16range.FINDINGS_SHOWN,
                                        where="fp16_range", advice=False)
    notes = [n for n in record.notes if n not in old] + analysis.lines()
    return dataclasses.replace(record, backend_metadata={**record.backend_metadata, **range_metadata(analysis, settings.data)},
                   notes=notes)
