"""trtprof profile MODEL_OR_ENGINES: per-layer times per precision, FP16/FP32 ratio, kernels, casts."""
from __future__ import annotations

import argparse
import json
from dataclasses import replace
from pathlib import Path
from typing import Any

from ..errors import BadInput, StaticBatch
from ..schemas import LAYERS
from . import _common, _timeline
from ..util.outputs import LAYERS_JSON


def add_parser(sub) -> None:
    p = sub.add_parser(
        "profile", help="per-layer times per precision: where the time goes and which layers FP16 slows down",
        description="Profile every precision's engine layer by layer (ONNX Runtime session profiling, "
                    "torch.profiler/CUPTI, TensorRT IProfiler) in a separate run from any latency measurement; "
                    "print one table (time per precision, share, FP16/FP32 ratio, tensor-core kernels, casts and "
                    "reformats as their own rows) and the layer-level diagnosis.")
    p.add_argument("model", type=Path, metavar="MODEL_OR_ENGINES",
                   help="ONNX/TensorFlow model (missing engines are built), or an engines dir")
    p.add_argument("--precisions", default="fp32,fp16", metavar="BASE,CAND,…",
                   help="baseline first, then candidates (default fp32,fp16)")
    p.add_argument("--batch-size", type=_common.batch_size, default=None,
                   help="batch size (default: the batch the model fixes, else 1)")
    _common.add_shape_arg(p)
    p.add_argument("--engines", type=Path, default=Path("engines"), help="engine cache dir (default ./engines)")
    _common.add_backend_arg(p)
    p.add_argument("--iterations", type=_common.profiled_iterations, default=None, help="profiled iterations per precision (default 20)")
    p.add_argument("--warmup", type=_common.warmup_count, default=None, help="unprofiled calls first (default 5)")
    p.add_argument("--top", type=_common.table_rows, default=20, help="rows to print, by time (default 20; 0 = all)")
    p.add_argument("--out", type=Path, default=Path("layers.json"), help="JSON output (default layers.json)")
    _common.add_autotune_arg(p)
    _common.add_inputs_arg(p, what="profiled on its first batch")
    p.add_argument("--timeline", action="store_true",
                   help="also record one steady-state iteration per precision (after the profiled runs): kernels/"
                        "nodes per stream or thread on one time axis, idle gaps, casts; written into the JSON, "
                        "as OUT.timeline.png and as the page OUT.timeline.html")
    _timeline.add_trace_args(p, "precision")
    p.add_argument("--cuda-graph", action="store_true",
                   help="the timeline replays a CUDA graph of the engine, as the timing loop does with --cuda-graph "
                        "(torch backend; kernels then carry no ONNX node: a replay runs no Python)")
    p.add_argument("--no-copies", dest="copies", action="store_false",
                   help="the timeline leaves out the host<->device copies (torch backend)")
    p.add_argument("--seed", type=_common.seed_value, default=0, help="seed of the random inputs")
    p.add_argument("--int-range", default="0,100", metavar="LOW,HIGH", help="range of random integer inputs")
    _common.add_common_debug(p)
    _common.add_force_arg(p)
    p.set_defaults(func=run)


# Layer rules whose claims are about FP16 arithmetic layer by layer ("48 layers are slower in fp16"):
# left out for an "fp16" engine that computed in FP32 behind casts.
PER_LAYER_FP16_RULES = frozenset({"fp16_slower_layers", "tensor_core_ineligible"})


def not_computed_as_asked(records) -> dict[str, str]:
    """Arm label → effective precision, for the "fp16" engines that ran FP32 behind casts."""
    from ..system.validity import FP32_BEHIND_CASTS

    return {label: FP32_BEHIND_CASTS for label, r in records.items()
            if str(r.precision) == "fp16" and r.backend_metadata.get("effective_precision") == FP32_BEHIND_CASTS}


def first_backend(records) -> str:
    return str(next(iter(records.values())).backend)


def behind_casts_finding(candidate: str, backend: str) -> dict:
    return {"rule": "fp16_not_fp16", "evidence": {"candidate": candidate, "effective_precision": "fp32+casts"},
            "message": f"the {candidate} engine ({backend}) ran every compute node in FP32 behind inserted casts "
                       "(the CPU has no FP16 kernels for them): its column times FP32 kernels plus casts, so no "
                       "layer here says anything about FP16 arithmetic; profile on a GPU backend for that"}


def _open(args: argparse.Namespace, path: Path, precisions) -> Any:
    """The user's model read once (``open_model``: backend and precisions checked first, a TensorFlow model
    converted), the ``OnnxModel`` the default batch size, the builds and the graph facts take; None for an
    engines dir (its engines' source is read by ``resolve_records``)."""
    from ..builder.pipeline import BuildSettings, open_model
    from ..compare.records import is_engines_dir

    if is_engines_dir(path):
        return None
    return open_model(path, precisions, BuildSettings(engines_dir=Path(args.engines), backend=args.backend))


def _resolve(args: argparse.Namespace, path: Path, precisions, shapes, given_shapes, data,
             model: Any = None) -> tuple[dict, Any]:
    """The engines to profile (built or found) and the model they came from (``model``: the user's file
    already read, ``_open``: each build takes it, the file is not read again)."""
    from ..builder.pipeline import BuildSettings
    from ..compare.records import resolve_records

    settings = BuildSettings(engines_dir=Path(args.engines), backend=args.backend)
    try:
        try:
            records, source, _ = resolve_records(path, precisions, (args.batch_size,),
                                                 replace(settings, shapes=shapes), model=model)
        except BadInput:
            if data is None or shapes == given_shapes:
                raise
            # the --inputs arrays named an input the model lacks: build with --shape alone; the check of
            # the inputs against the engine's inputs below then says which names are wrong
            records, source, _ = resolve_records(path, precisions, (args.batch_size,),
                                                 replace(settings, shapes=given_shapes), model=model)
    except StaticBatch as err:  # this command's option is --batch-size
        raise err.for_option("--batch-size") from err
    return records, source


