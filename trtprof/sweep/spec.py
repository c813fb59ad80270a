"""What a sweep runs: the SPEC file (TOML, or YAML when PyYAML is installed), flags, and the cells.

A SPEC looks like::

    [sweep]
    kind = "compare"                  # "compare", "bench", or ["compare", "bench"]
    backend = "torch"
    precisions = ["fp32", "tf32", "fp16"]   # compare: the first is the baseline
    batch_sizes = [1, 64, 256]
    time_budget_s = 5                 # compare --time-budget-s, per cell
    args = ["--cuda-graph"]           # more flags for every compare/bench cell
    gpu_types = ["H200", "A100"]      # Ray only: run every cell once per GPU type

    [[models]]
    path = "resnet50.onnx"            # relative to the SPEC file
    [[models]]
    path = "conv_elu.onnx"
    batch_sizes = [1, 256]            # any [sweep] key but kind/gpu_types can be set per model
    shape = ["image:1x3x128x128"]

One cell = one model at one batch size: a ``compare`` of every precision (interleaved on one GPU,
which is why the precisions of a compare are never split between cells) or a ``bench`` of every
engine. Batch sizes are split into cells because they are the only axis that can run in parallel
without breaking a comparison, and because they balance the workers (a batch-256 cell is much
longer than a batch-1 one). The engines of a model are built once for the sweep's whole batch list
(one cache key per model × precision × GPU), so every cell of that model reuses them.
"""
from __future__ import annotations

import hashlib
import json
import math
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from .. import backends
from ..util.datafile import MAX_SPEC_BYTES, check_bounded, load_yaml, read_text, safe_name
from ..errors import BadInput, MissingDependency
from ..model.inputs import MAX_BATCH_SIZE, parse_shape_arg
from ..measure.timing import MAX_ITERATIONS
from ..util.bounds import ONE_DAY_S, number_text
from ..spec import Precision

SAFETY_STOP = "the timing loop's safety stop"  # the bounds of the CLI options these fields stand for

KINDS = ("compare", "bench")
MAX_ITEM_CHARS = 4096  # one shape or extra argument; a cell's command line holds a few dozen
MAX_ITEMS = 64  # shapes or extra arguments of one model
MODEL_KEYS = {"path", "backend", "precisions", "batch_sizes", "time_budget_s", "round_iterations",
              "iterations", "shape", "args", "target_ci"}
SWEEP_KEYS = (MODEL_KEYS - {"path"}) | {"kind", "gpu_types", "engines", "models"}


@dataclass(frozen=True)
class ModelPlan:
    """One model's settings after the sweep defaults were applied."""

    path: str  # absolute
    backend: str = "auto"
    precisions: tuple[str, ...] = ("fp32", "fp16")
    batch_sizes: tuple[int, ...] = (1,)
    time_budget_s: float | None = None
    round_iterations: int | None = None
    iterations: int | None = None  # bench cells
    target_ci: float | None = None
    shape: tuple[str, ...] = ()
    args: tuple[str, ...] = ()

    @property
    def stem(self) -> str:
        return Path(self.path).stem


@dataclass(frozen=True)
class Cell:
    """One unit of work: one process, one GPU (or one core set), one result JSON."""

    kind: str  # "compare" | "bench"
    model: ModelPlan
    batch_size: int
    engines_root: str  # absolute; the model's engines live in engines_root/<model_dir>
    gpu_type: str | None = None  # Ray: the accelerator type this copy must run on

    @property
    def engines_dir(self) -> str:
        """A folder per model and backend: ``compare ENGINES_DIR`` wants engines of one model."""
        digest = hashlib.sha256(self.model.path.encode()).hexdigest()[:8]
        return str(Path(self.engines_root) / f"{self.model.stem}-{self.model.backend}-{digest}")

    @property
    def id(self) -> str:
        """Stable across runs of the same spec (``--resume`` matches on it)."""
        payload = {"kind": self.kind, "model": model_json(self.model), "batch": self.batch_size,
                   "gpu_type": self.gpu_type}
        return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:12]

    @property
    def name(self) -> str:
        gpu = f" on {self.gpu_type}" if self.gpu_type else ""
        return f"{self.model.stem} {self.kind} batch {self.batch_size}{gpu}"

    def build_argv(self) -> list[str]:
        """``trtprof build``: every precision of the model at every batch size of the sweep, so the
        build is identical for all cells of the model and the cache (with its lock) serves it once."""
        m = self.model
        argv = ["build", m.path, *(f"--{p}" for p in m.precisions), "--batch-sizes", ",".join(map(str, m.batch_sizes)),
                "--engines", self.engines_dir, "--backend", m.backend]
        for s in m.shape:
            argv += ["--shape", s]
        return argv

    def run_argv(self, out: str) -> list[str]:
        m = self.model
        argv = [self.kind, self.engines_dir, "--batch-sizes", str(self.batch_size), "--out", out]
        for s in m.shape:
            argv += ["--shape", s]
        if self.kind == "compare":
            argv += ["--precisions", ",".join(m.precisions), "--backend", m.backend]
            if m.time_budget_s is not None:
                argv += ["--time-budget-s", f"{m.time_budget_s:g}"]
            if m.round_iterations is not None:
                argv += ["--round-iterations", str(m.round_iterations)]
            if m.target_ci is not None:
                argv += ["--target-ci", f"{m.target_ci:g}"]
        elif m.iterations is not None:
            argv += ["--iterations", str(m.iterations)]
        return argv + list(m.args)

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "name": self.name, "kind": self.kind, "model": self.model.stem,
                "model_path": self.model.path, "backend": self.model.backend,
                "precisions": list(self.model.precisions), "batch_size": self.batch_size,
                "gpu_type_wanted": self.gpu_type, "engines_dir": self.engines_dir}


