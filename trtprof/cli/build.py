"""trtprof build MODEL [--fp32] [--fp16] [--tf32] …: one cached engine per precision."""
from __future__ import annotations

import argparse
from pathlib import Path

from ..builder.pipeline import BuildOutcome, BuildSettings, build_model_engines, open_model
from ..errors import BadInput
from ..model.inputs import parse_batch_sizes
from ..util.wording import plural
from ..util.bounds import Bound
from . import _common

MAX_WORKSPACE_MB = 1 << 20  # 1 TiB: more than any GPU's memory
workspace_mb = Bound(int, 1, MAX_WORKSPACE_MB, why="1 TiB", unit=" MiB")
builder_opt_level = Bound(int, 0, 5, between=True)  # TensorRT's levels


def add_parser(sub) -> None:
    p = sub.add_parser("build", help="build engines (one per precision) into the engine cache",
                       description="Build one engine per precision from an ONNX or TensorFlow model; "
                                   "an identical request is a cache hit.")
    p.add_argument("model", type=Path, help="ONNX file, TF SavedModel dir, Keras .keras/.h5 or frozen .pb")
    p.add_argument("--fp32", action="store_true", help="FP32 (TF32 off); the default when no precision is given")
    p.add_argument("--fp16", action="store_true", help="FP16")
    p.add_argument("--tf32", action="store_true", help="FP32 with TF32 tensor-core math (GPU only)")
    p.add_argument("--bf16", action="store_true", help="BF16 (FP32's range, 8 significant bits; docs/precisions.md)")
    p.add_argument("--int8", action="store_true",
                   help="INT8: static QDQ quantization, calibrated on --inputs (else seeded random inputs; docs/precisions.md)")
    p.add_argument("--fp8", action="store_true", help="FP8 E4M3 QDQ (TensorRT/TensorRT-RTX for compute capability 8.9+)")
    _common.add_shape_args(p, batch_default="1")
    p.add_argument("--engines", type=Path, default=Path("engines"), help="engine cache dir (default ./engines)")
    _common.add_backend_arg(p, note="; tensorrt-rtx also builds without a GPU")
    p.add_argument("--rebuild", action="store_true", help="build even when the cache has the engine")
    t = p.add_argument_group("TensorFlow input (converted with tf2onnx first; see `trtprof convert`)")
    t.add_argument("--no-check", action="store_true", help="skip the TF vs ONNX accuracy check")
    t.add_argument("--tf-inputs", default=None, metavar="NAME[:SHAPE],…", help="frozen .pb: input tensors")
    t.add_argument("--tf-outputs", default=None, metavar="NAME,…", help="frozen .pb: output tensors")
    t.add_argument("--signature", default=None, help="SavedModel signature (default serving_default)")
    g = p.add_argument_group("TensorRT options (change the engine, so part of the cache key)")
    g.add_argument("--workspace-mb", type=workspace_mb, default=None,
                   help=f"builder workspace memory-pool limit, MiB (at most {MAX_WORKSPACE_MB:,}: 1 TiB)")
    g.add_argument("--opt-batch", type=_common.batch_size, default=None, help="optimization-profile opt batch (default: max)")
    g.add_argument("--builder-opt-level", type=builder_opt_level, default=None, metavar="0-5",
                   help="builder optimization level")
    g.add_argument("--precision-constraints", choices=("none", "prefer", "obey"), default=None,
                   help="TensorRT < 11 with --fp16: how strictly layer precisions are kept")
    g.add_argument("--compute-capability", default=None, metavar="sm86,sm89,…|current",
                   help="TensorRT-RTX: GPU architectures the plan targets (sm75 sm80 sm86 sm89 sm120 sm121; "
                        "default: the library's portable default; current: this machine's GPU)")
    k = p.add_argument_group("FP16 keep-lists (change the engine, so part of the cache key; --fp16 only)")
    k.add_argument("--layer-precisions", default=None, metavar="NODE:fp32,…",
                   help="nodes kept in FP32 (ONNX Runtime, torch, TensorRT >= 11: ONNX node names; TensorRT < 11: layer names, "
                        "like trtexec --layerPrecisions, also LAYER:fp16 and *)")
    k.add_argument("--keep-fp32-ops", default=None, metavar="OP,…",
                   help="ONNX op types kept in FP32, e.g. Softmax,LayerNormalization (ONNX Runtime, torch, "
                        "TensorRT >= 11)")
    p.add_argument("--no-range-check", action="store_true",
                   help="skip the FP16 range analysis of the FP32 model (overflow/underflow risks)")
    _common.add_inputs_arg(p, what="the FP16 range analysis runs on all its samples")
    _common.add_common_debug(p)
    p.set_defaults(func=run)


