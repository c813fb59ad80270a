"""The user's own inputs (``--inputs PATH``) instead of seeded random normals.

A ResNet fed N(0, 1) noise has nothing like its real activation ranges: accuracy and the FP16 range
analysis measured on noise say little about the user's data (trtexec takes ``--loadInputs``,
Polygraphy ``--load-inputs`` and data-loader scripts). Three forms, all giving arrays by input name
whose leading dimension is the sample:

* ``data.npz``: one array per input name;
* a directory of ``NAME.npy`` files;
* ``loader.py:fn``: a Python function (no arguments) returning or yielding feed dicts, as
  Polygraphy's data loaders do; the dicts are concatenated along dim 0.

Every form is bounded before it is read (``npyfiles.InputCap``: at most 1,000,000 samples and half the
memory available now): files by their declared sizes, a loader by what it has yielded so far, stopped
(``close``) as soon as it passes the cap, so one that yields forever ends in one line.

Accuracy and the range analysis use every sample, in batches of the size being compared (the last
batch filled up by cycling from the first sample, its extra outputs dropped; compare bounds both by its
time budget: ``compare.accuracy_pass``); timing uses the first batch. Everything is checked against the model before any work: names, dtypes, ranks and fixed dims
(a refusal names the input; exit 2).
"""
from __future__ import annotations

import contextlib
import importlib.util
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Mapping, Sequence

import numpy as np

from ..errors import BadInput
from .npyfiles import InputCap, load_folder, load_npz

RANDOM_INPUTS = "random inputs"


