"""Argument helpers shared by subcommands: option types that refuse bad values at parse time,
output-path checks made before any long work, and SIGTERM handled like Ctrl-C."""
from __future__ import annotations

import argparse
import contextlib
import os
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Sequence

from ..engines.cache import ENTRY_NAME
from ..engines.cache_admin import TEMP_NAME, is_engines_dir
from ..errors import BadInput, write_failure
from ..model.inputs import MAX_BATCH_SIZE, parse_batch_sizes, parse_int_range, parse_shape_arg
from ..util import outputs
from ..util.bounds import ONE_DAY_S, Bound
from ..util.outputs import OutputKind
from ..util.signals import signals_deferred
from ..spec import Precision
from ..measure.timing import DEFAULT_ITERATIONS, DEFAULT_WARMUP, MAX_ITERATIONS, TimingConfig

if TYPE_CHECKING:
    from ..compare.report_value import CompareDocument


def keeps_runtime_cache(backend: str) -> bool:
    """Whether the engines of ``backend`` keep runtime caches beside them (``Capabilities.runtime_cache``): what
    ``cache ls/prune`` and ``bench DIR`` tell ``engines.cache_admin.scan_dir``. Asked only of an entry stem's
    backend with a file named like a runtime cache beside it."""
    from .. import backends

    return backends.capabilities(backend).runtime_cache


def add_common_debug(parser: argparse.ArgumentParser) -> None:
    """List ``--debug`` in a subcommand's help too (``main`` accepts it anywhere on the line)."""
    parser.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help="show tracebacks for errors")


def add_shape_args(parser: argparse.ArgumentParser, *, batch_default: str | None) -> None:
    parser.add_argument(
        "--batch-sizes", default=batch_default, metavar="B1,B2,…",
        help="batch sizes, comma-separated" + (f" (default {batch_default})" if batch_default else
                                               " (default: the sizes each engine was built for)"),
    )
    add_shape_arg(parser)


def add_shape_arg(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--shape", action="append", default=[], metavar="NAME:D0xD1x…",
        help="full shape of an input with dynamic dims other than batch; the first dim is replaced by "
             "the batch size (repeatable)",
    )


def add_inputs_arg(parser: argparse.ArgumentParser, *, what: str) -> None:
    parser.add_argument(
        "--inputs", default=None, metavar="PATH",
        help=f"your inputs instead of random ones: an .npz (arrays by input name, samples first), a directory "
             f"of NAME.npy, or loader.py:fn returning/yielding feed dicts (loader.py is imported and run as "
             f"Python code, with your permissions: only name files you trust); {what}")


def load_inputs(args: argparse.Namespace):
    """``--inputs`` read and checked for form (names/dtypes/shapes are checked against the model later);
    None without it."""
    from ..model.user_inputs import load_inputs as load

    data = load(getattr(args, "inputs", None))
    if data is not None:  # its arrays fix every dim: ``shapes`` uses them, so --shape is not needed too
        args.inputs_shapes = data.shape_overrides()
    return data


def add_timing_args(parser: argparse.ArgumentParser, *, warmup: int = DEFAULT_WARMUP,
                    iterations: int = DEFAULT_ITERATIONS) -> None:
    """The timing options; ``warmup``/``iterations``: this command's defaults (the demo's are shorter)."""
    add_common_debug(parser)
    g = parser.add_argument_group("timing")
    g.add_argument("--warmup", type=warmup_count, default=warmup, help=f"warmup runs (default {warmup})")
    g.add_argument("--warmup-ms", type=warmup_ms, default=None,
                   help=f"also warm up for at least this many ms (at most {ONE_DAY_S * 1000:,.0f}, a day)")
    g.add_argument("--iterations", type=iteration_count, default=iterations,
                   help=f"timed runs per engine and batch size (default {iterations})")
    g.add_argument("--duration-s", type=seconds_in_a_day, default=None,
                   help="also keep measuring until this many seconds have passed")
    g.add_argument("--no-copies", action="store_true", help="GPU: time compute only, without H2D/D2H copies")
    add_launch_args(g)
    g.add_argument("--spin-wait", action="store_true", help="GPU: busy-wait for completion instead of blocking sync")
    g.add_argument("--int-range", default="0,100", metavar="LOW,HIGH", help="range of random integer inputs")
    g.add_argument("--seed", type=seed_value, default=0, help="seed of the random inputs (0 … 2**32-1)")
    g.add_argument("--threads", type=thread_count, default=None, metavar="N",
                   help="CPU (onnxruntime): intra-op threads, inter-op 1 (default: onnxruntime's, all cores); "
                        f"at most {MAX_THREADS_PER_CORE} per usable core; recorded in the results")


