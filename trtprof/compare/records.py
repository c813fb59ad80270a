"""Which engines a comparison measures: arm labels, one engine per precision from an engines dir
(``select_records``), or a model's engines found or built (``resolve_records``)."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Sequence

from ..builder.pipeline import RUNNER_OPTIONS, BuildSettings, build_model_engines, load_model, open_model
from ..engines.cache import EngineRecord, list_engines
from ..errors import BadInput, TrtprofError
from ..model.onnx_model import OnnxModel


def arm_labels(precisions: Sequence[Any]) -> list[str]:
    """Labels of the arms: the precision, with ``#2``, ``#3`` … when one repeats (A/A: fp32, fp32#2)."""
    seen: dict[str, int] = {}
    labels = []
    for p in precisions:
        name = str(p)
        seen[name] = seen.get(name, 0) + 1
        labels.append(name if seen[name] == 1 else f"{name}#{seen[name]}")
    return labels


def likely_records(path: Any, precisions: Sequence[Any], engines_dir: Any,
                   backend: str) -> dict[str, EngineRecord] | None:
    """The engines ``resolve_records`` will most likely find for the ONNX file ``path`` in ``engines_dir``, by arm
    label, read without parsing the model: per precision the one engine of ``backend`` built from these very bytes
    (the file's sha256). None where there is no such guess: another kind of path, ``auto``, no engines dir, a
    precision with none or several such engines. A guess only: life 0's worker starts loading them while the
    model is read and the cache looked up, and is used only where they are what the lookup found
    (``measure.workers.engines_identity``)."""
    from ..model.onnx_model import sha256_file
    from ..util.files import safe_stem

    path, folder = Path(path), Path(engines_dir)
    if backend == "auto" or path.suffix != ".onnx" or not path.is_file() or not folder.is_dir():
        return None
    # only the entries named after this file and backend (``EngineCache.entry_stem``) are read: a large cache's other
    # records (each up to ~1 MB with its FP16 range analysis) are not parsed for a guess
    metas = list(folder.glob(f"{safe_stem(path.stem)}.*.{backend}.*.json"))
    if not metas:
        return None
    try:
        sha = sha256_file(path)
        records = [r for r in map(EngineRecord.read, metas) if r.spec.model_sha256 == sha and r.backend == backend]
    except (TrtprofError, OSError, ValueError, KeyError):  # an unreadable entry: no guess (the lookup reports it)
        return None
    chosen = {}
    for precision in dict.fromkeys(str(p) for p in precisions):
        matches = [r for r in records if r.precision == precision]
        if len(matches) != 1:
            return None
        chosen[precision] = matches[0]
    return {label: chosen[str(p)] for label, p in zip(arm_labels(precisions), precisions)}


def select_records(records: Sequence[EngineRecord], precisions: Sequence[Any],
                   backend: str = "auto") -> dict[str, EngineRecord]:
    """One engine per precision from an engines dir, in the order of ``precisions`` (first = baseline)."""
    wanted = list(dict.fromkeys(str(p) for p in precisions))  # A/A names one precision twice
    chosen: dict[str, EngineRecord] = {}
    for precision in wanted:
        matches = [r for r in records if r.precision == precision and (backend == "auto" or r.backend == backend)]
        if not matches:
            have = sorted({f"{r.precision}/{r.backend}" for r in records})
            raise BadInput(f"no {precision} engine here (have: {', '.join(have) or 'none'}); build it or pass the model")
        # a torch engine's memory format (--what-if channels-last) makes it another engine: never picked silently
        keys = {(r.model, r.backend + "".join(f"+{v}" for k, v in r.spec.options if k in RUNNER_OPTIONS))
                for r in matches}
        if len(keys) > 1:
            raise BadInput(f"several {precision} engines here ({', '.join(sorted(f'{m}/{b}' for m, b in keys))}); "
                           "narrow with --backend where their backends differ, else keep one per folder (give a "
                           "what-if its own --engines folder)")
        chosen[precision] = max(matches, key=lambda r: r.created)
    models = {r.model_path for r in chosen.values()}
    if len(models) > 1:
        raise BadInput(f"the engines come from different models ({', '.join(sorted(models))})")
    return chosen


def resolve_records(
    path: Any,
    precisions: Sequence[Any],
    batch_sizes: Sequence[int],
    settings: BuildSettings = BuildSettings(),
    *,
    on_built: Callable[[Any], None] | None = None,
    on_source: Callable[[OnnxModel], None] | None = None,
    model: OnnxModel | None = None,
) -> tuple[dict[str, EngineRecord], OnnxModel | None, tuple[int, ...]]:
    """The user's ``path`` (an ONNX or TensorFlow model, or an engines dir) → (precision → record, the ONNX
    model read once or None, batch sizes).

    An engines dir (a folder with engine JSONs, not a TF SavedModel) → its engines of the asked
    precisions (``settings.backend`` narrows them); batch sizes default to those every chosen engine was
    built for; the ONNX source is optional (None when it is gone or cannot be converted). Otherwise the
    model's missing engines are built at ``batch_sizes`` (default 1) with ``settings`` (its engines dir,
    backend, shapes, and the user's inputs, ``settings.data``, for what builds use them: the FP16 range
    analysis and the int8/fp8 calibration), from the model read once (``open_model``; ``model``: the caller's
    ``open_model`` of ``path`` already, not read again). ``on_source`` gets the ONNX model once it is read,
    before anything is built (``build_model_engines``) or loaded."""
    path = Path(path)
    if is_engines_dir(path):
        return engines_dir_records(path, precisions, batch_sizes, settings, on_source)
    precisions = list(dict.fromkeys(precisions))
    sizes = tuple(batch_sizes) or (1,)
    if model is None:  # the front step: read once (a TensorFlow model converted)
        model = open_model(path, precisions, settings)
    outcomes = build_model_engines(model, precisions, sizes, settings=settings, on_done=on_built, on_source=on_source)
    return {o.record.precision: o.record for o in outcomes}, model, sizes


def is_engines_dir(path: Path) -> bool:
    """A folder with engine JSONs that is not a TensorFlow SavedModel: an engines dir, not a model."""
    return path.is_dir() and any(path.glob("*.json")) and not (path / "saved_model.pb").exists()


def engines_dir_records(path: Path, precisions: Sequence[Any], batch_sizes: Sequence[int], settings: BuildSettings,
                        on_source: Callable[[OnnxModel], None] | None
                        ) -> tuple[dict[str, EngineRecord], OnnxModel | None, tuple[int, ...]]:
    """``resolve_records`` for an engines dir: its engines of ``precisions``, the batch sizes, and the ONNX
    model they were built from when it can still be read (None otherwise: it is optional here)."""
    records = select_records(list_engines(path), precisions, settings.backend)
    built = set.intersection(*(set(r.spec.batch_sizes) for r in records.values()))
    sizes = tuple(batch_sizes) or tuple(sorted(built))
    loaded = None
    source = Path(next(iter(records.values())).model_path)
    if source.exists():
        try:  # the engines' source read once (a TensorFlow model: converted, cached in this dir)
            loaded = load_model(source, BuildSettings(engines_dir=path))
        except Exception:  # graph facts and roofline are optional here: a TF source without TF installed
            loaded = None
    if loaded is not None and on_source is not None:
        on_source(loaded)
    return records, loaded, sizes