# Build lines are printed as each engine finishes, so the columns cannot be sized from the rows:
# wide enough for the longest precision text a backend gives and the longest backend name.
PRECISION_WIDTH = len("fp16 (effective fp32+casts)")
BACKEND_WIDTH = len("tensorrt-rtx")
STATUS_WIDTH = len("cache hit")


def outcome_line(outcome: BuildOutcome) -> str:
    """One build result: precision (and what ran when it differs), backend, built/cache hit, path, time."""
    r = outcome.record
    eff = r.backend_metadata.get("effective_precision", r.precision)
    prec = r.precision if eff == r.precision else f"{r.precision} (effective {eff})"
    return (f"{prec:<{PRECISION_WIDTH}}  {r.backend:<{BACKEND_WIDTH}}  {outcome.status:<{STATUS_WIDTH}}  "
            f"{r.artifact_path}  {outcome.seconds:.2f} s")


def print_outcome(outcome: BuildOutcome) -> None:
    print(outcome_line(outcome))
    for note in outcome.record.notes:
        print(f"    note: {note}")
    caught = outcome.record.backend_metadata.get("warnings") or []
    if caught and outcome.status != "cache hit":  # the library's own lines are in the JSON; one line here
        print(f"    note: {outcome.record.backend} warned {plural(len(caught), 'time')} about this model "
              "(kept in the engine's metadata JSON: backend_metadata.warnings)")


def _print_conversion(result) -> None:
    if result.cached:
        print(f"converted (cache hit) {result.source} → {result.onnx_path}")
    else:
        check = result.check.summary() if result.check is not None else "check skipped (--no-check)"
        print(f"converted {result.source} → {result.onnx_path} in {result.convert_s:.2f} s; {check}")
    for note in result.notes:
        print(f"    note: {note}")


def run(args: argparse.Namespace) -> int:
    options = {
        "workspace_mb": args.workspace_mb,
        "opt_batch": args.opt_batch,
        "builder_optimization_level": args.builder_opt_level,
        "precision_constraints": args.precision_constraints,
        "layer_precisions": args.layer_precisions,
        "compute_capability": args.compute_capability,
        "keep_fp32_ops": args.keep_fp32_ops,
    }
    if args.engines.exists() and not args.engines.is_dir():  # a read-only dir is fine: it can still serve hits
        raise BadInput("--engines: exists and is not a directory", path=args.engines)
    sizes = parse_batch_sizes(args.batch_sizes)
    data = _common.load_inputs(args)
    if args.opt_batch is not None and not min(sizes) <= args.opt_batch <= max(sizes):
        raise BadInput(f"--opt-batch {args.opt_batch} is outside --batch-sizes {args.batch_sizes}")
    settings = BuildSettings(
        shapes=_common.shapes(args),
        engines_dir=args.engines,
        backend=args.backend,
        rebuild=args.rebuild,
        options=options,
        check=not args.no_check,
        convert_options={"inputs": args.tf_inputs, "outputs": args.tf_outputs, "signature": args.signature},
        range_check=not args.no_range_check,
        data=data,
    )
    precisions = _common.precisions_from_flags(args)
    model = open_model(args.model, precisions, settings, on_convert=_print_conversion)  # the file read once
    build_model_engines(model, precisions, sizes, settings, on_done=print_outcome)
    return 0