def model_json(m: ModelPlan) -> dict[str, Any]:
    return {k: (list(v) if isinstance(v, tuple) else v) for k, v in m.__dict__.items()}


@dataclass(frozen=True)
class SweepSpec:
    models: tuple[ModelPlan, ...]
    kinds: tuple[str, ...] = ("compare",)
    engines: str = "engines"
    gpu_types: tuple[str, ...] = ()
    source: str | None = None  # the SPEC file, when there was one

    def cells(self) -> list[Cell]:
        """Cells, largest batch first (models alternating within a batch size).

        Why: workers take cells in this order, and the long cells should not come last. Batch size is
        the best proxy for a cell's length known before measuring (on two H200s the batch-256 cells
        took the longest, 17–28 s against 15–20 s at batch 1, mostly process start and warmup). With
        the longest cells first, the last cells to finish are short ones (LPT scheduling)."""
        cells = [(-b, i, Cell(kind, m, b, self.engines, gpu))
                 for i, m in enumerate(self.models) for kind in self.kinds for b in m.batch_sizes
                 for gpu in (self.gpu_types or (None,))]
        return [c for _, _, c in sorted(cells, key=lambda t: (t[0], t[1]))]


def read_spec_file(path: Path) -> dict[str, Any]:
    """The SPEC as a dict: TOML (stdlib tomllib, or tomli on 3.10), or YAML with PyYAML."""
    path = Path(path)
    if not path.is_file():
        raise BadInput("no such sweep spec file", path=path)
    text = read_text(path, MAX_SPEC_BYTES, "sweep spec")
    if path.suffix in (".yaml", ".yml"):
        try:
            import yaml  # type: ignore[import-untyped]  # noqa: F401
        except ImportError as err:
            raise MissingDependency("PyYAML", None, why="YAML sweep specs; TOML needs nothing") from err
        data = load_yaml(text, path)
    else:
        if sys.version_info >= (3, 11):
            import tomllib
        else:  # pragma: no cover - Python 3.10
            try:
                import tomli as tomllib
            except ImportError as err:
                raise MissingDependency("tomli", None, why="TOML on Python 3.10") from err
        try:
            data = tomllib.loads(text)
        except RecursionError as err:
            raise BadInput("TOML nested too deeply", path=path) from err
        except tomllib.TOMLDecodeError as err:
            raise BadInput(f"not valid TOML ({err})", path=path) from err
        check_bounded(data, str(path))
    if not isinstance(data, dict):
        raise BadInput("a sweep spec must be a table with [sweep] and [[models]]", path=path)
    return data


def _as_list(value: Any, what: str, where: str) -> list[Any]:
    if isinstance(value, str):
        return [v.strip() for v in value.split(",") if v.strip()]
    if isinstance(value, (list, tuple)):
        return list(value)
    if isinstance(value, int) and not isinstance(value, bool):
        return [value]
    raise BadInput(f"{where}: {what} must be a list or a comma-separated string, not {type(value).__name__}")