def add_launch_args(parser: Any) -> None:
    """``--eager`` / ``--cuda-graph``: GPU inference replays a captured CUDA graph by default, as TensorRT
    engines are run in production and trtexec times them; an arm whose capture fails runs eager, said so."""
    parser.add_argument("--cuda-graph", action="store_true",
                        help="GPU: capture the enqueue in a CUDA graph and replay it (the default)")
    parser.add_argument("--eager", action="store_true",
                        help="GPU: time eager launches instead of replaying a CUDA graph (host launch cost included)")


def cuda_graph(args: argparse.Namespace) -> bool:
    """Replay CUDA graphs unless ``--eager``; both flags together are a contradiction."""
    if getattr(args, "eager", False) and getattr(args, "cuda_graph", False):
        raise BadInput("--eager and --cuda-graph contradict each other (CUDA graphs are the default)")
    return not getattr(args, "eager", False)




def add_backend_arg(parser: Any, default: str | None = "auto", note: str = "") -> None:
    """``--backend``, its choices and help from the backend registry (plugins included)."""
    from .. import backends

    parser.add_argument("--backend", default=default, metavar="BACKEND",
                        help=backends.choices_help(note) + ("" if default == "auto" else " (default auto)"))


def launch_line(args: argparse.Namespace) -> str | None:
    """The first line a GPU timing prints, how its launches are timed (None where the timing is the CPU's:
    an explicit GPU backend, or ``auto`` on a machine with a CUDA GPU, is timed on the GPU)."""
    from .. import backends
    from ..system import cuda

    backend = getattr(args, "backend", "auto")
    on_gpu = backend != "auto" and backend in backends.names() and backends.capabilities(backend).device == "cuda"
    if not on_gpu and not (backend == "auto" and cuda.device_count() > 0):
        return None
    return ("timing: eager launches (--eager)" if not cuda_graph(args)
            else "timing: CUDA graph replay (the default; --eager times eager launches; an arm whose capture "
                 "fails runs eager, said so)")


def add_autotune_arg(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--no-autotune", dest="autotune", action="store_false",
                        help="torch: let cuDNN pick kernels by heuristics instead of timing them "
                             "(cudnn.benchmark off); default: autotuned, as TensorRT always is")


def check_round_args(args: argparse.Namespace) -> None:
    """The stopping options compare and train-compare share (``target_ci`` and ``round_iterations``;
    their time budget is a ``seconds_in_a_day``), refused before any work (their types bound them at parse
    time already; these checks stay for callers that build the namespace themselves)."""
    if not 0 < args.target_ci < 1:
        raise BadInput("--target-ci must be between 0 and 1 (e.g. 0.01 for ±1 %)")
    if args.round_iterations is not None and args.round_iterations <= 0:
        raise BadInput("--round-iterations must be > 0")
    if args.round_iterations is not None and args.round_iterations > MAX_ITERATIONS:
        raise BadInput(f"--round-iterations {args.round_iterations}: at most {MAX_ITERATIONS:,} (the timing loop's "
                       "safety stop per block)")


def timing_config(args: argparse.Namespace) -> TimingConfig:
    return TimingConfig(
        warmup=args.warmup,
        warmup_ms=args.warmup_ms,
        iterations=args.iterations,
        duration_s=args.duration_s,
        copies=not args.no_copies,
        cuda_graph=cuda_graph(args),
        spin_wait=args.spin_wait,
    )


def batch_sizes(args: argparse.Namespace) -> tuple[int, ...] | None:
    return parse_batch_sizes(args.batch_sizes) if args.batch_sizes else None