@dataclass(frozen=True)
class InputData:
    """Arrays by input name, samples along dim 0 (``InputData.load``)."""

    source: str
    arrays: Mapping[str, np.ndarray] = field(default_factory=dict)

    @classmethod
    def load(cls, text: str | Path, cap: InputCap | None = None) -> "InputData":
        """``.npz`` file, directory of ``.npy`` files, or ``file.py:function``, within ``cap`` (default:
        ``InputCap.now()``, from the memory available now)."""
        text = str(text)
        path = Path(text)
        cap = InputCap.now() if cap is None else cap
        if path.is_dir():
            return cls(text, _arrays(text, load_folder(path, f"--inputs {text}", cap)))
        if path.suffix == ".npz" and path.exists():
            return cls(text, _arrays(text, load_npz(path, f"--inputs {text}", cap)))
        file, sep, fn = text.rpartition(":")
        if sep and file.endswith(".py"):
            return cls(text, _arrays(text, _from_loader(Path(file), fn, text, cap)))
        if not path.exists():
            raise BadInput(f"--inputs {text}: no such file or directory")
        raise BadInput(f"--inputs {text}: expected an .npz file, a directory of .npy files or file.py:function")

    @property
    def samples(self) -> int:
        return int(next(iter(self.arrays.values())).shape[0])

    def describe(self) -> str:
        return f"inputs {self.source} ({self.samples} samples)"

    def check(self, specs: Sequence[Any], model_path: str | None = None) -> None:
        """Refuse data that cannot feed the model: a missing or unknown name, another dtype kind
        (floats for an integer input), another rank, or a dim the model fixes."""
        names = [s.name for s in specs]
        missing = [n for n in names if n not in self.arrays]
        extra = [n for n in self.arrays if n not in names]
        if missing or extra:
            what = (f"lacks input(s) {', '.join(missing)}" if missing else "") + \
                   ("; " if missing and extra else "") + (f"has unknown name(s) {', '.join(extra)}" if extra else "")
            raise BadInput(f"--inputs {self.source}: {what} (model inputs: {', '.join(names)})", path=model_path)
        for spec in specs:
            arr = self.arrays[spec.name]
            want = np.dtype(spec.dtype)
            if arr.dtype.kind != want.kind and not (want.kind in "iu" and arr.dtype.kind in "iu"):
                raise BadInput(f"--inputs {self.source}: input {spec.name!r} is {arr.dtype}, the model takes {want}",
                               path=model_path)
            if arr.ndim != len(spec.shape):
                raise BadInput(f"--inputs {self.source}: input {spec.name!r} has shape {list(arr.shape)} "
                               f"({arr.ndim} dims); the model takes {list(spec.shape)} (samples first)",
                               path=model_path)
            for i, (got, declared) in enumerate(zip(arr.shape, spec.shape)):
                if i and isinstance(declared, int) and declared != got:
                    raise BadInput(f"--inputs {self.source}: input {spec.name!r} dim {i} is {got}; the model "
                                   f"fixes it to {declared} (shape {list(spec.shape)})", path=model_path)

    def shape_overrides(self) -> dict[str, tuple[int, ...]]:
        """``--shape`` equivalents: each input's shape with dim 0 standing for the batch."""
        return {name: tuple(int(d) for d in a.shape) for name, a in self.arrays.items() if a.ndim}

    def batch(self, batch_size: int, index: int = 0, dtypes: Mapping[str, Any] | None = None) -> dict[str, np.ndarray]:
        """Samples ``index·batch_size`` … as one batch, cycling from the first sample to fill it."""
        rows = (np.arange(batch_size) + index * batch_size) % self.samples
        dtypes = dtypes or {}
        return {name: np.ascontiguousarray(a[rows], dtype=dtypes.get(name, a.dtype)) for name, a in self.arrays.items()}

    def batches(self, batch_size: int, dtypes: Mapping[str, Any] | None = None) -> Iterator[dict[str, np.ndarray]]:
        for index in range(-(-self.samples // batch_size)):
            yield self.batch(batch_size, index, dtypes)


def _arrays(source: str, arrays: Mapping[str, Any]) -> dict[str, np.ndarray]:
    """Check what was read: at least one array, each with a leading sample dim, all the same count."""
    if not arrays:
        raise BadInput(f"--inputs {source}: holds no arrays")
    out = {str(k): np.asarray(v) for k, v in arrays.items()}
    counts = {k: (v.shape[0] if v.ndim else None) for k, v in out.items()}
    scalar = [k for k, n in counts.items() if n is None]
    if scalar:
        raise BadInput(f"--inputs {source}: input {scalar[0]!r} is a scalar; arrays need a leading sample dim")
    if min(counts.values()) == 0:  # type: ignore[type-var]
        raise BadInput(f"--inputs {source}: input {min(counts, key=counts.get)!r} has no samples")  # type: ignore[arg-type]
    if len(set(counts.values())) > 1:
        raise BadInput(f"--inputs {source}: inputs have different sample counts "
                       f"({', '.join(f'{k} {n}' for k, n in counts.items())})")
    for name, arr in out.items():  # all NaN/inf: every output is NaN in both arms, "cosine 1.0 (exact)" says nothing
        if arr.dtype.kind in "fc" and not np.isfinite(arr).any():
            raise BadInput(f"--inputs {source}: input {name!r} has no finite value (all NaN or inf): nothing to "
                           "measure accuracy or ranges on")
    return out


def _from_loader(file: Path, fn: str, source: str, cap: InputCap) -> dict[str, np.ndarray]:
    """Run ``fn`` of ``file`` (a function returning or yielding feed dicts); concatenate the dicts."""
    if not file.is_file():
        raise BadInput(f"--inputs {source}: no such file {file}")
    spec = importlib.util.spec_from_file_location(f"trtprof_user_loader_{abs(hash(str(file.resolve())))}", file)
    if spec is None or spec.loader is None:
        raise BadInput(f"--inputs {source}: cannot import {file}")
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
        func = getattr(module, fn, None)
        if not callable(func):
            raise BadInput(f"--inputs {source}: {file} has no function {fn!r}")
        produced = func()
        feeds = [produced] if isinstance(produced, Mapping) else _bounded_feeds(produced, source, cap)
    except BadInput:
        raise
    except SystemExit as err:  # sys.exit(0) in a loader must not end trtprof with 0 and nothing done
        raise BadInput(f"--inputs {source}: the data loader called sys.exit({err.code!r}) instead of returning "
                       "feed dicts") from err
    except (Exception, GeneratorExit) as err:  # noqa: BLE001 - the user's code: any error is theirs, one line
        raise BadInput(f"--inputs {source}: the data loader failed: {type(err).__name__}: {err}") from err
    if not feeds or not all(isinstance(f, Mapping) for f in feeds):
        raise BadInput(f"--inputs {source}: {fn}() must return or yield dicts of input name → array")
    names = list(feeds[0])
    if any(list(f) != names and set(f) != set(names) for f in feeds):
        raise BadInput(f"--inputs {source}: the feed dicts name different inputs")
    try:
        return {n: np.concatenate([np.asarray(f[n]) for f in feeds], axis=0) for n in names}
    except ValueError as err:
        raise BadInput(f"--inputs {source}: the feed dicts cannot be stacked along dim 0 ({err})") from err


def _bounded_feeds(produced: Any, source: str, cap: InputCap) -> list[Any]:
    """The feed dicts of an iterable (a generator, a list), taken one at a time and counted: past
    ``cap``'s samples or bytes the iterable is closed and the loader refused, never iterated to its end
    (one that yields forever would take the machine)."""
    feeds: list[Any] = []
    samples = nbytes = 0
    iterator = iter(produced)
    try:
        for feed in iterator:
            feeds.append(feed)
            if not isinstance(feed, Mapping):
                break  # refused by the caller, with the others
            arrays = [np.asarray(v) for v in feed.values()]
            samples += int(arrays[0].shape[0]) if arrays and arrays[0].ndim else 1
            nbytes += sum(a.nbytes for a in arrays)
            where, what = f"--inputs {source}", "the data loader was stopped after yielding"
            cap.check_samples(samples, where, what)
            cap.check_bytes(nbytes, where, what)
    finally:
        close = getattr(iterator, "close", None)
        if close is not None:
            with contextlib.suppress(Exception):  # a generator that misbehaves on close: it is stopped anyway
                close()
    return feeds


def load_inputs(text: str | Path | None) -> InputData | None:
    """``--inputs`` → InputData, or None when not given (random inputs)."""
    return None if text in (None, "") else InputData.load(text)  # type: ignore[arg-type]


def run_all(runner: Any, data: InputData, batch_size: int) -> dict[str, np.ndarray]:
    """Every sample through ``runner`` in batches of ``batch_size``; per output the batches
    concatenated along dim 0 and trimmed to the sample count (an output whose dim 0 is not the batch
    is concatenated flat, fill-up samples included)."""
    dtypes = {s.name: np.dtype(s.dtype) for s in runner.inputs}
    parts: dict[str, list[np.ndarray]] = {}
    for feeds in data.batches(batch_size, dtypes):
        for name, value in runner.infer(feeds).items():  # host-in/host-out: every backend's correctness path
            parts.setdefault(name, []).append(np.asarray(value))
    return {name: join_batches(values, batch_size, data.samples) for name, values in parts.items()}


def join_batches(values: Sequence[np.ndarray], batch_size: int, samples: int) -> np.ndarray:
    """One output's values over the batches: concatenated along dim 0 and trimmed to ``samples`` when dim 0
    is the batch, else flattened and concatenated (fill-up samples included; a rank-0 output too)."""
    if all(v.ndim and v.shape[0] == batch_size for v in values):
        return np.concatenate(values, axis=0)[:samples]
    return np.concatenate([v.ravel() for v in values])
