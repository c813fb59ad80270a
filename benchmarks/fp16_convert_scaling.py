"""How the FP16 graph conversion of one fix-fp16 trial scales with graph size (issue 36 item 8).

A chain of N nodes (MatMul 8×8 then Relu, repeated), converted with the first half of the nodes kept in
FP32 (a prefix trial of fix-fp16's search). Prints seconds per conversion for each N; run
``python benchmarks/fp16_convert_scaling.py 500 1000 2500 [--library] [--profile]``. Results: benchmarks/results/.
"""
from __future__ import annotations

import argparse
import cProfile
import pstats
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def chain(n: int):
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    nodes, inits, prev = [], [], "x"
    for i in range(n // 2):
        inits.append(numpy_helper.from_array(rng.standard_normal((8, 8)).astype(np.float32) * 0.3, f"w{i}"))
        nodes.append(helper.make_node("MatMul", [prev, f"w{i}"], [f"m{i}"], name=f"matmul_{i}"))
        nodes.append(helper.make_node("Relu", [f"m{i}"], [f"r{i}"], name=f"relu_{i}"))
        prev = f"r{i}"
    graph = helper.make_graph(nodes, "chain", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 8])],
                              [helper.make_tensor_value_info(prev, TensorProto.FLOAT, ["N", 8])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def time_conversion(n: int) -> float:
    from trtprof.compare.fix_fp16 import candidate_nodes
    from trtprof.convert.fp16 import convert_fp16

    model = chain(n)
    keep = candidate_nodes(model)[: n // 2]
    started = time.perf_counter()
    convert_fp16(model, keep_fp32_nodes=keep)
    return time.perf_counter() - started


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("sizes", type=int, nargs="+")
    p.add_argument("--library", action="store_true",
                   help="time onnxconverter-common's own steps (before issue 36: the quadratic sort and scans)")
    p.add_argument("--profile", action="store_true", help="cProfile the largest size, top 15 by cumulative time")
    args = p.parse_args()
    if args.library:
        from contextlib import nullcontext

        import trtprof.convert.fp16 as fp16

        fp16.linear_conversion = nullcontext  # type: ignore[assignment]
    for n in args.sizes:
        print(f"{n} nodes: {time_conversion(n):.2f} s per conversion", flush=True)
    if args.profile:
        prof = cProfile.Profile()
        prof.runcall(time_conversion, max(args.sizes))
        pstats.Stats(prof).sort_stats("cumulative").print_stats(15)


if __name__ == "__main__":
    main()
