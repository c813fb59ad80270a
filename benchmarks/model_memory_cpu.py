"""Peak memory of `trtprof build` (fp32+fp16) and `trtprof compare` (2 loads) against a model's weight
bytes, ONNX Runtime on the CPU (issue 36 item 8): the factors behind trtprof.system.model_memory.

The model is a chain of MatMuls with SIZE×SIZE float32 weights (onnx helpers, seeded). The peak is the
largest sum of RSS over the command's process tree (the compare's workers included), sampled every
50 ms from /proc. Run: ``python benchmarks/model_memory_cpu.py 200`` (MB of weights). Results:
benchmarks/results/model_memory_cpu-*.txt.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
PAGE = os.sysconf("SC_PAGE_SIZE")


def make_chain(path: Path, megabytes: float, size: int = 2048) -> int:
    """A MatMul chain holding about ``megabytes`` MB of float32 weights; returns the weight bytes."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    count = max(1, round(megabytes * 1e6 / (size * size * 4)))
    rng = np.random.default_rng(0)
    nodes, inits, prev = [], [], "x"
    for i in range(count):
        w = (rng.standard_normal((size, size), dtype=np.float32) / np.sqrt(size)).astype(np.float32)
        inits.append(numpy_helper.from_array(w, f"w{i}"))
        nodes.append(helper.make_node("MatMul", [prev, f"w{i}"], [f"y{i}"], name=f"matmul_{i}"))
        prev = f"y{i}"
    graph = helper.make_graph(nodes, "chain", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", size])],
                              [helper.make_tensor_value_info(prev, TensorProto.FLOAT, ["N", size])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(path), save_as_external_data=count * size * size * 4 > 1.8e9)
    return count * size * size * 4


def tree_rss(root: int) -> tuple[int, int]:
    """(RSS summed over ``root`` and all its descendants, ``root``'s own RSS), from /proc."""
    parents: dict[int, int] = {}
    rss: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parents[int(entry.name)] = int(fields[1])
        rss[int(entry.name)] = int(fields[21]) * PAGE
    total, todo = 0, [root]
    while todo:
        pid = todo.pop()
        total += rss.get(pid, 0)
        todo += [p for p, parent in parents.items() if parent == pid]
    return total, rss.get(root, 0)


@dataclass(frozen=True)
class Peak:
    """One command's peaks: ``tree`` (the whole process tree at its largest), ``parent`` (the trtprof
    process itself at its largest: not the same instant), its exit code, seconds and stderr."""

    tree: int
    parent: int
    rc: int
    seconds: float
    stderr: str

    def last_line(self) -> str:
        lines = [line for line in self.stderr.splitlines() if line.strip()]
        return lines[-1].strip() if lines else ""


def peak_of(argv: list[str], nice: int = 0) -> Peak:
    """Run ``python -m trtprof ARGV`` (this checkout), sampling its process tree every 50 ms; stderr
    goes to a file (a pipe read only at the end would block a chatty command)."""
    env = dict(os.environ, PYTHONPATH=str(REPO))
    started = time.monotonic()
    with tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen([sys.executable, "-m", "trtprof", *argv], env=env, stdout=subprocess.DEVNULL,
                                stderr=err, preexec_fn=(lambda: os.nice(nice)) if nice else None)
        tree = parent = 0
        while proc.poll() is None:
            total, own = tree_rss(proc.pid)
            tree, parent = max(tree, total), max(parent, own)
            time.sleep(0.05)
        err.seek(0)
        text = err.read()
    peak = Peak(tree, parent, proc.returncode, time.monotonic() - started, text)
    if proc.returncode:
        print(f"  rc {proc.returncode}: {peak.last_line()}")
    return peak


def loads_opened(out: Path) -> str:
    """The loads the compare opened (its JSON's first result), "?" when it wrote none: the per-load
    factor divides by what ran, not by what was asked."""
    try:
        return str(json.loads(out.read_text())["comparisons"][0]["loads"])
    except (OSError, ValueError, KeyError, IndexError, TypeError):
        return "?"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("megabytes", type=float, nargs="+")
    p.add_argument("--loads", default="2", help="compare's --min-loads values to measure, comma-separated")
    args = p.parse_args()
    for mb in args.megabytes:
        with tempfile.TemporaryDirectory() as tmp:
            model = Path(tmp) / "chain.onnx"
            weights = make_chain(model, mb)
            engines = Path(tmp) / "engines"
            build = peak_of(["build", str(model), "--fp32", "--fp16", "--backend", "onnxruntime",
                             "--batch-sizes", "1", "--engines", str(engines)])
            print(f"{weights / 1e6:.0f} MB weights: build fp32+fp16 peak {build.tree / 1e9:.2f} GB "
                  f"({build.tree / weights:.1f}x weights, rc {build.rc}, {build.seconds:.0f} s)", flush=True)
            for loads in args.loads.split(","):
                out = Path(tmp) / "c.json"
                compare = peak_of(["compare", str(model), "--backend", "onnxruntime", "--batch-sizes", "1",
                                   "--engines", str(engines), "--min-loads", loads, "--time-budget-s", "20",
                                   "--out", str(out)])
                print(f"{weights / 1e6:.0f} MB weights: compare (engines cached, --min-loads {loads}, "
                      f"{loads_opened(out)} loads opened) peak {compare.tree / 1e9:.2f} GB "
                      f"({compare.tree / weights:.1f}x weights; parent alone {compare.parent / 1e9:.2f} GB, "
                      f"{compare.parent / weights:.1f}x; rc {compare.rc}, {compare.seconds:.0f} s)", flush=True)

if __name__ == "__main__":
    main()