def _strings(value: Any, what: str, where: str, *, split: bool = True) -> tuple[str, ...]:
    """A list of strings (or one comma-separated string), each at most MAX_ITEM_CHARS, at most MAX_ITEMS."""
    items = _as_list(value, what, where) if split or not isinstance(value, str) else [value]
    if len(items) > MAX_ITEMS:
        raise BadInput(f"{where}: {what} has {len(items)} items, more than {MAX_ITEMS}")
    for i, item in enumerate(items):
        if not isinstance(item, str):
            raise BadInput(f"{where}: {what}[{i}] must be a string, not {type(item).__name__}")
        if len(item) > MAX_ITEM_CHARS:
            raise BadInput(f"{where}: {what}[{i}] is {len(item)} characters, more than {MAX_ITEM_CHARS}")
    return tuple(items)


def _batch_sizes(value: Any, where: str) -> tuple[int, ...]:
    """Integers 1..MAX_BATCH_SIZE (or digit strings): ``true`` or ``1.9`` is refused, not read as 1."""
    items = _as_list(value, "batch_sizes", where)
    sizes = []
    for item in items:
        if isinstance(item, str) and item.strip().isdigit():
            item = int(item)
        if isinstance(item, bool) or not isinstance(item, int) or not 1 <= item <= MAX_BATCH_SIZE:
            raise BadInput(f"{where}: batch_sizes: {str(item)[:40]!r} is not an integer from 1 to {MAX_BATCH_SIZE}")
        sizes.append(item)
    if not sizes:
        raise BadInput(f"{where}: batch_sizes must be positive integers")
    return tuple(sorted(set(sizes)))


def _positive(merged: Mapping[str, Any], key: str, kind: type, where: str, most: tuple[float, str, bool]) -> Any:
    """A finite number > 0 of ``kind`` (an int field refuses 2.5 and ``true``) and at most ``most`` (the
    bound of the CLI option it stands for: (value, why, whether the value itself is excluded)), or None
    when unset."""
    value = merged.get(key)
    if value is None:
        return None
    ok = not isinstance(value, bool) and (isinstance(value, int) if kind is int else isinstance(value, (int, float)))
    if not ok:
        raise BadInput(f"{where}: {key} must be {'an integer' if kind is int else 'a number'}, not {str(value)[:40]!r}")
    if not math.isfinite(value) or value <= 0:
        raise BadInput(f"{where}: {key} must be a finite number > 0, not {value!r}")
    high, why, excluded = most
    if value > high or (excluded and value == high):
        raise BadInput(f"{where}: {key} must be {'below' if excluded else 'at most'} {number_text(high)} ({why}), not "
                       f"{str(value)[:40]}")
    return kind(value)


def _backend(value: Any, where: str) -> str:
    """A registered backend name (or auto), checked before it names any folder."""
    if value not in ("auto", *backends.names()):
        raise BadInput(f"{where}: backend {str(value)[:80]!r} is not one of auto, {', '.join(backends.names())}")
    return str(value)


def _model_plan(entry: Mapping[str, Any], defaults: Mapping[str, Any], base: Path, where: str) -> ModelPlan:
    unknown = set(entry) - MODEL_KEYS
    if unknown:
        raise BadInput(f"{where}: unknown key(s) {', '.join(sorted(unknown))} (known: {', '.join(sorted(MODEL_KEYS))})")
    merged = {**defaults, **entry}
    if not isinstance(merged.get("path"), str) or not merged["path"]:
        raise BadInput(f"{where}: a model needs a path (a string)")
    path = Path(merged["path"]).expanduser()
    path = path if path.is_absolute() else base / path
    if not path.exists():
        raise BadInput(f"{where}: model not found", path=path)
    if path.is_file() and path.suffix.lower() == ".onnx":  # empty, truncated, not ONNX: one line before any cell
        from ..model.onnx_model import load_onnx

        load_onnx(path, weights=False)
    precisions = tuple(dict.fromkeys(Precision.parse(p).value for p in _strings(merged.get("precisions", "fp32,fp16"),
                                                                                 "precisions", where)))
    shape = _strings(merged.get("shape", []), "shape", where)
    for s in shape:
        try:
            parse_shape_arg(s)
        except BadInput as err:
            raise BadInput(f"{where}: shape: {err.message}") from err
    return ModelPlan(
        path=str(path.resolve()), backend=_backend(merged.get("backend", "auto"), where), precisions=precisions,
        batch_sizes=_batch_sizes(merged.get("batch_sizes", [1]), where),
        time_budget_s=_positive(merged, "time_budget_s", float, where, (ONE_DAY_S, "a day", False)),
        round_iterations=_positive(merged, "round_iterations", int, where, (MAX_ITERATIONS, SAFETY_STOP, False)),
        iterations=_positive(merged, "iterations", int, where, (MAX_ITERATIONS, SAFETY_STOP, False)),
        target_ci=_positive(merged, "target_ci", float, where, (1, "a fraction of the speedup", True)), shape=shape,
        args=_extra_args(merged.get("args"), where),
    )


