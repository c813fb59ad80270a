"""trtprof sweep [SPEC] …: models × precisions × batch sizes over the GPUs of a host or a Ray cluster."""
from __future__ import annotations

import argparse
import sys
import threading
from pathlib import Path
from typing import Any

from ..errors import BadInput
from ..util.signals import sigterm_as_interrupt
from ..util.bounds import ONE_DAY_S, Bound
from . import _common

MAX_WORKERS = 256  # local CPU workers: each a process running a compare/bench cell
workers = Bound(int, 1, MAX_WORKERS)
MAX_CPUS_PER_CELL = 1_024
cpus_per_cell = Bound(int, 1, MAX_CPUS_PER_CELL)
# a cell is a build (TensorRT: hours for a large model) then a compare of at most a day
cell_timeout_s = Bound(float, 0, 7 * ONE_DAY_S, why="a week", unit=" s", low_open=True)


def add_parser(sub) -> None:
    p = sub.add_parser(
        "sweep", help="run compare/bench cells for many models and batch sizes on every GPU (local or Ray)",
        description="One cell = one model at one batch size (a `trtprof compare` of all its precisions, or a "
                    "`trtprof bench`), in its own process on one GPU. Finished cells are kept in OUT/cells.jsonl; "
                    "OUT/sweep.json and OUT/sweep.csv hold the merged result; `trtprof report OUT/sweep.json` "
                    "renders the verdict matrix.")
    p.add_argument("spec", type=Path, nargs="?", default=None, help="sweep spec (.toml, or .yaml with PyYAML)")
    g = p.add_argument_group("what to run (flags override the spec's [sweep] table)")
    g.add_argument("--models", default=None, metavar="A.onnx,B.onnx", help="models (instead of the spec's [[models]])")
    g.add_argument("--kind", default=None, metavar="compare|bench", help="compare (default), bench, or compare,bench")
    g.add_argument("--precisions", default=None, metavar="BASE,CAND,…", help="default fp32,fp16 (baseline first)")
    g.add_argument("--batch-sizes", default=None, metavar="B1,B2,…", help="one cell per batch size (default 1)")
    _common.add_backend_arg(g, default=None)
    g.add_argument("--time-budget-s", type=_common.seconds_in_a_day, default=None,
                   help="compare: measuring time per cell")
    g.add_argument("--round-iterations", type=_common.iteration_count, default=None,
                   help="compare: iterations per precision per round")
    g.add_argument("--iterations", type=_common.iteration_count, default=None, help="bench: timed runs per engine")
    g.add_argument("--engines", type=Path, default=None, help="engine cache root (default ./engines, or the spec's)")
    g.add_argument("--gpu-types", default=None, metavar="H200,A100",
                   help="Ray: run every cell once on each of these GPU types (accelerator_type resources)")
    x = p.add_argument_group("where to run")
    x.add_argument("--executor", choices=("local", "ray"), default="local", help="local (default) or ray")
    x.add_argument("--gpus", default=None, metavar="all|none|0,1",
                   help="local: one worker per GPU (default all GPUs NVML sees; none = CPU workers)")
    x.add_argument("--workers", type=workers, default=None,
                   help="local, CPU: workers sharing the cores (default 1: CPU workers disturb each other)")
    x.add_argument("--address", default=None, metavar="auto|ray://HOST:PORT",
                   help="ray: cluster to join (default: RAY_ADDRESS, else a local Ray)")
    x.add_argument("--ray-cpus-per-cell", type=cpus_per_cell, default=1,
                   help="ray: CPUs reserved per cell (default 1)")
    x.add_argument("--cell-timeout-s", type=cell_timeout_s, default=None,
                   help="kill a build/compare step after this long")
    p.add_argument("--out", type=Path, default=Path("sweep"), help="results folder (default ./sweep)")
    p.add_argument("--resume", action="store_true", help="continue the sweep in --out, skipping finished cells")
    p.add_argument("--interference", type=Path, default=None,
                   help="benchmarks/sweep_interference.py result: warn with its figures about crowded cells")
    _common.add_common_debug(p)
    _common.add_force_arg(p)
    p.set_defaults(func=run)


def _overrides(args: argparse.Namespace) -> dict[str, Any]:
    models = None
    if args.models:
        models = [str(Path(m).expanduser().resolve()) for m in args.models.split(",") if m.strip()]
    return {
        "models": models, "kind": args.kind, "precisions": args.precisions, "batch_sizes": args.batch_sizes,
        "backend": args.backend, "time_budget_s": args.time_budget_s, "round_iterations": args.round_iterations,
        "iterations": args.iterations, "engines": str(args.engines.resolve()) if args.engines else None,
        "gpu_types": args.gpu_types,
    }