def shapes(args: argparse.Namespace) -> dict[str, tuple[int, ...]]:
    """--shape NAME:DIMS, over the shapes of --inputs' arrays once ``load_inputs`` read them (dim 0
    stands for the batch): an .npz that fixes every dim needs no --shape."""
    return {**getattr(args, "inputs_shapes", {}), **dict(parse_shape_arg(s) for s in args.shape)}


def int_range(args: argparse.Namespace) -> tuple[int, int]:
    return parse_int_range(args.int_range)


def precisions_from_flags(args: argparse.Namespace) -> list[Precision]:
    chosen = [p for p in Precision if getattr(args, p.value, False)]
    return chosen or [Precision.FP32]


def format_table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    from ..util.texttable import grid

    return "\n".join(grid(headers, rows))


# --- option types: a bad value is an argparse error (exit 2, one line naming the option) ----------
# argparse turns ValueError/TypeError/ArgumentTypeError raised by ``type=`` into
# "argument --opt: invalid ..." with exit status 2, before anything runs.

MAX_SEED = 2**32 - 1  # numpy's default_rng accepts any non-negative int; 32 bits is what users type

# Every numeric option's type is one of these bounds (``util.bounds.Bound``: finite, of one kind, from a
# least to a documented most value), shared by every command that has the option. docs/safety.md lists
# them; tests/cli/test_option_bounds.py checks that no numeric option is without one.
SAFETY_STOP = "the timing loop's safety stop"
A_DAY = "a day"
warmup_count = Bound(int, 0, MAX_ITERATIONS, why=SAFETY_STOP)  # --warmup: the loop stops there too
iteration_count = Bound(int, 1, MAX_ITERATIONS, why=SAFETY_STOP)  # a larger count would be cut without a word
warmup_ms = Bound(float, 0, ONE_DAY_S * 1000, why=A_DAY, unit=" ms")
seconds_in_a_day = Bound(float, 0, ONE_DAY_S, why=A_DAY, unit=" s", low_open=True)  # --duration-s, --time-budget-s
ms_in_a_day = Bound(float, 0, ONE_DAY_S * 1000, why=A_DAY, unit=" ms", low_open=True)  # --slo-ms
batch_size = Bound(int, 1, MAX_BATCH_SIZE, why="dims are int32 in TensorRT and most runtimes")
seed_value = Bound(int, 0, MAX_SEED, between=True)
fraction = Bound(float, 0, 1, low_open=True, high_open=True, between=True)  # --target-ci
MAX_PROFILED_ITERATIONS = 10_000  # each profiled run keeps one event per layer (ONNX Runtime: a JSON record)
profiled_iterations = Bound(int, 1, MAX_PROFILED_ITERATIONS, why="each profiled run keeps an event per layer")
MAX_ROWS = 1_000_000
table_rows = Bound(int, 0, MAX_ROWS)  # profile --top (0 = all)


def precision(text: str) -> Precision:
    """A precision option's type (``import trtexec --precision``): an unknown name is argparse's one-line
    error naming the option (``Precision.parse``'s BadInput escaped argparse as a traceback)."""
    try:
        return Precision.parse(text)
    except BadInput as err:
        raise argparse.ArgumentTypeError(err.message) from None


# More intra-op threads than this per usable core only adds contention (each thread spins for work
# between ops), and 100000 threads made the machine stop answering: refused before anything starts.
MAX_THREADS_PER_CORE = 4


def thread_count(text: str) -> int:
    """``--threads``: a positive integer, at most ``MAX_THREADS_PER_CORE`` × the cores this process may use
    (a bound known only on the machine, hence a function rather than a fixed ``Bound``)."""
    from ..serving.driver import usable_cores

    cores = usable_cores()
    return int(Bound(int, 1, MAX_THREADS_PER_CORE * cores,
                     why=f"{MAX_THREADS_PER_CORE} per usable core, {cores} here")(text))


# --- results files: whatever a file holds, reading it is one line or a page --------------------------

# what rendering a results file that passed its checks can still raise on a value of the wrong kind in a field
# no check names (the results fuzz finds new ones as the pages grow: issue 45)
RENDER_ERRORS = (TypeError, KeyError, ValueError, AttributeError, IndexError, ZeroDivisionError, OverflowError)


