"""What machine a result came from: recorded in every result file (pyperf: results carry metadata)."""
from __future__ import annotations

import os
import platform
import sys
from importlib import metadata
from typing import Any

from .. import __version__

PACKAGES = ("numpy", "onnx", "onnxruntime", "onnxruntime-gpu", "onnxconverter-common", "torch", "tensorrt",
            "tensorflow", "tensorflow-cpu", "tf2onnx", "onnx2torch", "cuda-python", "cuda-bindings")
# the inference runtimes' packages, whose versions a sweep's environment table shows (sweep.matrix.environments):
# the names pip knows them by, as a result's "packages" records them (tensorrt-rtx is not in PACKAGES: shown only where
# a record lists it)
RUNTIME_PACKAGES = ("onnxruntime", "torch", "tensorrt", "tensorrt-rtx", "cuda-bindings")


def package_versions(names: tuple[str, ...] = PACKAGES) -> dict[str, str]:
    """Installed versions, read from package metadata (no import of the packages themselves)."""
    out = {}
    for name in names:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return out


def cpu_name() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def host() -> dict[str, Any]:
    return {
        "hostname": platform.node(),
        "platform": platform.platform(),
        "python": sys.version.split()[0],
        "cpu": cpu_name(),
        "cpu_count": os.cpu_count(),
        "trtprof": __version__,
    }


def collect() -> dict[str, Any]:
    """Host, package versions and, when NVML answers, the GPUs (name, driver, clocks)."""
    env: dict[str, Any] = {"host": host(), "packages": package_versions()}
    try:
        from .nvml import describe_gpus
    except ImportError:
        describe_gpus = None  # type: ignore[assignment]
    env["gpus"] = describe_gpus() if describe_gpus is not None else []
    return env
