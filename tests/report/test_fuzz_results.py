"""Issues 36 (deliverable 7) and 45 (deliverable 7): a fuzz test through the real CLI (``trtprof.cli.main``,
in-process for speed). Real result files (a compare JSON, a bench results JSON) are mutated 600 times
each — truncation, type swaps, null, NaN/±inf/1e308, integers beyond a float's range, ``-1``, a float
where a flag or stamp was, deep nesting, a key removed, a key given twice (``environment`` turned into a
string, ``settings`` into null), a 10⁶-character string and a 10⁶-element list in one field — and both
``report`` and ``plot`` must answer each with exit 0, or exit 2 and one line: never a traceback, and no
run over ``HANG_S`` seconds of CPU time (a hang guard, not a speed claim: a watchdog timer on the
process's CPU time, ``ITIMER_PROF``, interrupts a run that spins, so a CI machine shared with other jobs
does not trip it; a run blocked without spinning is caught by ``BLOCKED_S`` of wall time).

Cost: drawing the figures' pixels (matplotlib's ``savefig``, ~80 % of a report) is skipped for all but
every ``DRAWN_EVERY``-th mutant; the figures are still built from the mutated data, so a value a figure
cannot take still fails here. The mutants are shared among ``PROCESSES`` forked processes (CI's 2
cores): about 0.2 s of CPU per mutant, 2-4 minutes in all. Seeded: a failure names the mutation that
reproduces it."""
from __future__ import annotations

import contextlib
import io
import json
import multiprocessing
import random
import signal
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from trtprof.cli import main