@contextlib.contextmanager
def rendering(path: Path):
    """Around drawing a page or plots from the results file ``path``: an error of ``RENDER_ERRORS`` is a field of
    the wrong kind that no check named, said in one line (exit 2; --debug shows where)."""
    try:
        yield
    except RENDER_ERRORS as err:
        raise BadInput(f"cannot draw it: a field holds a value of the wrong kind or is missing "
                       f"({type(err).__name__}: {str(err)[:80]})", path=path) from err


# --- output paths: checked before the work whose result they will hold ----------------------------

def _probe_writable_dir(folder: Path, option: str, path: Path) -> None:
    """Create and remove a temp file in ``folder``: the only test that also holds for root, for a
    read-only mount and for ACLs (``os.access`` answers none of these reliably)."""
    try:
        fd, tmp = tempfile.mkstemp(prefix=".trtprof-probe-", dir=folder)
    except OSError as err:
        raise BadInput(f"{option}: cannot write in {folder} ({err.strerror or err})", path=path) from err
    os.close(fd)
    os.unlink(tmp)


NAME_MAX_FALLBACK = 255  # bytes in one file name where the file system does not say (Linux's NAME_MAX)
PATH_MAX_FALLBACK = 4096  # bytes in a whole path (Linux's PATH_MAX)


def check_name_length(path: Path, option: str) -> None:
    """Refuse, before any work, a path the file system cannot hold: a name (any part) longer than the
    folder's NAME_MAX, or a whole path longer than PATH_MAX, in bytes, in one line (issue 45: such names
    failed after the work, with a traceback)."""
    raw = os.fsencode(str(path))
    try:  # an ancestor whose own name is too long raises too: then the usual maximum
        name_max = os.pathconf(_existing_ancestor(path), "PC_NAME_MAX")
    except (OSError, ValueError):
        name_max = NAME_MAX_FALLBACK
    longest = max((len(os.fsencode(part)) for part in path.parts), default=0)
    if longest > name_max:
        raise BadInput(f"{option}: a name in the path is {longest} bytes; the file system takes at most {name_max}",
                       path=Path(os.fsdecode(raw[:120])) if len(raw) > 120 else path)
    if len(os.fsencode(str(path.absolute()))) > PATH_MAX_FALLBACK:
        raise BadInput(f"{option}: the path is {len(raw)} bytes; at most {PATH_MAX_FALLBACK} can be opened",
                       path=Path(os.fsdecode(raw[:120])))


def _existing_ancestor(path: Path) -> Path:
    for parent in path.parents:
        if parent.exists():
            return parent
    return Path(".")


def _resolved(path: Path) -> Path:
    return Path(os.path.abspath(path)).resolve()


def check_not_engines_place(path: Path, option: str, engines: Sequence[Path | None] = ()) -> None:
    """Refuse an output inside an engines dir (the given ones, or any folder that is one) or named
    like an engine's file: `bench` would read it as an engine and `cache prune` could remove it."""
    target = _resolved(path)
    for root in [r for r in engines if r is not None]:
        root = _resolved(root)
        if target == root or root in target.parents:
            raise BadInput(f"{option}: is inside the engines dir {root}; write outputs elsewhere",
                           path=path)
    for folder in [target, *target.parents]:
        if is_engines_dir(folder):
            raise BadInput(f"{option}: is inside the engines dir {folder}; write outputs elsewhere", path=path)
    if ENTRY_NAME.fullmatch(target.name) or TEMP_NAME.fullmatch(target.name):
        raise BadInput(f"{option}: is named like an engine's file; choose another name", path=path)


def check_distinct_outputs(**paths: Path | None) -> None:
    """Two outputs of one command naming the same file: the second write would replace the first."""
    seen: dict[Path, str] = {}
    for option, path in paths.items():
        if path is None:
            continue
        name = "--" + option.replace("_", "-")
        key = _resolved(path)
        if key in seen:
            raise BadInput(f"{name}: is the same file as {seen[key]}; give each output its own file", path=path)
        seen[key] = name


def add_force_arg(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--force", action="store_true",
                        help="replace an existing output file that trtprof did not write (never one of the "
                             "command's inputs)")