def _iteration_kwargs(args: argparse.Namespace) -> dict[str, Any]:
    """--iterations and --warmup as ProfileRun's keywords (absent: its defaults)."""
    kwargs = {}
    if args.iterations is not None:
        kwargs["iterations"] = args.iterations
    if args.warmup is not None:
        if args.warmup < 0:
            raise BadInput("--warmup must be >= 0")
        kwargs["warmup"] = args.warmup
    return kwargs


def _findings(table, records, effective: dict) -> list[dict]:
    """Every candidate's layer findings; one computed as FP32 behind casts gets the line saying so instead of
    per-layer FP16 claims."""
    from ..diagnose.layer_rules import layer_findings

    findings = []
    for cand in list(records)[1:]:
        found = [f.to_json() for f in layer_findings(table, table.graph, cand)]
        if cand in effective:  # no layer of it ran in FP16: no per-layer FP16 claim, one line saying why
            found = [behind_casts_finding(cand, first_backend(records))] + [
                f for f in found if f["rule"] not in PER_LAYER_FP16_RULES]
        findings += found
    return findings


def default_batch_size(model: Any) -> int:
    """Without --batch-size: the batch the model fixes (said in one line), else 1 (``model``: the
    ``OnnxModel`` read, else the user's path: an engines dir has none)."""
    from ..model.onnx_model import model_fixed_batch

    fixed = model_fixed_batch(model)
    if fixed is not None and fixed != 1:  # on stdout: a bad input's stderr stays one line
        print(f"batch size {fixed}: the model fixes its batch to {fixed} (--batch-size to choose)")
    return fixed or 1


def run(args: argparse.Namespace) -> int:
    from ..util.files import atomic_write_text, now_iso
    from ..layers import profile as lp
    from ..layers.table import format_table
    from .compare import parse_precisions

    _common.check_output_file(args.out, "--out", engines=[args.engines], kind=LAYERS_JSON, args=args)  # before any build or profiling (issue 12)
    timeline = args.timeline or args.trace_dir is not None
    if timeline:
        _timeline.check_timeline_outputs(args)

    if args.batch_size is not None and args.batch_size < 1:
        raise BadInput(f"--batch-size must be >= 1, got {args.batch_size}")
    if args.top < 0:
        raise BadInput("--top must be >= 0")
    precisions = parse_precisions(args.precisions)
    given_shapes = _common.shapes(args)  # --shape alone: what the build gets, as in compare and bench
    data = data_in = _common.load_inputs(args)
    # after load_inputs: --inputs fixes the dims --shape would; the profiled runs take them once the
    # inputs were checked against the engine's inputs (a wrong name is then said as such)
    shapes = _common.shapes(args)
    path = Path(args.model)
    if not path.exists():
        raise BadInput("no such file or directory", path=path)
    model = _open(args, path, precisions)  # the user's file read once (None: an engines dir)
    if args.batch_size is None:  # a model exported at batch 4 profiles at 4, not at a 1 it cannot run
        args.batch_size = default_batch_size(model if model is not None else path)
    records, source = _resolve(args, path, precisions, shapes, given_shapes, data, model)
    if args.trace_dir is not None:  # before profiling: a trace name taken by a user's file is refused now
        from ..layers.timeline import trace_name

        model = next(iter(records.values())).model
        for name in records:
            _timeline.check_trace_path(args.trace_dir / trace_name(model, name, args.batch_size))
    kwargs = _iteration_kwargs(args)
    try:
        run = lp.ProfileRun(shapes=shapes, seed=args.seed, int_range=_common.int_range(args),
                            autotune=args.autotune, data=data, **kwargs)
        table = lp.profile_records(records, [args.batch_size], run, model=source)[args.batch_size]
    except StaticBatch as err:
        raise err.for_option("--batch-size") from err
    data = table.to_json()
    effective = not_computed_as_asked(records)
    findings = _findings(table, records, effective)
    first = next(iter(records.values()))
    out = {"schema": LAYERS, "created": now_iso(), "model": first.model, "backend": first.backend,
           "autotune": args.autotune, "effective_precision": effective, "table": data, "diagnosis": findings}
    for cand, eff in effective.items():
        print(f"NOTE: {cand} is {eff.upper()}: {behind_casts_finding(cand, first.backend)['message']}")
    print(format_table(data, top=args.top or None, effective=effective))
    for f in findings:
        print(f"why [{f['rule']}]: {f['message']}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    if timeline:
        out["timelines"] = write_timelines(args, records, shapes, data_in)
    atomic_write_text(args.out, json.dumps(out, indent=1, allow_nan=True) + "\n")
    print(f"layers: {args.out}")
    return 0


def write_timelines(args: argparse.Namespace, records, shapes, data) -> list[dict]:
    """Record every precision's timeline (one engine after the other), print what they say, write the
    PNG, the page and the trace files; their JSON for the result file."""
    from ..layers.timeline import record_timeline
    from ..model.inputs import FeedSettings

    feed = FeedSettings(shapes=shapes, seed=args.seed, int_range=_common.int_range(args), data=data)
    timelines = [record_timeline(rec, args.batch_size, feed, cuda_graph=args.cuda_graph, copies=args.copies,
                                 autotune=args.autotune)
                 for rec in records.values()]
    model = next(iter(records.values())).model
    _timeline.write_timeline_files(timelines, model, args.out, args.trace_dir, args.batch_size)
    return [t.to_json() for t in timelines]
