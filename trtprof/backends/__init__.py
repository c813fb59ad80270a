"""Backend registry.

Backends are looked up by name; modules are imported on first use so ``import trtprof`` stays light
(no TensorRT, torch or onnxruntime import until a backend is asked for).
"""
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from ..errors import BackendUnavailable, BadInput

if TYPE_CHECKING:
    from .base import Backend

# name -> "module:factory". Order of AUTO_ORDER is the preference of `--backend auto`.
_REGISTRY: dict[str, str] = {
    "tensorrt": "trtprof.backends.tensorrt:TensorRTBackend",
    "tensorrt-rtx": "trtprof.backends.tensorrt.rtx:TensorRTRTXBackend",
    "torch": "trtprof.backends.torch:TorchBackend",
    "onnxruntime": "trtprof.backends.onnxruntime:OnnxRuntimeBackend",
}
AUTO_ORDER = ("tensorrt", "tensorrt-rtx", "torch", "onnxruntime")
_INSTANCES: dict[str, "Backend"] = {}


def names() -> tuple[str, ...]:
    return tuple(_REGISTRY)


def get(name: str) -> "Backend":
    """The backend called ``name`` (not checked for availability)."""
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
    for name in _REGISTRY:
        try:
            av = get(name).available()
            out[name] = "" if av.ok else av.reason
        except BackendUnavailable as err:
            out[name] = str(err)
    return out


def resolve(name: str) -> "Backend":
    """``auto`` → the first available of tensorrt, tensorrt-rtx, torch (CUDA), onnxruntime; else that backend,
    refusing with its reason when it cannot run here."""
    if name == "auto":
        reasons = []
        for candidate in AUTO_ORDER:
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
    check = getattr(backend, "buildable", None)
    av = check() if check is not None else backend.available()
    if not av.ok:
        raise BackendUnavailable(f"backend {name!r} cannot build here: {av.reason}")
    return backend
