"""The torch backend's engine file: the module converted once, at build, and loaded without converting.

Why: on the H200 a load of three ResNet-50 engines spent 2.4 s in onnx2torch (0.8 s an engine), and a
worker process another 5 s importing onnx2torch (``benchmarks/results/gpu_issue33-H200-2026-12-01``);
with a compare needing 6 loads per batch size, conversion was most of a load's cost. The converted
module is captured by ``torch.export`` (ATen ops, the engine's precision already applied: FP16 weights,
constants and Cast targets, ``follow_precision``) and saved with ``torch.export.save``; a load is
``torch.export.load`` — no onnx2torch, no conversion.

The file is a zip written here (``<stem>.torch.zip``), one artifact the engine store hashes:
- ``model.onnx`` — the pre-passed ONNX graph the module was converted from (what per-layer profiling
  and node labels read: the exported program is flat, onnx2torch's module is one submodule per node);
- ``exported.pt2`` — the ``torch.export`` program, when export succeeded and the exported module's
  outputs matched the converted module's at build (``manifest.json`` says which, and why not);
- ``manifest.json`` — format, how the module is loaded, torch's version, the export's note.

When export fails (data-dependent shapes, an op torch.export cannot trace) the archive holds the ONNX
graph only and every load converts it with onnx2torch, as before; the build says so in one note.
A file that is not a zip is the older artifact (the pre-passed ONNX itself): still loaded.

Fixed shapes (format 2, issue 43): a graph with shape arithmetic (``convert.fixed_shapes``) is folded at
each batch size of the engine, and each batch size gets its own module: ``fixed/b<N>/model.onnx`` (the
folded graph, without the initializers it shares byte for byte with ``model.onnx``: they are named in
the manifest and put back when it is read) and ``fixed/b<N>/exported.pt2`` (its program, exported with
every dim static). The manifest's ``fixed`` lists them (batch, input shapes, members, note); a runner
loads the one whose input shapes it meets (``backends.torch_fixed.FixedShapeModules``), and converts
``model.onnx`` (the unfolded graph) for any other shapes.

No unpickling: ``torch.export.load`` unpickles tensors its archive marks ``use_pickle`` (tensor
subclasses) with ``weights_only=False``; such an archive is refused before it is opened
(``check_no_pickled_tensors``), so loading a crafted engine file runs no code.
"""
from __future__ import annotations

import io
import json
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

from ..errors import BadModel

FORMAT = "trtprof.torch-artifact/2"
READABLE_FORMATS = (FORMAT, "trtprof.torch-artifact/1")  # 1: no fixed-shape modules
ONNX_MEMBER = "model.onnx"
EXPORTED_MEMBER = "exported.pt2"
MANIFEST_MEMBER = "manifest.json"
LOADED_EXPORTED = "torch.export"  # how a load gets the module: the saved program
LOADED_CONVERTED = "onnx2torch"  # or converting the ONNX graph at every load
# The exported module must compute what the converted one does: the same ATen ops in the same order
# give the same numbers up to kernel choice (cuDNN may pick another algorithm per process). Relative
# to the output's scale; fp16's 11-bit mantissa is ~5e-4 per rounding, many roundings deep.
MATCH_TOLERANCE = {"float32": 1e-4, "float16": 2e-2, "bfloat16": 1e-1}
MESSAGE_CHARS = 300  # of an error or note: torch's messages carry multi-line C++ context


@dataclass(frozen=True)
class FixedEntry:
    """One batch size's module of an engine built at fixed shapes: the input shapes it was folded at,
    where its folded graph and its program are in the archive, the initializers its graph shares with
    ``model.onnx`` (stripped from its copy), and its build note."""

    batch: int
    input_shapes: Mapping[str, tuple[int, ...]]
    onnx_member: str
    exported_member: str | None
    shared: tuple[str, ...] = ()
    note: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"batch": self.batch, "input_shapes": {k: list(v) for k, v in self.input_shapes.items()},
                "onnx": self.onnx_member, "exported": self.exported_member, "shared": list(self.shared),
                "note": self.note}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "FixedEntry":
        return cls(batch=int(data["batch"]),
                   input_shapes={str(k): tuple(int(d) for d in v) for k, v in data["input_shapes"].items()},
                   onnx_member=str(data["onnx"]), exported_member=data.get("exported"),
                   shared=tuple(str(n) for n in data.get("shared", ())), note=str(data.get("note", "")))

    @property
    def key(self) -> tuple[tuple[str, tuple[int, ...]], ...]:
        return shapes_key(self.input_shapes)


