"""trtprof inspect ENGINE [--json] [--profile-layers --batch-size N --iterations N]

TensorRT engines: every layer with its type, precision and tactic, the reformat layers TensorRT
inserted, counts per precision; with ``--profile-layers``, per-layer times from a separate profiled
run (never the latency run). Other backends' engines (and TensorRT engines on a machine without
TensorRT) show what their metadata records, e.g. FP16/FP32 node counts, instead of failing.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from .. import backends
from ..engines.cache import EngineRecord, list_engines
from ..errors import BackendUnavailable, BadInput
from ..layers.table import short_names
from ..util.wording import plural
from . import _common

DEFAULT_PROFILE_ITERATIONS = 20  # per-layer medians settle within a few runs; this is not the latency run


def add_parser(sub) -> None:
    p = sub.add_parser("inspect", help="show an engine's layers, precisions, tactics and per-layer times",
                       description="Show what is inside cached engines: layers with type, precision and "
                                   "tactic (TensorRT), or the build metadata (other backends).")
    p.add_argument("engine", type=Path, help="engine artifact, its metadata JSON, or an engines dir")
    p.add_argument("--json", action="store_true", help="print JSON instead of tables")
    p.add_argument("--profile-layers", action="store_true",
                   help="TensorRT: time each layer in a separate profiled run (IProfiler)")
    p.add_argument("--batch-size", type=_common.batch_size, default=None, help="batch size of the profiled run (default: opt batch)")
    p.add_argument("--iterations", type=_common.profiled_iterations, default=DEFAULT_PROFILE_ITERATIONS,
                   help=f"profiled runs (default {DEFAULT_PROFILE_ITERATIONS})")
    p.add_argument("--seed", type=_common.seed_value, default=0, help="seed of the random inputs of the profiled run")
    p.set_defaults(func=run)


def _stored(record: EngineRecord) -> dict[str, Any]:
    return {
        "engine": str(record.artifact_path),
        "model": record.model,
        "backend": record.backend,
        "precision": record.precision,
        "effective_precision": record.backend_metadata.get("effective_precision", record.precision),
        "environment": record.environment,
        "metadata": record.backend_metadata,
        "notes": record.notes,
    }


def _print_stored(info: dict[str, Any]) -> None:
    print(f"{info['engine']}")
    print(f"  model {info['model']}  backend {info['backend']}  precision {info['precision']}"
          f"  effective {info['effective_precision']}")
    for key, value in sorted(info["metadata"].items()):
        if key in ("fp16_range", "fp16_weights"):  # long; their findings are the notes below (all: --json)
            continue
        text = json.dumps(value, sort_keys=True) if isinstance(value, (dict, list)) else str(value)
        print(f"  {key}: {text}")
    for note in info["notes"]:
        print(f"  note: {note}")


def _inspect_tensorrt(record: EngineRecord, args: argparse.Namespace) -> dict[str, Any]:
    from ..backends.tensorrt.runner import TensorRTRunner
    from ..model.inputs import make_inputs, resolve_shapes

    backend = backends.get(record.backend)
    record.verify()
    runner = backend.load(record.artifact_path, record)
    if not isinstance(runner, TensorRTRunner):  # pragma: no cover - the registry maps tensorrt to it
        raise BadInput(f"backend {backend.name!r} returned {type(runner).__name__}, not a TensorRT runner")
    try:
        result: dict[str, Any] = _stored(record)
        shapes = None
        if args.profile_layers:
            batch = args.batch_size or record.spec.opt_batch
            if not record.spec.min_batch <= batch <= record.spec.max_batch:
                raise BadInput(f"--batch-size {batch} is outside the engine's batch range "
                               f"{record.spec.min_batch}..{record.spec.max_batch}")
            shapes = resolve_shapes(runner.inputs, batch, record.spec.shape_overrides(), model_path=record.model_path)
            runner.prepare(shapes)
        result["inspection"] = runner.inspect().to_json()
        if shapes is not None:
            feeds = make_inputs(runner.inputs, shapes, seed=args.seed)
            result["layer_profile"] = runner.profile_layers(shapes, feeds, args.iterations).to_json()
        return result
    finally:
        runner.close()


INSPECT_NAME_WIDTH = 60  # TensorRT layer names ("conv1 + relu1 + …") shortened to this, kept distinct


def _print_inspection(info: dict[str, Any]) -> None:
    inspection = info["inspection"]
    print(f"{info['engine']}")
    print(f"  model {info['model']}  TensorRT {info['environment'].get('tensorrt_version')}  "
          f"{info['environment'].get('gpu_name')}  precision {info['precision']}")
    print(f"  I/O tensors: {', '.join(inspection['io_tensors'])}")
    names = short_names([layer["name"] for layer in inspection["layers"]], INSPECT_NAME_WIDTH)
    rows = [
        (i, name, layer["type"], layer["precision"] or "?", layer["tactic"][:40], "reformat" if layer["reformat"] else "")
        for i, (layer, name) in enumerate(zip(inspection["layers"], names))
    ]
    print(_common.format_table(("#", "layer", "type", "precision", "tactic", ""), rows))
    counts = ", ".join(f"{k} {v}" for k, v in inspection["counts_by_precision"].items())
    print(f"  {plural(len(rows), 'layer')} ({counts}); {plural(inspection['reformat_layers'], 'reformat layer')}")
    profile = info.get("layer_profile")
    if profile:
        total = profile["total_median_ms"] or 1.0
        layers = sorted(profile["layers"], key=lambda t: -t["median_ms"])
        prow = [(name, f"{t['median_ms']:.4f}", f"{100 * t['median_ms'] / total:.1f}%")
                for t, name in zip(layers, short_names([t["name"] for t in layers], INSPECT_NAME_WIDTH))]
        print(f"\n  per-layer times, batch {profile['batch_size']}, median of {profile['iterations']} profiled runs "
              f"(profiler on: not the latency; see `trtprof bench`)")
        print(_common.format_table(("layer", "median ms", "share"), prow))
        print(f"  sum of layer medians: {profile['total_median_ms']:.4f} ms")


def run(args: argparse.Namespace) -> int:
    records = list_engines(args.engine)
    for record in records:  # like bench, compare and cache ls: an artifact changed since it was built is named
        record.verify()  # CacheCorrupt: exit 2, one line, before anything is printed
    out = []
    for record in records:
        if not backends.capabilities(record.backend).tensorrt_plan:  # the TensorRT inspector reads plans only
            if args.profile_layers:
                raise BadInput(f"--profile-layers needs a TensorRT engine; this one is {record.backend}",
                               path=record.meta_path)
            info = _stored(record)
        else:
            availability = backends.get(record.backend).available()
            if not availability.ok:
                if args.profile_layers:
                    raise BackendUnavailable(f"--profile-layers needs TensorRT and a GPU: {availability.reason}")
                info = _stored(record)
                info["notes"] = [*info["notes"], f"layer detail needs TensorRT and a GPU here: {availability.reason}"]
            else:
                info = _inspect_tensorrt(record, args)
        out.append(info)
        if not args.json:
            (_print_inspection if "inspection" in info else _print_stored)(info)
    if args.json:
        print(json.dumps(out if len(out) != 1 else out[0], indent=2, sort_keys=True, default=str))
    return 0