def _line(rec: dict[str, Any], done: int, total: int) -> str:
    where = (rec.get("slot") or {}).get("name") or "?"
    head = f"[{done}/{total}] {rec.get('name')} on {where}: {rec.get('status')} in {rec.get('wall_s', 0):.1f} s"
    if rec.get("status") != "ok":
        return f"{head}: {rec.get('error')}"
    bits = []
    for row in rec.get("summary") or []:
        if row.get("speedup") is not None:
            bits.append(f"{row.get('candidate')} vs {row.get('baseline')} {row['speedup']:.3f}× {row.get('verdict')}")
        elif row.get("median_ms") is not None:
            bits.append(f"{row.get('precision')} {row['median_ms']:.4g} ms")
    return head + ("  " + "; ".join(bits) if bits else "")


def check_sweep_folder(args: argparse.Namespace) -> None:
    """The files a sweep writes into --out are trtprof's or absent (util.outputs): sweep.json/csv, the
    two logs, and cells/ (a user's files there count unless the folder's cells.jsonl is a sweep's)."""
    from ..sweep.store import CSV, LOG, MERGED, RUNS
    from ..util import outputs

    files = [(MERGED, outputs.SWEEP_JSON), (CSV, outputs.CSV_TABLE), (LOG, outputs.JSON_LINES), (RUNS, outputs.JSON_LINES)]
    log = args.out / LOG
    if not (log.is_file() and outputs.JSON_LINES.recognises(log)) and (args.out / "cells").is_dir():
        files += [(f"cells/{p.name}", outputs.ANY_RESULT_JSON if p.suffix == ".json" else outputs.CELL_LOG)
                  for p in sorted((args.out / "cells").iterdir())]
    _common.check_folder_files(args.out, "--out", files, args)


def run(args: argparse.Namespace) -> int:
    from ..sweep.runner import ExecutorSettings, read_interference, run_sweep
    from ..sweep.spec import load_spec

    _common.check_output_dir(args.out, "--out", engines=[args.engines])  # before any cell runs (issue 12)
    check_sweep_folder(args)
    if args.resume and not (args.out / "cells.jsonl").exists():
        raise BadInput("--resume: no sweep to resume here (no cells.jsonl)", path=args.out)
    spec = load_spec(args.spec, _overrides(args))
    _common.check_not_engines_place(args.out, "--out", [Path(spec.engines)])  # the spec's engines root too
    interference = read_interference(args.interference)
    slots: list = []
    if args.executor == "local":
        from ..sweep.local import local_slots

        slots = local_slots(args.gpus, args.workers)
        print("workers: " + ", ".join(
            f"{s.name}" + (f" ({s.gpu.get('name')} {s.gpu.get('uuid')})" if s.gpu else "")
            + (f" cores {s.cpus[0]}-{s.cpus[-1]}" if s.cpus else "") for s in slots))
        if spec.gpu_types:
            raise BadInput("--gpu-types / gpu_types: GPU types are chosen by the Ray executor (--executor ray); "
                           "the local executor runs on this host's GPUs (--gpus)")
    elif args.gpus is not None or args.workers is not None:
        raise BadInput("--gpus/--workers are for --executor local; Ray gives each cell one GPU (or --ray-cpus-per-cell)")
    lock = threading.Lock()

    def on_record(rec: dict[str, Any], done: int, total: int) -> None:
        with lock:
            print(_line(rec, done, total), flush=True)

    with sigterm_as_interrupt():  # SIGTERM, like Ctrl-C, keeps the finished cells and writes sweep.json
        executor = ExecutorSettings(name=args.executor, slots=slots, address=args.address,
                                    ray_cpus_per_cell=args.ray_cpus_per_cell, timeout_s=args.cell_timeout_s)
        outcome = run_sweep(spec, args.out, executor=executor, resume=args.resume, interference=interference,
                            on_record=on_record)
    from ..sweep.matrix import markdown

    if outcome.skipped:
        print(f"resumed: {outcome.skipped} cell(s) already done were skipped")
    print()
    print(markdown(outcome.merged), end="")
    print(f"sweep: {outcome.merged_path} (csv: {outcome.merged_path.with_suffix('.csv')})")
    if outcome.interrupted:
        print(f"trtprof sweep: interrupted; {outcome.merged['cells_ok']} finished cell(s) kept in {args.out}; "
              f"continue with the same command plus --resume", file=sys.stderr)
        return _common.EXIT_INTERRUPTED
    return 1 if outcome.merged["cells_failed"] else 0
