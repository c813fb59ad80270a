"""trtprof bench PATH: every engine × batch size through the shared timing loop."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..measure.bench import BenchHooks, bench_path
from ..model.inputs import FeedSettings
from ..engines.cache_admin import scan_dir
from ..util.labels import engine_labels, fmt_ms, fmt_rate
from ..errors import BadInput, write_failure
from ..measure.results import ResultSet
from ..util.signals import signals_deferred, sigterm_as_interrupt
from ..util.wording import plural
from . import _common, _serving
from ..system.validity import Validity, merge, stamp_lines
from ..util import outputs
from ..util.thirdparty import terminal_line

TABLE_HEADERS = ("engine", "batch", "median ms", "p90 ms", "p99 ms", "mean ± std ms", "cv", "throughput/s", "n")


def add_parser(sub) -> None:
    p = sub.add_parser("bench", help="benchmark engines: latency distributions per precision and batch size",
                       description="Benchmark every engine under PATH (an engines dir or one engine) at every "
                                   "batch size. Ctrl-C (or SIGTERM) keeps what finished: the results file is "
                                   "written with \"interrupted\": true and the list of what was still to run "
                                   "(exit 130).")
    p.add_argument("path", type=Path, help="engines dir, or one engine (artifact or its .json)")
    _common.add_shape_args(p, batch_default=None)
    _common.add_timing_args(p)
    _common.add_autotune_arg(p)
    _common.add_inputs_arg(p, what="timed on its first batch")
    _serving.add_serving_args(p)
    add_max_batch_args(p)
    p.add_argument("--out", type=Path, default=Path("results.json"), help="results JSON (default results.json)")
    p.add_argument("--csv", type=Path, default=None, help="also write a CSV, one row per engine × batch")
    _common.add_force_arg(p)
    p.set_defaults(func=run)


def add_max_batch_args(p: argparse.ArgumentParser) -> None:
    from ..measure.maxbatch import DEFAULT_BUDGET_FRACTION, MAX_BATCH_LIMIT

    p.add_argument("--find-max-batch", action="store_true",
                   help="also search, per engine, the largest batch whose inference fits: GPU engines by a real "
                        "attempt (CUDA out of memory = does not fit; a TensorRT profile's max batch also stops it), "
                        "onnxruntime engines against --memory-limit-mb (a budget, measured in a child process)")
    p.add_argument("--max-batch-limit", type=_common.batch_size, default=None,
                   help=f"stop the search there (default {MAX_BATCH_LIMIT}; a fit there is reported as \"≥\")")
    p.add_argument("--memory-limit-mb", type=float, default=None,
                   help="the memory budget of the search on onnxruntime (CPU) engines, MiB (default: "
                        f"{DEFAULT_BUDGET_FRACTION * 100:.0f}%% of the memory available at the start)")


def max_batch_settings(args: argparse.Namespace):
    """The search's settings from bench's options; a bad --memory-limit-mb fails here, before any work."""
    from ..measure.maxbatch import MAX_BATCH_LIMIT, SearchSettings, default_budget

    if args.memory_limit_mb is not None and not args.find_max_batch:
        raise BadInput("--memory-limit-mb applies to --find-max-batch; add --find-max-batch")
    if args.max_batch_limit is not None and not args.find_max_batch:
        raise BadInput("--max-batch-limit applies to --find-max-batch; add --find-max-batch")
    if not args.find_max_batch:
        return None
    budget, source = default_budget(args.memory_limit_mb)
    limit = MAX_BATCH_LIMIT if args.max_batch_limit is None else args.max_batch_limit
    return SearchSettings(max_batch_limit=limit, budget_bytes=budget, budget_source=source,
                          shapes=_common.shapes(args), seed=args.seed, int_range=_common.int_range(args),
                          threads=args.threads, autotune=args.autotune)


def print_max_batch(found: list[dict]) -> None:
    from ..measure.maxbatch import fit_line

    if found:
        print()
        for entry in found:
            print(f"max batch: {fit_line(entry)}")


def table_rows(results: ResultSet) -> list[tuple]:
    rows = []
    for r, label in zip(results.results, engine_labels(results.results)):
        s = r.latency
        rows.append((label, r.batch_size, fmt_ms(s.p50), fmt_ms(s.p90), fmt_ms(s.p99),
                     f"{fmt_ms(s.mean)} ± {fmt_ms(s.std, 2)}", f"{s.cv:.1%}", fmt_rate(r.throughput_per_s), s.n))
    return rows


def print_table(results: ResultSet) -> None:
    if not results.results:
        print("no finished measurements")
        return
    labels = engine_labels(results.results)
    for line in stamp_lines(merge([Validity.from_json(r.validity) for r in results.results])):  # first: VALID or why not
        print(line)
    print(_common.format_table(TABLE_HEADERS, table_rows(results)))
    stages = [k for k in ("h2d_ms", "compute_ms", "d2h_ms", "enqueue_ms") if any(k in r.stats for r in results.results)]
    if stages:
        rows = []
        for r, label in zip(results.results, labels):
            rows.append((label, r.batch_size,
                         *(f"{fmt_ms(r.stats[k].p50)} (cv {r.stats[k].cv:.1%})" if k in r.stats else "-" for k in stages)))
        print()
        print(_common.format_table(("engine", "batch", *(f"{k[:-3]} median ms" for k in stages)), rows))
    print_memory_table(results)
    for r, label in zip(results.results, labels):
        runtime = r.config.get("runtime")  # TensorRT-RTX: the JIT, measured outside the latency distribution
        if runtime:
            firsts = ", ".join(f"{shape} {ms:.1f} ms" for shape, ms in runtime["first_inference_ms"].items())
            print(f"jit: {label} batch {r.batch_size}: context {runtime['jit_ms']:.1f} ms, "
                  f"first inference {firsts or '-'}; runtime cache {runtime['runtime_cache']['status']}")
        if r.validity:
            print(f"{label} batch {r.batch_size}: {r.validity['stamp']}")
        for w in r.warnings:
            print(f"warning: {label} batch {r.batch_size}: {w}")


def print_memory_table(results: ResultSet) -> None:
    """Artifact size and memory in use during inference per engine × batch (``trtprof.system.memory``)."""
    from ..system.memory import fmt_bytes, fmt_in_use

    rows = [(label, r.batch_size, fmt_bytes(r.engine.get("artifact_bytes")), fmt_in_use(r.memory),
             r.memory.get("kind", "n/a"))
            for r, label in zip(results.results, engine_labels(results.results))]
    if rows:
        print()
        print(_common.format_table(("engine", "batch", "artifact", "memory in use", "measured as"), rows))
    startup = (results.environment.get("host") or {}).get("runtime_startup_bytes") or {}
    if rows and startup:  # measured before the first engine loaded: not any engine's memory
        print("runtime start-up, not in any engine's memory: "
              + ", ".join(f"{name} {fmt_bytes(v)}" for name, v in startup.items()))


def progress(desc: str = "bench"):
    """(on_plan, on_start, on_result, close) callbacks driving one tqdm bar with a total and an ETA."""
    from tqdm import tqdm

    state: dict = {}

    def on_plan(items) -> None:
        state["bar"] = tqdm(total=len(items), unit="config", desc=desc, file=sys.stderr, disable=None,
                            leave=False, dynamic_ncols=True)

    def on_start(item) -> None:
        if "bar" in state:
            state["bar"].set_postfix_str(f"{item.record.model} {item.record.precision} batch {item.batch_size}")

    def on_result(_result) -> None:
        if "bar" in state:
            state["bar"].update(1)

    def close() -> None:
        if "bar" in state:
            state.pop("bar").close()

    return on_plan, on_start, on_result, close


def write_outputs(results: ResultSet, out: Path, csv: Path | None) -> None:
    """Write the JSON (and CSV) with Ctrl-C/SIGTERM deferred; a full disk is one line that says the
    measurements are in the table printed above (the fallback summary), never a traceback."""
    kept = "the measurements are in the table above" if results.results else ""
    with signals_deferred():
        for path, write, label in ((out, results.write_json, "results"), (csv, results.write_csv, "csv")):
            if path is None:
                continue
            try:  # each file blamed for its own failure (a --csv failure named the --out JSON)
                write(path)
            except OSError as err:
                raise write_failure(err, path, kept=kept) from err
            print(f"{label}: {path}")


def report_interruption(results: ResultSet) -> None:
    todo = ", ".join(f"{p['model']} {p['precision']} batch {p['batch_size']}" for p in results.pending)
    print(f"interrupted: kept {plural(len(results.results), 'finished measurement')}; not run: {todo or 'nothing'}",
          file=sys.stderr)


def run_serving(args: argparse.Namespace, results: ResultSet, serving) -> None:
    """The --concurrency sweep over the benched engines, per model and backend; a Ctrl-C keeps the
    single-stream results (the file then says the sweep was not finished)."""
    from ..engines.cache import list_engines
    from ..serving.sweep import SweepHooks, group_arms, sweep_records

    groups = group_arms(list_engines(args.path))
    batches = _common.batch_sizes(args)
    try:
        with sigterm_as_interrupt():
            for arms in groups:
                sizes = batches or tuple(sorted(set.intersection(*(set(r.spec.batch_sizes) for r in arms.values()))))
                on_point, close = _serving.progress(len(arms) * len(sizes) * len(serving.concurrency) * serving.rounds)
                try:
                    feed = FeedSettings(shapes=_common.shapes(args), seed=args.seed, int_range=_common.int_range(args))
                    sweep = sweep_records(arms, sizes, serving, feed=feed, autotune=args.autotune,
                                          hooks=SweepHooks(on_point=on_point))
                finally:
                    close()
                results.serving.append(sweep.to_json())
                _serving.print_sweep(results.serving[-1])
    except KeyboardInterrupt:
        results.interrupted = True
        results.pending.append({"serving": "the --concurrency sweep was interrupted"})


def search_max_batch(args: argparse.Namespace, settings) -> list[dict]:
    """--find-max-batch before the timing (a limit that nothing fits fails in seconds, not after it)."""
    from ..engines.cache import list_engines
    from ..measure.maxbatch import search

    print("searching the largest batch that fits (--find-max-batch)...")  # stdout: a user error stays one stderr line
    return search(list_engines(args.path), settings)


def print_whatif_area(engines_dir: Path) -> None:
    """One line when the dir holds a what-if area: its engines are experiments, kept apart and not benched."""
    from ..compare.whatif import whatif_dir
    from ..engines.cache import ENTRY_NAME, META_SUFFIX

    area = whatif_dir(engines_dir)
    count = sum(1 for p in area.glob(f"*{META_SUFFIX}") if ENTRY_NAME.fullmatch(p.name)) if area.is_dir() else 0
    if count:
        print(f"note: {plural(count, 'what-if engine')} in {area} not listed (experiments of `compare --what-if`; "
              f"`trtprof bench {area}` measures them)")


def run(args: argparse.Namespace) -> int:
    if not args.path.exists():  # before the output checks: a typo is not "--out is inside the engines dir"
        raise BadInput("no such file or directory (give an engines dir or one engine)", path=args.path)
    engines = [args.path if args.path.is_dir() else args.path.parent]
    _common.check_output_file(args.out, "--out", engines=engines, kind=outputs.RESULTS_JSON, args=args)
    _common.check_output_file(args.csv, "--csv", ".csv", engines=engines, kind=outputs.CSV_TABLE, args=args)
    _common.check_distinct_outputs(out=args.out, csv=args.csv)
    config = _common.timing_config(args)
    data = _common.load_inputs(args)
    serving = _serving.serving_config(args, copies=config.copies)
    fit_settings = max_batch_settings(args)
    if args.path.is_dir():
        for problem in scan_dir(args.path, runtime_caches=_common.keeps_runtime_cache).problems():
            print(f"warning: {problem}", file=sys.stderr)
        print_whatif_area(args.path)
    found = search_max_batch(args, fit_settings) if fit_settings is not None else []
    on_plan, on_start, on_result, close = progress()
    try:
        with sigterm_as_interrupt():
            results = bench_path(
                args.path, config, batch_sizes=_common.batch_sizes(args),
                feed=FeedSettings(shapes=_common.shapes(args), seed=args.seed, int_range=_common.int_range(args),
                                  data=data),
                hooks=BenchHooks(on_plan=on_plan, on_start=on_start, on_result=on_result),
                threads=args.threads, autotune=args.autotune,
            )
    finally:
        close()
    results.max_batch = found
    print_table(results)
    line = terminal_line((r.third_party_warnings for r in results.results), f"{args.out}: results[].third_party_warnings")
    if line:
        print(line)
    print_max_batch(found)
    if serving is not None and not results.interrupted:
        run_serving(args, results, serving)
    write_outputs(results, args.out, args.csv)
    if results.interrupted:
        report_interruption(results)
        return _common.EXIT_INTERRUPTED
    return 0
