"""trtprof profile MODEL_OR_ENGINES: per-layer times per precision, FP16/FP32 ratio, kernels, casts."""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from ..errors import BadInput, StaticBatch
from ..schemas import LAYERS
from . import _common


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
    p.add_argument("--batch-size", type=int, default=1, help="batch size (default 1)")
    _common.add_shape_arg(p)
    p.add_argument("--engines", type=Path, default=Path("engines"), help="engine cache dir (default ./engines)")
    p.add_argument("--backend", default="auto", help="auto|onnxruntime|tensorrt|torch")
    p.add_argument("--iterations", type=int, default=None, help="profiled iterations per precision (default 20)")
    p.add_argument("--warmup", type=int, default=None, help="unprofiled calls first (default 5)")
    p.add_argument("--top", type=int, default=20, help="rows to print, by time (default 20; 0 = all)")
    p.add_argument("--out", type=Path, default=Path("layers.json"), help="JSON output (default layers.json)")
    _common.add_autotune_arg(p)
    _common.add_inputs_arg(p, what="profiled on its first batch")
    p.add_argument("--seed", type=int, default=0, help="seed of the random inputs")
    p.add_argument("--int-range", default="0,100", metavar="LOW,HIGH", help="range of random integer inputs")
    _common.add_common_debug(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..util.files import atomic_write_text, now_iso
    from ..compare.core import resolve_records
    from ..layers import profile as lp
    from ..diagnose.layer_rules import layer_findings
    from ..layers.table import format_table
    from .compare import parse_precisions

    _common.check_output_file(args.out, "--out", engines=[args.engines])  # before any build or profiling (issue 12)

    if args.batch_size < 1:
        raise BadInput(f"--batch-size must be >= 1, got {args.batch_size}")
    if args.top < 0:
        raise BadInput("--top must be >= 0")
    precisions = parse_precisions(args.precisions)
    shapes = _common.shapes(args)
    data = _common.load_inputs(args)
    path = Path(args.model)
    if not path.exists():
        raise BadInput("no such file or directory", path=path)
    try:
        records, onnx_path, _ = resolve_records(path, precisions, (args.batch_size,), engines_dir=args.engines,
                                                backend=args.backend, shapes=shapes)
    except StaticBatch as err:  # this command's option is --batch-size
        raise err.for_option("--batch-size") from err
    kwargs = {}
    if args.iterations is not None:
        kwargs["iterations"] = args.iterations
    if args.warmup is not None:
        if args.warmup < 0:
            raise BadInput("--warmup must be >= 0")
        kwargs["warmup"] = args.warmup
    try:
        table = lp.profile_records(records, [args.batch_size], onnx_path=onnx_path, shapes=shapes, seed=args.seed,
                                   int_range=_common.int_range(args), autotune=args.autotune, data=data,
                                   **kwargs)[args.batch_size]
    except StaticBatch as err:
        raise err.for_option("--batch-size") from err
    data = table.to_json()
    findings = []
    for cand in list(records)[1:]:
        findings += [f.to_json() for f in layer_findings(table, table.graph, cand)]
    first = next(iter(records.values()))
    out = {"schema": LAYERS, "created": now_iso(), "model": first.model, "backend": first.backend,
           "autotune": args.autotune, "table": data, "diagnosis": findings}
    print(format_table(data, top=args.top or None))
    for f in findings:
        print(f"why [{f['rule']}]: {f['message']}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(args.out, json.dumps(out, indent=1, allow_nan=True) + "\n")
    print(f"layers: {args.out}")
    return 0