# options that name what a command writes, never what it reads
OUTPUT_OPTIONS = frozenset({"out", "csv", "html", "output", "dir", "trace_dir"})


def command_inputs(args: argparse.Namespace) -> list[Path]:
    """Every path the command reads: each Path-valued option or argument that is not an output, and
    the file part of ``--inputs loader.py:fn`` / a ``file.py:make`` model."""
    found: list[Path] = []
    for name, value in vars(args).items():
        if name in OUTPUT_OPTIONS:
            continue
        for v in value if isinstance(value, list) else [value]:
            if isinstance(v, Path):
                found.append(v)
            elif isinstance(v, str) and name in ("inputs", "model", "interference", "results", "spec") and v:
                head, sep, _ = v.rpartition(":")
                found.append(Path(head if sep and head.endswith(".py") else v))
    return [p for p in found if p.exists()]


def check_replaceable(path: Path, option: str, kind: OutputKind, args: argparse.Namespace) -> None:
    """Outputs never destroy inputs (util.outputs): not an input, and not a file of someone else's."""
    outputs.check_replaceable(path, option, kind, command_inputs(args), force=bool(getattr(args, "force", False)))


def check_folder_files(folder: Path, option: str, files: Sequence[tuple[str, OutputKind]],
                       args: argparse.Namespace) -> None:
    outputs.check_folder_files(folder, option, files, command_inputs(args),
                               force=bool(getattr(args, "force", False)))


def check_output_file(path: Path | None, option: str, suffix: str = ".json",
                      engines: Sequence[Path | None] = (), *, kind: OutputKind,
                      args: argparse.Namespace) -> None:
    """Refuse, before any work, an output file that cannot be written: a directory, a path under a
    file, a place without write permission (the parent folders are created on write), a place in an
    engines dir, one of the command's inputs, or an existing file that is not a trtprof ``kind``."""
    if path is None:
        return
    path = Path(path)
    check_name_length(path, option)
    check_not_engines_place(path, option, engines)
    check_replaceable(path, option, kind, args)
    if path.is_dir():
        raise BadInput(f"{option}: is a directory; give a file name (e.g. {path / ('out' + suffix)})", path=path)
    folder = path.parent if path.parent.exists() else _existing_ancestor(path)
    if not folder.is_dir():
        raise BadInput(f"{option}: {folder} is not a directory", path=path)
    if path.exists() and not os.access(path, os.W_OK) and os.geteuid() != 0:
        raise BadInput(f"{option}: the file is not writable", path=path)
    _probe_writable_dir(folder, option, path)


def check_output_dir(path: Path, option: str, engines: Sequence[Path | None] = ()) -> None:
    """Refuse an output folder that is an existing file, cannot be created/written, or is (in) an
    engines dir."""
    path = Path(path)
    check_not_engines_place(path, option, engines)
    if path.exists() and not path.is_dir():
        raise BadInput(f"{option}: exists and is not a directory; give a folder", path=path)
    folder = path if path.is_dir() else _existing_ancestor(path)
    if not folder.is_dir():
        raise BadInput(f"{option}: {folder} is not a directory", path=path)
    _probe_writable_dir(folder, option, path)


# --- interruption: SIGTERM is treated like Ctrl-C, so both keep finished work ---------------------

EXIT_INTERRUPTED = 130  # 128 + SIGINT, what shells report for Ctrl-C


def write_compare_outputs(out: Path, write: Callable[[Path], None], warnings: Sequence[str],
                          md: CompareDocument | None) -> None:
    """The end of every ``compare``: the JSON written with Ctrl-C/SIGTERM deferred (a full disk is one
    line saying the comparisons are printed above), then the warnings, the Markdown summary on
    request (``md``: the document just written, its summary made from that value, the file not read
    back; None without --md), and where the JSON is."""
    with signals_deferred():  # a second Ctrl-C must not lose the finished comparisons
        try:
            write(out)
        except OSError as err:
            raise write_failure(err, out, kept="the comparisons are printed above") from err
    for w in warnings:
        print(f"WARNING: {w}")
    if md is not None:
        from ..report.compare_page import load, markdown_summary

        print()
        print(markdown_summary(load(out, md)), end="")
    print(f"compare: {out}")
