"""The modules of a torch engine built at fixed shapes (``backends.torch.build_fixed``), for its runner:
one folded module per batch size, loaded when a runner first meets its shapes (moved out of
``backends.torch`` to keep that module within its length; the conversion it calls is ``torch_module``'s)."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

from ..errors import BadModel, BuildFailed
from ..spec import Precision
from . import torch_artifact
from .torch_module import CHANNELS_LAST, conv_fed_inputs, module_from_proto, onnx_proto
from .torch_artifact import first_line
from .torch_convert import import_torch


class FixedShapeModules:
    """The modules of an engine built at fixed shapes (``build_fixed``; one ``torch_artifact.FixedEntry``
    per batch size), for a runner: ``module_for(shapes)`` loads the module folded at exactly these
    input shapes — its saved ``torch.export`` program, else its folded graph converted — and, for shapes
    the engine was not built at, the unfolded graph (``model.onnx``) converted, as an engine without
    fixed shapes loads. Each is loaded when a runner first meets its shapes (a measurement load runs
    one batch size); the runner keeps one at a time."""

    def __init__(self, artifact: Path, saved: torch_artifact.TorchArtifact, precision: Precision, *, converted: bool,
                 memory_format: str, device: str) -> None:
        self.artifact = Path(artifact)
        self.saved = saved
        self.precision = precision
        self.converted = converted
        self.memory_format = memory_format
        self.device = device
        self.entries = {e.key: e for e in saved.fixed}
        self._base: Any = None
        self.nhwc_inputs = (frozenset(conv_fed_inputs(self.base())) if memory_format == CHANNELS_LAST
                            else frozenset())

    @property
    def batches(self) -> list[int]:
        return sorted(e.batch for e in self.saved.fixed)

    def base(self) -> Any:
        """The unfolded graph (parsed once)."""
        if self._base is None:
            self._base = onnx_proto(self.saved.onnx_bytes, self.artifact)
        return self._base

    def graph(self, entry: torch_artifact.FixedEntry) -> Any:
        """The folded graph of ``entry``, with the initializers it shares with the unfolded one."""
        proto = onnx_proto(torch_artifact.read_member(self.artifact, entry.onnx_member), self.artifact)
        return torch_artifact.attach_shared(proto, self.base(), entry.shared, self.artifact)

    def convert(self, proto: Any, bake: bool, fuse: bool = True) -> Any:
        return module_from_proto(proto, self.precision, converted=self.converted, memory_format=self.memory_format,
                                 device=self.device, bake=bake, fuse=fuse)

    def per_node_module(self, shapes: Mapping[str, Any]) -> Any:
        """The graph for these shapes (folded where the engine has them) converted one submodule per ONNX
        node, ``torch_fuse``'s rewrites left out: what per-layer profiling times."""
        entry = self.entries.get(torch_artifact.shapes_key(shapes))
        if entry is None:
            return self.convert(self.base(), bake=False, fuse=False)
        return self.convert(self.graph(entry), bake=True, fuse=False)

    def module_for(self, shapes: Mapping[str, Any]) -> tuple[Any, str, Any, int | None]:
        """(module, how it was loaded, a converter of the same graph for per-layer profiling or None,
        the batch size it was fixed at or None) for these input shapes."""
        entry = self.entries.get(torch_artifact.shapes_key(shapes))
        if entry is None:
            built = ", ".join(map(str, self.batches))
            try:
                module = self.convert(self.base(), bake=False)
            except BuildFailed as err:  # an If on a size, say: only the folded graphs convert
                raise BadModel(f"this torch engine was built at fixed shapes for batch {built}; the unfolded graph, "
                               f"which other shapes need, does not convert ({err.message}): build it at this "
                               "batch size (--batch-sizes)", path=self.artifact) from err
            why = f"no fixed-shape module for these shapes: the engine has batch {built}"
            return module, f"{torch_artifact.LOADED_CONVERTED} ({why})", None, None

        def from_graph() -> Any:
            return self.convert(self.graph(entry), bake=True)

        if entry.exported_member is None:
            return from_graph(), torch_artifact.LOADED_CONVERTED, None, entry.batch
        torch = import_torch()
        try:
            data = torch_artifact.read_member(self.artifact, entry.exported_member)
            module = torch_artifact.exported_module(torch, data, self.artifact).to(self.device)
        except BadModel:
            raise
        except Exception as err:  # noqa: BLE001 - a program this torch cannot read: convert instead, said
            return (from_graph(), f"{torch_artifact.LOADED_CONVERTED} (the saved program did not load: {first_line(err)})",
                    None, entry.batch)
        if self.memory_format == CHANNELS_LAST:
            module = module.to(memory_format=torch.channels_last)
        if self.device == "cuda":
            torch.cuda.synchronize()
        return module, torch_artifact.LOADED_EXPORTED, from_graph, entry.batch
