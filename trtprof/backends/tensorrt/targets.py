"""TensorRT-RTX compute-capability targets: ``--compute-capability sm86,sm89|current``.

Why this exists: a TensorRT-RTX plan is built ahead of time, on any machine (no GPU needed), for a
list of GPU architectures; the kernels are compiled for the user's GPU when the plan is loaded. What
the plan was built for decides where it can run, so the normalized target list is part of the cache
key and of the metadata, and ``bench``/``compare`` refuse a machine outside it with one line.

``current`` is resolved here to this GPU's architecture (``sm86`` on an RTX 3090): the same engine as
asking for ``sm86`` by name, so both share one cache entry, and the metadata says which GPU it was.
"""
from __future__ import annotations

import re
from types import ModuleType
from typing import TYPE_CHECKING, Any

from ...errors import BadInput
from ...spec import BuildSpec

if TYPE_CHECKING:
    from .device import DeviceInfo

OPTION = "compute_capability"
CURRENT = "current"
# What TensorRT-RTX 1.7.1 reports for a plan built with its default (no targets set): "Supported
# compute capabilities: 8.0 8.6 8.9 12.0 12.1 >12.0" (its refusal message on an H200, FACTS.md).
DEFAULT_SUPPORTED = ("8.0", "8.6", "8.9", "12.0", "12.1")
DEFAULT_SUPPORTS_NEWER_THAN_CC = (12, 0)  # the ">12.0" of that message (also the runtime's, rtx.py)
DEFAULT_SUPPORTS_NEWER_THAN = "{}.{}".format(*DEFAULT_SUPPORTS_NEWER_THAN_CC)
FP8_MIN_CC = (8, 9)  # FP8 tensor cores: Ada (8.9), Hopper (9.0), Blackwell (10.0, 12.0)
_SM = re.compile(r"^sm_?(\d+)$")


def sm_to_cc(sm: str) -> str:
    """``"sm86"`` → ``"8.6"``, ``"sm120"`` → ``"12.0"``."""
    digits = _SM.match(sm).group(1)  # type: ignore[union-attr]  # callers pass normalized names
    return f"{digits[:-1]}.{digits[-1]}"


def cc_to_sm(cc: str) -> str:
    """``"8.6"`` → ``"sm86"``."""
    major, _, minor = cc.partition(".")
    return f"sm{int(major)}{int(minor or 0)}"


def parse_targets(text: Any) -> tuple[str, ...] | str | None:
    """CLI text → sorted unique ``("sm86", "sm89")``, or ``"current"``, or None (library default)."""
    if text is None or (isinstance(text, str) and not text.strip()):
        return None
    items = [t.strip().lower() for t in (text.split(",") if isinstance(text, str) else list(text)) if str(t).strip()]
    if items == [CURRENT]:
        return CURRENT
    if CURRENT in items:
        raise BadInput("--compute-capability current cannot be combined with other targets")
    out = set()
    for item in items:
        match = _SM.match(item)
        if not match:
            raise BadInput(f"--compute-capability {item!r}: expected smXY (e.g. sm86,sm89,sm120) or current")
        out.add(f"sm{match.group(1)}")
    return tuple(sorted(out, key=lambda s: int(s[2:])))


def normalize_option(value: Any, gpu_cc: str | None) -> str | None:
    """The cache-key form: ``"sm86,sm89"`` or None; ``current`` becomes this GPU's architecture."""
    parsed = parse_targets(value)
    if parsed is None:
        return None
    if parsed == CURRENT:
        if gpu_cc is None:
            raise BadInput("--compute-capability current needs a GPU, and this machine has none "
                           "(name the targets instead, e.g. --compute-capability sm86,sm89)")
        return cc_to_sm(gpu_cc)
    return ",".join(parsed)


def supported_ccs(value: Any) -> tuple[str, ...]:
    """Compute capabilities (``"8.6"``) an engine built with this normalized option runs on."""
    parsed = parse_targets(value)
    if parsed is None:
        return DEFAULT_SUPPORTED
    if parsed == CURRENT:  # pragma: no cover - normalized away before any spec is made
        raise BadInput("--compute-capability current was not resolved")
    return tuple(sm_to_cc(sm) for sm in parsed)


def describe_supported(value: Any) -> str:
    ccs = supported_ccs(value)
    text = ", ".join(ccs)
    if parse_targets(value) is None:
        text += f", >{DEFAULT_SUPPORTS_NEWER_THAN} (the library's portable default)"
    return text


def newer_than_default(gpu: "DeviceInfo") -> bool:
    """The ">12.0" rule: ``gpu`` is newer than every architecture the library names."""
    return gpu.cc_tuple > DEFAULT_SUPPORTS_NEWER_THAN_CC


def can_run(value: Any, gpu: "DeviceInfo") -> bool:
    """Whether an engine built with ``value`` targets ``gpu`` (the library has the last word at load)."""
    if gpu.compute_capability in supported_ccs(value):
        return True
    if parse_targets(value) is None:
        return newer_than_default(gpu)
    return False


def apply_compute_capabilities(config: Any, spec: BuildSpec, trt: ModuleType) -> dict[str, Any]:
    """Set the builder's targets from the spec (normalized already); return their metadata.

    ``config`` is TensorRT-RTX's IBuilderConfig (typed Any: the enterprise stubs mypy checks against
    have no compute-capability API)."""
    value = spec.option(OPTION)
    parsed = parse_targets(value)
    if parsed is None:
        return {"compute_capability_targets": "default", "supported_compute_capabilities": list(DEFAULT_SUPPORTED)}
    if parsed == CURRENT:  # pragma: no cover - normalized away before any spec is made
        raise BadInput("--compute-capability current was not resolved to this GPU")
    members = []
    for sm in parsed:
        member = getattr(trt.ComputeCapability, sm.upper(), None)
        if member is None:
            known = [m.lower() for m in trt.ComputeCapability.__members__ if m.startswith("SM")]
            raise BadInput(f"--compute-capability {sm}: TensorRT-RTX {trt.__version__} cannot target it "
                           f"(it knows {', '.join(known)})")
        members.append(member)
    config.num_compute_capabilities = len(members)
    for index, member in enumerate(members):
        if not config.set_compute_capability(member, index):
            raise BadInput(f"--compute-capability {parsed[index]}: TensorRT-RTX refused the target")
    return {"compute_capability_targets": list(parsed), "supported_compute_capabilities": list(supported_ccs(value))}
