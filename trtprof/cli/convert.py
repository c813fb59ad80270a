"""``trtprof convert MODEL -o OUT.onnx``: a TensorFlow model → a checked ONNX file."""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from ._common import add_common_debug, add_force_arg
from ..util.outputs import ONNX_CONVERTED
from ..util.bounds import Bound

MAX_OPSET = 99  # ONNX's default domain is at opset 23 today; tf2onnx refuses what it does not know
opset = Bound(int, 1, MAX_OPSET)
MAX_TOLERANCE = 1e12  # finite: an infinite tolerance would pass any output, NaN fail every one
tolerance = Bound(float, 0, MAX_TOLERANCE)


def add_parser(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    from ..convert.tf.check import DEFAULT_ATOL, DEFAULT_RTOL  # cheap: no TensorFlow import at module level

    parser = sub.add_parser(
        "convert",
        help="convert a TensorFlow model (SavedModel dir, .keras/.h5, frozen .pb) to ONNX, checked against TF",
        description=(
            "Convert a TensorFlow model to ONNX with tf2onnx, keep the batch dim dynamic, validate the "
            "ONNX (checker + shape inference) and compare ONNX Runtime with TensorFlow on a random batch."
        ),
    )
    parser.add_argument("model", type=Path, help="SavedModel directory, .keras/.h5 file, or frozen GraphDef .pb")
    parser.add_argument("-o", "--output", type=Path, help="ONNX file to write (default: MODEL with .onnx)")
    parser.add_argument("--opset", type=opset, help="ONNX opset (default: tf2onnx's)")
    parser.add_argument(
        "--inputs",
        help="frozen .pb only: input tensors NAME[:SHAPE],… (SHAPE like ?x128x128x3; ? = dynamic)",
    )
    parser.add_argument("--outputs", help="frozen .pb only: output tensors NAME,…")
    parser.add_argument("--signature", help="SavedModel only: signature to convert (default serving_default)")
    parser.add_argument("--no-check", dest="check", action="store_false", help="skip the comparison with TensorFlow")
    parser.add_argument("--atol", type=tolerance, default=DEFAULT_ATOL, help=f"absolute tolerance of the check (default {DEFAULT_ATOL:g})")
    parser.add_argument("--rtol", type=tolerance, default=DEFAULT_RTOL, help=f"relative tolerance of the check (default {DEFAULT_RTOL:g})")
    add_common_debug(parser)
    add_force_arg(parser)
    parser.set_defaults(func=run)


def default_output(model: Path) -> Path:
    model = Path(model)
    return model.with_suffix(".onnx") if model.is_file() else model.parent / f"{model.name}.onnx"


def run(args: argparse.Namespace) -> int:
    from ..convert.tf.conversion import TfConvertOptions, convert_tf

    output = args.output or default_output(args.model)
    from ._common import check_output_file

    check_output_file(output, "--output", ".onnx", kind=ONNX_CONVERTED, args=args)  # before TensorFlow loads and converts for a minute
    started = time.perf_counter()
    result = convert_tf(
        args.model,
        output,
        TfConvertOptions(opset=args.opset, inputs=args.inputs, outputs=args.outputs, signature=args.signature),
        check=args.check,
        atol=args.atol,
        rtol=args.rtol,
    )
    total_s = time.perf_counter() - started
    ins = ", ".join(f"{n}{list(s)}" for n, s in result.inputs)
    outs = ", ".join(f"{n}{list(s)}" for n, s in result.outputs)
    if result.check is None:
        check = "check skipped (--no-check)"
    else:
        c = result.check
        check = f"check {c.status}: max abs err {c.max_abs_err:.2g}, max rel err {c.max_rel_err:.2g}"
    print(
        f"{result.onnx_path}: converted in {result.convert_s:.2f} s ({total_s:.1f} s with TensorFlow), "
        f"opset {result.opset}, {check}; inputs {ins}; outputs {outs}"
    )
    if result.check is not None and result.check.status == "warn":
        print(f"trtprof convert: warning: {result.check.summary()}", file=sys.stderr)
    for note in result.notes:
        print(f"trtprof convert: note: {note}", file=sys.stderr)
    return 0