SEED = 45
MUTATIONS = 600  # of each file, each through report and plot
HANG_S = 10.0  # CPU seconds of one run
BLOCKED_S = 60.0  # wall seconds of one run (a load of 10 on 2 cores stretched a 1.4 s CPU run to 10.6 s)
DRAWN_EVERY = 200  # these mutants get their figures drawn for real (pixels, PNG)
HUGE_EVERY = 50  # one mutant in this many gets a 10⁶-long value (2-4 s of CPU each)
PROCESSES = 2
HUGE = 10**6
SWAPS: list[Any] = [None, "abc", "<script>x</script>", [], {}, True, False, -1, 0, 1.5, 0.5, 10**400, -(10**400),
                    2**64, float("nan"), float("inf"), -float("inf"), 1e308, -1e308,
                    [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]
HUGE_SWAPS: list[Any] = ["x" * HUGE, ["a"] * HUGE, [0.5] * HUGE, {str(i): i for i in range(HUGE // 10)}]


def _paths(value: Any, prefix: tuple = ()) -> list[tuple]:
    out = [prefix]
    if isinstance(value, dict):
        for k, v in value.items():
            out += _paths(v, prefix + (k,))
    elif isinstance(value, list):
        for i, v in enumerate(value[:3]):  # the first few items: the rest are shaped alike
            out += _paths(v, prefix + (i,))
    return out


def _get(data: Any, path: tuple) -> Any:
    for key in path:
        data = data[key]
    return data


def _set(data: Any, path: tuple, value: Any, delete: bool = False) -> Any:
    if not path:
        return value
    parent = _get(data, path[:-1])
    if delete and isinstance(parent, dict):
        del parent[path[-1]]
    else:
        parent[path[-1]] = value
    return data


def _duplicate_key(original: dict, rng: random.Random) -> tuple[str, str]:
    """One object of the file written with one of its keys twice, the second time with another value
    (``json`` keeps the last: ``environment`` becomes a string, ``settings`` null)."""
    objects = [p for p in _paths(original) if isinstance(_get(original, p), dict) and _get(original, p)]
    path = rng.choice(objects)
    data = json.loads(json.dumps(original))
    target = _get(data, path)
    key = rng.choice(sorted(target))
    value = rng.choice(SWAPS[:10])
    marker = "\u0000dup-marker\u0000"
    text = json.dumps(_set(data, path, marker) if path else marker, allow_nan=True)
    inner = json.dumps(target, allow_nan=True)[:-1] + f", {json.dumps(key)}: {json.dumps(value)}}}"
    return f"{'.'.join(map(str, path)) or '(top)'}.{key} given twice, then {str(value)[:20]}", \
        text.replace(json.dumps(marker), inner, 1)


def _mutants(original: dict, n: int, rng: random.Random) -> list[tuple[str, str]]:
    """(what, file text) pairs: mostly one field changed; some truncations, duplicate keys, huge values."""
    text = json.dumps(original, allow_nan=True)
    paths = [p for p in _paths(original) if p and "samples_ms" not in p[-2:]]  # not every sample: the fields
    out = []
    for i in range(n):
        if i % 10 == 9:
            cut = rng.randrange(1, len(text))
            out.append((f"truncated at {cut}", text[:cut]))
            continue
        if i % 10 == 8:
            out.append(_duplicate_key(original, rng))
            continue
        path = rng.choice(paths)
        data = json.loads(text)
        if i % HUGE_EVERY == 7:
            value = rng.choice(HUGE_SWAPS)
            _set(data, path, value)
            what = f"{'.'.join(map(str, path))} = a {type(value).__name__} of {len(value):,}"
        elif rng.random() < 0.15:
            _set(data, path, None, delete=True)
            what = f"{'.'.join(map(str, path))} removed"
        else:
            value = rng.choice(SWAPS)
            _set(data, path, value)
            what = f"{'.'.join(map(str, path))} = {str(value)[:40]}"
        out.append((what, json.dumps(data, allow_nan=True)))
    return out


class Hang(Exception):
    """Raised in the run by the watchdog timers (HANG_S of CPU time, BLOCKED_S of wall time)."""


def _on_timer(signum, frame):
    spent = f"{HANG_S:.0f} s of CPU time" if signum == signal.SIGPROF else f"{BLOCKED_S:.0f} s"
    raise Hang(f"still running after {spent}")


def _run(argv: list[str]) -> tuple[int | None, BaseException | None]:
    """(exit code, escaped exception) of one in-process CLI run under the watchdogs (the spec and export
    fuzz of test_fuzz_specs_exports.py uses it too)."""
    code, err, _ = _guarded(argv)
    return code, err


def _guarded(argv: list[str]) -> tuple[int | None, BaseException | None, float]:
    """(exit code, escaped exception, CPU seconds) of one in-process CLI run under the watchdogs."""
    previous = {sig: signal.signal(sig, _on_timer) for sig in (signal.SIGPROF, signal.SIGALRM)}
    started = time.process_time()
    signal.setitimer(signal.ITIMER_PROF, HANG_S)
    signal.setitimer(signal.ITIMER_REAL, BLOCKED_S)
    try:
        return main(argv), None, time.process_time() - started
    except SystemExit as done:
        return (done.code if isinstance(done.code, int) else 2), None, time.process_time() - started
    except BaseException as err:  # noqa: BLE001 - any escape is the bug this test looks for
        return None, err, time.process_time() - started
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)
        signal.setitimer(signal.ITIMER_REAL, 0)
        for sig, handler in previous.items():
            signal.signal(sig, handler)


@pytest.fixture(scope="module")
def real_files(tmp_path_factory) -> dict[str, dict]:
    from trtprof.model.demo import make_demo_model

    tmp = tmp_path_factory.mktemp("fuzz")
    model = make_demo_model(tmp / "convnet.onnx", channels=8, image=16, classes=10)
    assert main(["compare", str(model), "--engines", str(tmp / "e"), "--backend", "onnxruntime", "--in-process",
                 "--batch-sizes", "1", "--time-budget-s", "2", "--round-iterations", "2", "--out",
                 str(tmp / "c.json")]) == 0
    assert main(["bench", str(tmp / "e"), "--warmup", "1", "--iterations", "3", "--out", str(tmp / "r.json")]) == 0
    return {"compare": json.loads((tmp / "c.json").read_text()), "bench": json.loads((tmp / "r.json").read_text())}


@pytest.fixture
def pixels_skipped(monkeypatch):
    """``Figure.savefig`` writes a PNG signature instead of drawing, unless ``draw[0]`` is set."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    real = Figure.savefig
    draw = [False]

    def savefig(self, fname, *args, **kwargs):
        if draw[0]:
            return real(self, fname, *args, **kwargs)
        if hasattr(fname, "write"):
            fname.write(b"\x89PNG\r\n\x1a\n")
        else:
            Path(fname).write_bytes(b"\x89PNG\r\n\x1a\n")
        return None

    monkeypatch.setattr(Figure, "savefig", savefig)
    return draw


def _failure(command: str, what: str, code: int | None, err: BaseException | None, cpu: float, stderr: str) -> str | None:
    lines = [line for line in stderr.splitlines() if line.strip() and not line.startswith("warning")]
    if err is not None:
        return f"{command} with {what}: {type(err).__name__}: {err}"[:300]
    if cpu > HANG_S:
        return f"{command} with {what}: {cpu:.1f} s of CPU time (over {HANG_S:.0f} s)"
    if code not in (0, 2) or (code == 2 and len(lines) != 1):
        return f"{command} with {what}: rc {code}: {stderr[:200]}"
    return None


_WORK: dict[str, Any] = {}  # what the forked processes read: the mutants and the folder (set before forking)


def _check(share: int) -> tuple[list[str], dict[int, int]]:
    """Every PROCESSES-th mutant from ``share`` through report and plot (in a forked process): the
    failures, and how many runs answered 0 and 2."""
    tmp, mutants, draw = Path(_WORK["tmp"]) / f"share{share}", _WORK["mutants"], _WORK["draw"]
    tmp.mkdir()
    failures, answered = [], {0: 0, 2: 0}
    for i in range(share, len(mutants), PROCESSES):
        what, text = mutants[i]
        src = tmp / "m.json"
        src.write_text(text)
        draw[0] = i % DRAWN_EVERY == 0
        for command in ("report", "plot"):
            out = ["-o", str(tmp / "m.html")] if command == "report" else ["--out", str(tmp / "p")]
            stderr = io.StringIO()
            with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(stderr):
                code, err, cpu = _guarded([command, str(src), *out, "--force"])
            failure = _failure(command, what, code, err, cpu, stderr.getvalue())
            if failure:
                failures.append(failure)
            elif code in answered:
                answered[code] += 1
    return failures, answered


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="forks its workers")
@pytest.mark.parametrize("kind", ["compare", "bench"])
def test_mutated_results_never_give_a_traceback_or_hang(kind, real_files, tmp_path, pixels_skipped):
    rng = random.Random(f"{SEED}-{kind}")
    _WORK.update(tmp=str(tmp_path), mutants=_mutants(real_files[kind], MUTATIONS, rng), draw=pixels_skipped)
    with multiprocessing.get_context("fork").Pool(PROCESSES) as pool:
        shares = pool.map(_check, range(PROCESSES))
    failures = [f for share, _ in shares for f in share]
    answered = {code: sum(a[code] for _, a in shares) for code in (0, 2)}
    assert not failures, f"{len(failures)} of {2 * MUTATIONS} runs:\n" + "\n".join(failures)
    assert answered[0] + answered[2] == 2 * MUTATIONS
    assert answered[0] > 0 and answered[2] > 0  # both rendered and refused mutants were seen: the mutations bite


def _spin(args) -> None:
    while True:
        pass


@pytest.mark.parametrize("hang,limits", [(_spin, {"HANG_S": 0.2}), (lambda args: time.sleep(5), {"BLOCKED_S": 0.2})])
def test_the_watchdog_catches_a_run_that_spins_or_blocks(hang, limits, monkeypatch):
    """The hang guards themselves: a command that spins past HANG_S of CPU time, or sleeps past BLOCKED_S,
    is interrupted and reported (the limits are shortened so this takes 0.2 s each)."""
    import sys

    import trtprof.cli.report as report_cli

    for name, value in limits.items():
        monkeypatch.setattr(sys.modules[__name__], name, value)
    monkeypatch.setattr(report_cli, "run", hang)
    started = time.monotonic()
    code, err, _ = _guarded(["report", "x.json"])
    assert isinstance(err, Hang) and time.monotonic() - started < 5
