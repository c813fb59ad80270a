"""Backend registry.

Backends are looked up by name; modules are imported on first use so ``import trtprof`` stays light
(no TensorRT, torch or onnxruntime import until a backend is asked for).

A backend outside this package joins the registry through the ``trtprof.backends`` entry-point group
(``name = "module:Factory"`` in its distribution's entry points) or ``register`` at run time; from then on
every command offers it (``--backend`` choices and help come from ``names()``) and asks it what it can do
through its ``capabilities`` (``backends.base.Capabilities``), never by its name.
"""
from __future__ import annotations

import importlib
from importlib import metadata
from typing import TYPE_CHECKING

from ..errors import BackendUnavailable, BadInput

if TYPE_CHECKING:
    from .base import Backend, Capabilities

ENTRY_POINT_GROUP = "trtprof.backends"

# name -> "module:factory". Order of AUTO_ORDER is the preference of `--backend auto`.
_REGISTRY: dict[str, str] = {
    "tensorrt": "trtprof.backends.tensorrt:TensorRTBackend",
    "tensorrt-rtx": "trtprof.backends.tensorrt.rtx:TensorRTRTXBackend",
    "torch": "trtprof.backends.torch:TorchBackend",
    "onnxruntime-cuda": "trtprof.backends.onnxruntime_cuda:OnnxRuntimeCudaBackend",
    "onnxruntime": "trtprof.backends.onnxruntime:OnnxRuntimeBackend",
}
# the preference of `--backend auto`: TensorRT, then the other GPU runtimes, then ONNX Runtime on the CPU;
# plugins (entry points, register) come after these, in the order they were found
AUTO_ORDER = ("tensorrt", "tensorrt-rtx", "onnxruntime-cuda", "torch", "onnxruntime")
_INSTANCES: dict[str, "Backend"] = {}
_PLUGINS_READ = False


def register(name: str, target: str) -> None:
    """Add a backend ``name`` made by ``target`` ("module:factory"); refused for a name already taken."""
    if name == "auto" or (name in _REGISTRY and _REGISTRY[name] != target):
        raise BadInput(f"backend name {name!r} is taken")
    _REGISTRY[name] = target


def _read_plugins() -> None:
    """The ``trtprof.backends`` entry points of installed distributions, once per process."""
    global _PLUGINS_READ
    if _PLUGINS_READ:
        return
    _PLUGINS_READ = True
    for entry in metadata.entry_points(group=ENTRY_POINT_GROUP):
        if entry.name not in _REGISTRY:
            _REGISTRY[entry.name] = entry.value


def names() -> tuple[str, ...]:
    _read_plugins()
    return tuple(_REGISTRY)


def choices_help(default_note: str = "") -> str:
    """The ``--backend`` help every command shows: the registered names and what ``auto`` picks."""
    order = " → ".join(auto_order())
    return f"auto|{'|'.join(names())} (auto: the first that can run here: {order}){default_note}"


def auto_order() -> tuple[str, ...]:
    return AUTO_ORDER + tuple(n for n in names() if n not in AUTO_ORDER)


def capabilities(name: str) -> "Capabilities":
    """What backend ``name`` can do; the defaults for a name that is no backend here (an imported
    trtexec run, a plugin that is not installed on this machine)."""
    from .base import DEFAULT_CAPABILITIES

    try:
        return get(name).capabilities
    except (BadInput, BackendUnavailable):
        return DEFAULT_CAPABILITIES


def get(name: str) -> "Backend":
    """The backend called ``name`` (not checked for availability)."""
    _read_plugins()
    if name not in _REGISTRY:
        raise BadInput(f"unknown backend {name!r} (choose from auto, {', '.join(_REGISTRY)})")
    if name not in _INSTANCES:
        module_name, _, attr = _REGISTRY[name].partition(":")
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as err:
            if err.name == module_name:
                raise BackendUnavailable(f"backend {name!r} is not part of this trtprof build") from err
            raise
        factory = getattr(module, attr, None)
        if factory is None:
            raise BackendUnavailable(f"backend {name!r}: {module_name} has no {attr}")
        _INSTANCES[name] = factory()
    return _INSTANCES[name]


def available() -> dict[str, str]:
    """Every registered backend with "" when usable here, else the reason it is not."""
    out: dict[str, str] = {}
    for name in names():
        try:
            av = get(name).available()
            out[name] = "" if av.ok else av.reason
        except BackendUnavailable as err:
            out[name] = str(err)
    return out


def resolve(name: str) -> "Backend":
    """``auto`` → the first available in ``auto_order()``; else that backend,
    refusing with its reason when it cannot run here."""
    if name == "auto":
        reasons = []
        for candidate in auto_order():
            try:
                backend = get(candidate)
            except BackendUnavailable as err:
                reasons.append(f"{candidate}: {err}")
                continue
            av = backend.available()
            if av.ok:
                return backend
            reasons.append(f"{candidate}: {av.reason}")
        raise BackendUnavailable("no backend can run here (" + "; ".join(reasons) + ")")
    backend = get(name)
    av = backend.available()
    if not av.ok:
        raise BackendUnavailable(f"backend {name!r} cannot run here: {av.reason}")
    return backend


def resolve_for_build(name: str) -> "Backend":
    """Like ``resolve``, but a named backend that can build where it cannot run (TensorRT-RTX's
    ahead-of-time build needs no GPU: it offers ``buildable()``) is accepted for building. ``auto``
    still chooses by what can run here."""
    if name == "auto":
        return resolve(name)
    backend = get(name)
    av = backend.buildable()
    if not av.ok:
        raise BackendUnavailable(f"backend {name!r} cannot build here: {av.reason}")
    return backend