def _extra_args(value: Any, where: str) -> tuple[str, ...]:
    """``args = ["--cuda-graph"]`` or ``args = "--cuda-graph --no-copies"`` (split like a shell)."""
    import shlex

    if value is None:
        return ()
    if isinstance(value, str):
        try:
            return _strings(shlex.split(_strings(value, "args", where, split=False)[0]), "args", where)
        except ValueError as err:  # an unclosed quote
            raise BadInput(f"{where}: args: {err}") from err
    if isinstance(value, (list, tuple)):
        return _strings(list(value), "args", where)
    raise BadInput(f"{where}: args must be a list of flags or one string")


def make_spec(data: Mapping[str, Any], *, base: Path, overrides: Mapping[str, Any] | None = None,
              source: str | None = None) -> SweepSpec:
    """A SweepSpec from the SPEC's dict (or an empty one) and flag overrides (flags win)."""
    where = source or "sweep"
    unknown_top = set(data) - {"sweep", "models"}
    if unknown_top:
        raise BadInput(f"{where}: unknown section(s) {', '.join(sorted(unknown_top))} (use [sweep] and [[models]])")
    if not isinstance(data.get("sweep") or {}, Mapping):
        raise BadInput(f"{where}: [sweep] must be a table, not {type(data.get('sweep')).__name__}")
    if not isinstance(data.get("models") or [], list):
        raise BadInput(f"{where}: models must be a list of [[models]] tables, not {type(data.get('models')).__name__}")
    sweep = dict(data.get("sweep") or {})
    unknown = set(sweep) - SWEEP_KEYS
    if unknown:
        raise BadInput(f"{where}: unknown [sweep] key(s) {', '.join(sorted(unknown))}")
    sweep.update({k: v for k, v in (overrides or {}).items() if v is not None})
    entries = list(data.get("models") or [])
    if "models" in sweep:  # the --models flag (or models = [...] under [sweep]): paths only
        entries = [{"path": p} for p in _as_list(sweep.pop("models"), "models", where)]
    if not entries:
        raise BadInput(f"{where}: no models (give [[models]] entries with a path, or --models A.onnx,B.onnx)")
    kinds = tuple(dict.fromkeys(_strings(sweep.pop("kind", "compare"), "kind", where)))
    bad = [k for k in kinds if k not in KINDS]
    if bad:
        raise BadInput(f"{where}: kind {bad[0]!r} is not one of {', '.join(KINDS)}")
    gpu_types = tuple(safe_name(g, f"{where}: gpu_types") for g in _strings(sweep.pop("gpu_types", []), "gpu_types", where))
    engines_text = sweep.pop("engines", "engines")
    if not isinstance(engines_text, (str, Path)) or not str(engines_text):
        raise BadInput(f"{where}: engines must be a folder path (a string)")
    engines = Path(engines_text).expanduser()
    engines = engines if engines.is_absolute() else base / engines
    models = []
    for i, entry in enumerate(entries):
        if not isinstance(entry, Mapping):
            raise BadInput(f"{where}: models[{i}] must be a table with a path")
        models.append(_model_plan(entry, sweep, base, f"{where}: models[{i}]"))
    models = list(dict.fromkeys(models))  # mlp.onnx and ./mlp.onnx: one canonical path, one set of cells
    if "compare" in kinds:
        for m in models:
            if len(m.precisions) < 2:
                raise BadInput(f"{where}: {m.stem}: compare needs a baseline and a candidate precision, e.g. fp32,fp16")
    return SweepSpec(models=tuple(models), kinds=kinds, engines=str(engines.resolve()), gpu_types=gpu_types,
                     source=source)


def load_spec(path: Path | None, overrides: Mapping[str, Any] | None = None) -> SweepSpec:
    if path is None:
        return make_spec({}, base=Path.cwd(), overrides=overrides)
    data = read_spec_file(path)
    return make_spec(data, base=Path(path).resolve().parent, overrides=overrides, source=str(path))