def shapes_key(shapes: Mapping[str, Any]) -> tuple[tuple[str, tuple[int, ...]], ...]:
    """Input shapes as a hashable key (name order)."""
    return tuple(sorted((str(k), tuple(int(d) for d in v)) for k, v in shapes.items()))


@dataclass(frozen=True)
class FixedModule:
    """What ``write_artifact`` stores for one batch size (``FixedEntry`` plus the bytes)."""

    entry: FixedEntry
    onnx_bytes: bytes
    exported: bytes | None


@dataclass(frozen=True)
class TorchArtifact:
    """What an engine file holds (``read_artifact``); the fixed-shape members are read on demand
    (``read_member``): a load reads the batch size it runs."""

    onnx_bytes: bytes
    exported: bytes | None
    manifest: Mapping[str, Any]
    fixed: tuple[FixedEntry, ...] = ()

    @property
    def loaded_by(self) -> str:
        return LOADED_EXPORTED if self.exported is not None else LOADED_CONVERTED


def fixed_member(batch: int, name: str) -> str:
    return f"fixed/b{int(batch)}/{name}"


def write_artifact(out: Path, onnx_bytes: bytes, exported: bytes | None, manifest: Mapping[str, Any],
                   fixed: Sequence[FixedModule] = ()) -> None:
    """Write the engine file (the store's temp path: it moves it into place and hashes it)."""
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_STORED) as z:
        extra = {"fixed": [f.entry.to_json() for f in fixed]} if fixed else {}
        z.writestr(MANIFEST_MEMBER, json.dumps({"format": FORMAT, **manifest, **extra}, sort_keys=True))
        z.writestr(ONNX_MEMBER, onnx_bytes)
        if exported is not None:
            z.writestr(EXPORTED_MEMBER, exported)
        for f in fixed:
            z.writestr(f.entry.onnx_member, f.onnx_bytes)
            if f.exported is not None and f.entry.exported_member:
                z.writestr(f.entry.exported_member, f.exported)


def read_member(path: Path, name: str) -> bytes:
    """One member of the engine file (a fixed-shape graph or program)."""
    try:
        with zipfile.ZipFile(Path(path)) as z:
            return z.read(name)
    except (OSError, zipfile.BadZipFile, KeyError) as err:
        raise BadModel(f"cannot read {name} from the torch engine: {err}", path=Path(path)) from err


def read_artifact(path: Path) -> TorchArtifact:
    """The engine file's parts; an older artifact (not a zip) is its ONNX graph alone."""
    path = Path(path)
    try:
        if not zipfile.is_zipfile(path):
            return TorchArtifact(path.read_bytes(), None, {"format": "onnx (before torch.export artifacts)"})
        with zipfile.ZipFile(path) as z:
            names = set(z.namelist())
            if ONNX_MEMBER not in names or MANIFEST_MEMBER not in names:
                raise BadModel(f"not a trtprof torch engine (no {ONNX_MEMBER} or {MANIFEST_MEMBER})", path=path)
            manifest = json.loads(z.read(MANIFEST_MEMBER))
            if not isinstance(manifest, dict) or manifest.get("format") not in READABLE_FORMATS:
                raise BadModel(f"unknown torch engine format {str(manifest)[:80]!r} (this trtprof reads "
                               f"{', '.join(READABLE_FORMATS)})", path=path)
            exported = z.read(EXPORTED_MEMBER) if EXPORTED_MEMBER in names else None
            fixed = tuple(FixedEntry.from_json(e) for e in manifest.get("fixed", ()))
            missing = [e.onnx_member for e in fixed if e.onnx_member not in names]
            if missing:
                raise BadModel(f"the torch engine lists {missing[0]} but does not hold it", path=path)
            return TorchArtifact(z.read(ONNX_MEMBER), exported, manifest, fixed)
    except (OSError, zipfile.BadZipFile, ValueError, KeyError, TypeError) as err:
        raise BadModel(f"cannot read the torch engine: {err}", path=path) from err


def check_no_pickled_tensors(exported: bytes, path: Path | None = None) -> None:
    """Refuse a ``torch.export`` archive that would make ``torch.export.load`` unpickle (tensors marked
    ``use_pickle`` are read with ``torch.load(weights_only=False)``, which runs code): read its weight
    and constant configs, the only places that mark it, before torch opens the archive."""
    try:
        with zipfile.ZipFile(io.BytesIO(exported)) as z:
            for name in z.namelist():
                if not name.endswith("_config.json"):
                    continue
                config = json.loads(z.read(name)).get("config", {})
                pickled = [k for k, v in config.items() if not isinstance(v, dict) or v.get("use_pickle") is not False]
                if pickled:
                    raise BadModel(f"the exported program stores {len(pickled)} tensor(s) as pickles "
                                   f"({pickled[0]!r}…); trtprof never unpickles an engine file", path=path)
    except (zipfile.BadZipFile, ValueError, AttributeError) as err:
        raise BadModel(f"the exported program in the torch engine is damaged: {err}", path=path) from err


