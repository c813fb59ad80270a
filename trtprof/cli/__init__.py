"""Command-line entry point. One module per subcommand, each with ``add_parser(subparsers)`` that
registers its parser with ``set_defaults(func=run)``; ``run(args) -> int``.

Every ``TrtprofError`` becomes exit code 2 and one line on stderr (``--debug`` shows the traceback).
"""
from __future__ import annotations

import argparse
import functools
import importlib
import inspect as pyinspect  # the name `inspect` is the subcommand module trtprof.cli.inspect
import errno
import sys
import time
from typing import Sequence

from .. import __version__
from ..errors import WRITE_ERRNOS, TrtprofError, write_failure

# A module listed here but absent is skipped (a subcommand not part of this build); module names use
# underscores, the command name is whatever the module's ``add_parser`` registers.
SUBCOMMANDS = ("build", "bench", "plot", "demo", "convert", "inspect", "compare", "report", "profile", "cache",
               "train_compare", "sweep", "fix_fp16", "import_trtexec")


class _Parser(argparse.ArgumentParser):
    """argparse with a one-line error (the usage block is one ``--help`` away), exit 2 as before."""

    def error(self, message: str):  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def make_parser() -> argparse.ArgumentParser:
    from ._examples import add_examples

    parser = _Parser(
        prog="trtprof",
        description="Build FP32/FP16 inference engines, cache them, and measure their latency.",
    )
    parser.add_argument("--version", action="version", version=f"trtprof {__version__}")
    parser.add_argument("--debug", action="store_true", help="show tracebacks for errors")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name in SUBCOMMANDS:
        try:
            module = importlib.import_module(f"{__name__}.{name}")
        except ModuleNotFoundError as err:
            if err.name == f"{__name__}.{name}":
                continue  # subcommand not part of this build
            raise
        module.add_parser(sub)
    add_examples(sub)
    return parser


def early_line(argv: Sequence[str], started: float, now: float) -> str:
    """compare's first line, said before any subcommand's module is imported (importing them all took 0.8 s
    on the idle 2-core machine and 2-3 s loaded, and its --time-budget-s counts from the command's start):
    the seconds since ``started``, read at ``now`` (``time.perf_counter()`` values). "" for other commands
    and for --help (whose output is the help alone)."""
    words = [a for a in argv if not a.startswith("-")]
    if not words or words[0] != "compare" or {"-h", "--help"} & set(argv):
        return ""
    return (f"start-up, {max(now - started, 0.0):.1f} s in: trtprof compare: loading its modules (a "
            "--time-budget-s counts from the command's start)")


def main(argv: Sequence[str] | None = None) -> int:
    entered = time.perf_counter()
    from ..util.console import fit_streams

    fit_streams()  # an ASCII or Latin-1 terminal gets '~' for '≈' (and the JSON), not a UnicodeEncodeError
    from ..util.clock import CommandClock, process_start

    # The command's clock (compare's --time-budget-s): from this process's start when it is the command
    # (argv from the command line), from here when a caller runs a command in its own process.
    started = process_start() if argv is None else None
    if started is None:
        started = entered
    argv = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in argv  # accepted anywhere: `trtprof build --debug …` too
    argv = [a for a in argv if a != "--debug"]
    early = early_line(argv, started, time.perf_counter())
    if early:
        print(early, flush=True)  # before the subcommands' imports (0.8 s idle, 2-3 s loaded): issue 44 #2
    parser = make_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as done:  # --help, --version, or a bad option (one line already printed): its code
        return done.code if isinstance(done.code, int) else 2
    args.debug = debug
    # the interpreter's start and the commands' imports are behind us: handed to a command that keeps time
    clock = CommandClock(started=started, imported=time.perf_counter())
    command = args.func
    if "clock" in pyinspect.signature(command).parameters:  # compare: its --time-budget-s counts from here
        command = functools.partial(command, clock=clock)
    from ..util.scratch import clean_stale
    from ..util.signals import sigterm_as_interrupt
    from ._common import EXIT_INTERRUPTED

    clean_stale()  # temp dirs of runs killed by SIGKILL (a day old, owner gone): nothing else removes them
    from ..system.address_space import check_address_space, is_mapping_failure

    try:
        check_address_space(args.command)  # ulimit -v too small for the libraries: one line, before any work
        with sigterm_as_interrupt():  # SIGTERM (a scheduler, `kill`) says what Ctrl-C says, in every command
            return int(command(args) or 0)
    except ImportError as err:  # a library that could not be mapped: the address space ran out mid-command
        if args.debug or not is_mapping_failure(err):
            raise
        print(f"trtprof {args.command}: error: a library could not be loaded ({str(err).rsplit(': ', 1)[-1]}): "
              "the virtual memory limit (ulimit -v) is too small; raise it", file=sys.stderr)
        return 2
    except OSError as err:
        if args.debug or (err.errno not in WRITE_ERRNOS and err.errno != errno.ENAMETOOLONG):
            raise
        print(f"trtprof {args.command}: error: {write_failure(err)}", file=sys.stderr)  # full disk, ulimit -f
        return 2
    except TrtprofError as err:
        if args.debug:
            raise
        print(f"trtprof {args.command}: error: {err}", file=sys.stderr)
        return err.exit_code
    except KeyboardInterrupt:
        print("trtprof: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