def strip_shared(graph: Any, base: Any) -> tuple[Any, tuple[str, ...]]:
    """``graph`` without the initializers ``base`` holds under the same name with the same bytes
    (a folded graph keeps the model's weights: stored once, in ``model.onnx``), and their names."""
    own = {init.name: init for init in base.graph.initializer}
    shared, keep = [], []
    for init in graph.graph.initializer:
        other = own.get(init.name)
        if other is not None and other.SerializeToString() == init.SerializeToString():
            shared.append(init.name)
        else:
            keep.append(init)
    if not shared:
        return graph, ()
    stripped = type(graph)()
    stripped.CopyFrom(graph)
    del stripped.graph.initializer[:]
    stripped.graph.initializer.extend(keep)
    return stripped, tuple(shared)


def attach_shared(graph: Any, base: Any, shared: Sequence[str], path: Path | None = None) -> Any:
    """Put back into ``graph`` (in place) the initializers ``strip_shared`` took out, from ``base``."""
    own = {init.name: init for init in base.graph.initializer}
    missing = [name for name in shared if name not in own]
    if missing:
        raise BadModel(f"the torch engine's fixed-shape graph needs {missing[0]!r}, which model.onnx lacks", path=path)
    graph.graph.initializer.extend(own[name] for name in shared)
    return graph


def export_module(torch: Any, module: Any, example: Sequence[Any], dynamic_batch: Sequence[bool],
                  reference: Sequence[Any], dtype_name: str) -> tuple[bytes | None, str]:
    """``torch.export`` of ``module`` at ``example`` inputs (dim 0 dynamic for the inputs marked), saved
    to bytes, checked against ``reference`` (the converted module's outputs on the same inputs):
    (bytes, note) or (None, why not). Any failure is a note, never the build's failure: the ONNX
    graph is kept and loads convert it."""
    batch = torch.export.Dim("batch", min=1)
    shapes = tuple({0: batch} if dyn else None for dyn in dynamic_batch)
    try:
        with torch.inference_mode(False), torch.no_grad():
            program = torch.export.export(module, tuple(example), dynamic_shapes=shapes if any(dynamic_batch) else None)
            buffer = io.BytesIO()
            torch.export.save(program, buffer)
            data = buffer.getvalue()
            got = exported_module(torch, data)(*example)
    except Exception as err:  # noqa: BLE001 - export's failures are many and all mean "convert at load"
        return None, f"torch.export could not capture the module ({type(err).__name__}: {first_line(err)})"
    mismatch = compare_outputs(torch, got, reference, MATCH_TOLERANCE.get(dtype_name, 1e-4))
    if mismatch:
        return None, f"torch.export's module does not compute what onnx2torch's does ({mismatch})"
    return data, "torch.export program saved: loads read it without converting"


def exported_module(torch: Any, data: bytes, path: Path | None = None) -> Any:
    """The module of a saved ``torch.export`` program (checked for pickled tensors first)."""
    check_no_pickled_tensors(data, path)
    return torch.export.load(io.BytesIO(data)).module()


def compare_outputs(torch: Any, got: Any, want: Sequence[Any], tolerance: float) -> str:
    """'' when ``got`` (tensor or sequence) matches ``want`` within ``tolerance`` of each output's
    largest magnitude, else what differs."""
    got_list = [got] if isinstance(got, torch.Tensor) else list(got.values() if isinstance(got, dict) else got)
    if len(got_list) != len(want):
        return f"{len(got_list)} outputs, not {len(want)}"
    for i, (g, w) in enumerate(zip(got_list, want)):
        if tuple(g.shape) != tuple(w.shape) or g.dtype != w.dtype:
            return f"output {i}: {tuple(g.shape)} {g.dtype}, not {tuple(w.shape)} {w.dtype}"
        if not g.is_floating_point():
            if not bool(torch.equal(g, w)):
                return f"output {i}: integer values differ"
            continue
        g64, w64 = g.double(), w.double()
        scale = float(w64.abs().max()) if w64.numel() else 0.0
        err = float((g64 - w64).abs().max()) if w64.numel() else 0.0
        if not err <= tolerance * max(scale, 1e-30):
            return f"output {i}: max |difference| {err:.3g} for a scale of {scale:.3g}"
    return ""


def first_line(err: BaseException) -> str:
    """An exception's message cut to one line (torch's carry multi-line C++ context)."""
    return (str(err).strip().splitlines() or [""])[0][:MESSAGE_CHARS]
