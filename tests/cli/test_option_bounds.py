"""Issue 45 item 6 (round 5, "options without bounds"): every numeric option has a documented most
value (docs/safety.md), checked when the line is parsed: argparse's one-line error, exit 2, before any
work. Each bound is tried just inside and just outside through the real parser; the issue's own cases
(`compare/fix-fp16 --time-budget-s 1e308`, `fix-fp16 --batch-size 2**64`) through `main`.

On 4b0e977 `--warmup 18446744073709551617`, `--warmup-ms 1e308`, `profile --iterations/--warmup 2**64`
were accepted (and ran for ever), `--time-budget-s 1e308` gave an OverflowError traceback after the
build, `fix-fp16 --batch-size 2**64` a numpy traceback.
"""
from __future__ import annotations

import argparse
import math
import re
from pathlib import Path

import pytest

from trtprof.cli import _common, _serving, main, make_parser
from trtprof.compare.accuracy_pass import parse_samples
from trtprof.spec import Precision

DAY_S = 86_400
DAY_MS = 86_400_000
INT32 = 2**31 - 1
SAFETY_STOP = 1_000_000

# the command line before the option: the positional arguments each command needs to parse
PREFIX = {
    "bench": ["bench", "engines"],
    "demo": ["demo"],
    "build": ["build", "m.onnx"],
    "compare": ["compare", "m.onnx"],
    "profile": ["profile", "m.onnx"],
    "fix-fp16": ["fix-fp16", "m.onnx"],
    "inspect": ["inspect", "engines"],
    "train-compare": ["train-compare", "net.py:make"],
    "sweep": ["sweep"],
    "convert": ["convert", "m.pb"],
    "import trtexec": ["import", "trtexec", "--times", "t.json", "--precision", "fp16", "--batch-size", "1"],
}

# (command, option): (kind, least, most, least excluded, most excluded) — the table of docs/safety.md
BOUNDS: dict[tuple[str, str], tuple[type, float, float, bool, bool]] = {
    **{(c, "--warmup"): (int, 0, SAFETY_STOP, False, False) for c in ("bench", "demo", "profile")},
    **{(c, "--warmup-ms"): (float, 0, DAY_MS, False, False) for c in ("bench", "demo")},
    **{(c, "--iterations"): (int, 1, SAFETY_STOP, False, False) for c in ("bench", "demo", "sweep")},
    **{(c, "--duration-s"): (float, 0, DAY_S, True, False) for c in ("bench", "demo")},
    **{(c, "--seed"): (int, 0, 2**32 - 1, False, False)
       for c in ("bench", "demo", "compare", "fix-fp16", "profile", "inspect", "train-compare")},
    **{(c, "--time-budget-s"): (float, 0, DAY_S, True, False) for c in ("compare", "fix-fp16", "sweep", "train-compare")},
    **{(c, "--round-iterations"): (int, 1, SAFETY_STOP, False, False)
       for c in ("compare", "fix-fp16", "sweep", "train-compare")},
    **{(c, "--target-ci"): (float, 0, 1, True, True) for c in ("compare", "train-compare")},
    **{(c, "--slo-ms"): (float, 0, DAY_MS, True, False) for c in ("bench", "compare")},
    **{(c, "--window-s"): (float, 0, 3600, True, False) for c in ("bench", "compare")},
    **{(c, "--serving-rounds"): (int, 1, 1000, False, False) for c in ("bench", "compare")},
    **{(c, "--concurrency"): (int, 1, 64, False, False) for c in ("bench", "compare")},
    **{(c, "--batch-size"): (int, 1, INT32, False, False) for c in ("fix-fp16", "profile", "inspect", "import trtexec")},
    **{(c, "--max-batch-limit"): (int, 1, INT32, False, False) for c in ("bench", "train-compare")},
    ("compare", "--timeline-batch"): (int, 1, INT32, False, False),
    ("build", "--opt-batch"): (int, 1, INT32, False, False),
    ("build", "--workspace-mb"): (int, 1, 2**20, False, False),
    ("build", "--builder-opt-level"): (int, 0, 5, False, False),
    ("compare", "--margin"): (float, 0, 0.5, True, True),
    ("compare", "--min-loads"): (int, 2, 64, False, False),
    ("compare", "--accuracy-samples"): (int, 1, INT32, False, False),  # or "all" (tests/compare/test_accuracy_pass.py)
    ("fix-fp16", "--max-builds"): (int, 1, 1000, False, False),
    **{(c, "--iterations"): (int, 1, 10_000, False, False) for c in ("profile", "inspect")},
    ("profile", "--top"): (int, 0, 1_000_000, False, False),
    ("train-compare", "--steps"): (int, 1, 100_000, False, False),
    ("sweep", "--workers"): (int, 1, 256, False, False),
    ("sweep", "--ray-cpus-per-cell"): (int, 1, 1024, False, False),
    ("sweep", "--cell-timeout-s"): (float, 0, 7 * DAY_S, True, False),
    ("convert", "--opset"): (int, 1, 99, False, False),
    **{("convert", o): (float, 0, 1e12, False, False) for o in ("--atol", "--rtol")},
}
# options whose bound is known only on the machine, tested with the cores pinned (4 × 4 usable cores)
BOUNDS.update({(c, "--threads"): (int, 1, 16, False, False) for c in ("bench", "demo")})
# bench --memory-limit-mb: type float, checked (finite, > 0, at most 1 PiB) with the search's settings,
# before any run (test below): its messages are a budget's, which tests/measure/test_maxbatch.py holds
CHECKED_IN_COMMAND = {("bench", "--memory-limit-mb")}
NOT_NUMBERS = (Path, str, Precision.parse, getattr(_common, "precision", Precision.parse))  # 4b0e977 had no wrapper


@pytest.fixture(autouse=True)
def four_cores(monkeypatch):
    monkeypatch.setattr("trtprof.serving.driver.usable_cores", lambda: 4)


@pytest.fixture(scope="module")
def parser() -> argparse.ArgumentParser:
    return make_parser()


def _commands(parser: argparse.ArgumentParser, prefix: str = ""):
    """(command name, its parser) for every subcommand, nested ones (`import trtexec`, `cache ls`) too."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                full = f"{prefix} {name}".strip()
                if any(isinstance(a, argparse._SubParsersAction) for a in sub._actions):
                    yield from _commands(sub, full)
                else:
                    yield full, sub


def _parse(parser, argv, capsys):
    """(namespace or None, the one error line or '')."""
    try:
        args = parser.parse_args(argv)
    except SystemExit as done:
        err = capsys.readouterr().err.strip().splitlines()
        assert done.code == 2 and len(err) == 1 and "Traceback" not in err[0], err
        return None, err[0]
    return args, ""


def _text(value: float, kind: type) -> str:
    return str(int(value)) if kind is int else repr(float(value))


def test_every_numeric_option_has_a_bound(parser):
    """No option is a bare int or float: each is a Bound (or a bounded list/machine-dependent type), and
    the table above (docs/safety.md's) names every one of them."""
    from trtprof.util.bounds import Bound

    found, unbounded = set(), []
    for command, sub in _commands(parser):
        for action in sub._actions:
            if not action.option_strings or action.type is None or action.type in NOT_NUMBERS:
                continue
            option = max(action.option_strings, key=len)  # --budget/--time-budget-s: the long one
            key = (command, option)
            if key in CHECKED_IN_COMMAND:
                continue
            if isinstance(action.type, Bound) or action.type in (_common.thread_count, _serving.concurrency_levels,
                                                                  parse_samples):
                found.add(key)
                if isinstance(action.type, Bound):
                    assert math.isfinite(action.type.maximum), key
            else:
                unbounded.append(key)
    assert not unbounded, f"numeric options without a bound: {unbounded}"
    assert found == set(BOUNDS), (found ^ set(BOUNDS))


CASES = sorted(BOUNDS.items())


@pytest.mark.parametrize("key, bound", CASES, ids=[f"{c} {o}" for (c, o), _ in CASES])
def test_each_bound_just_inside_and_just_outside(parser, capsys, key, bound):
    command, option = key
    kind, low, high, low_open, high_open = bound
    dest = option.lstrip("-").replace("-", "_")
    if kind is int:
        inside, outside = [low, high], [low - 1, high + 1]
    else:
        inside = [math.nextafter(low, math.inf) if low_open else low,
                  math.nextafter(high, -math.inf) if high_open else high]
        outside = [low if low_open else math.nextafter(low, -math.inf),
                   high if high_open else math.nextafter(high, math.inf)]
    for value in inside:
        args, err = _parse(parser, [*PREFIX[command], option, _text(value, kind)], capsys)
        assert args is not None, f"{option} {value}: {err}"
        got = getattr(args, dest)
        assert (got == (value,) if option == "--concurrency" else got == value), (option, value, got)
    for value in outside:
        args, err = _parse(parser, [*PREFIX[command], option, _text(value, kind)], capsys)
        assert args is None, f"{option} {_text(value, kind)} was accepted"
        assert option in err and f"trtprof {command}: error:" in err, err


@pytest.mark.parametrize("key, bound", CASES, ids=[f"{c} {o}" for (c, o), _ in CASES])
def test_the_issues_values_are_refused(parser, capsys, key, bound):
    """2**64 + 1 (`--warmup 18446744073709551617`), 1e308 and a 5,000-digit number for every option;
    NaN and ±inf for the float ones."""
    command, option = key
    kind = bound[0]
    values = ["18446744073709551617", "-18446744073709551617", "9" * 5000]
    values += ["1e308", "nan", "inf", "-inf", "NaN", "1e999"] if kind is float else ["1e308", "2.5", "nan"]
    for text in values:
        args, err = _parse(parser, [*PREFIX[command], option, text], capsys)
        assert args is None, f"{option} {text[:30]} was accepted"
        assert option in err and len(err) < 400, err


def test_bound_messages_name_the_most_and_why():
    assert str(pytest.raises(argparse.ArgumentTypeError, _common.warmup_count, "18446744073709551617").value) == \
        "'18446744073709551617': at most 1,000,000 (the timing loop's safety stop)"
    assert "at most 86,400 s (a day)" in str(pytest.raises(argparse.ArgumentTypeError,
                                                            _common.seconds_in_a_day, "1e308").value)
    assert "not a finite number" in str(pytest.raises(argparse.ArgumentTypeError, _common.warmup_ms, "nan").value)


def _run(argv, capsys) -> tuple[int, list[str]]:
    try:
        code = main(argv)
    except SystemExit as done:
        code = int(done.code or 0)
    return code, capsys.readouterr().err.strip().splitlines()


@pytest.mark.parametrize("command", ["compare", "fix-fp16"])
def test_time_budget_1e308_is_refused_before_any_build(command, conv_model, tmp_path, capsys):
    code, err = _run([command, str(conv_model), "--backend", "onnxruntime", "--time-budget-s", "1e308",
                      "--engines", str(tmp_path / "e"), "--out", str(tmp_path / "c.json")], capsys)
    assert code == 2 and len(err) == 1 and "--time-budget-s" in err[0] and "a day" in err[0], err
    assert not (tmp_path / "e").exists() and not (tmp_path / "c.json").exists()


def test_fix_fp16_batch_2_to_the_64_is_refused_before_any_build(conv_model, tmp_path, capsys):
    code, err = _run(["fix-fp16", str(conv_model), "--backend", "onnxruntime", "--batch-size", str(2**64),
                      "--engines", str(tmp_path / "e"), "--out", str(tmp_path / "f.json")], capsys)
    assert code == 2 and len(err) == 1 and "--batch-size" in err[0] and "2,147,483,647" in err[0], err
    assert not (tmp_path / "e").exists()


@pytest.mark.parametrize("limit, ok", [(str(2**30), True), (str(2**30 + 1), False), ("1e308", False)])
def test_memory_limit_mb_at_most_a_pebibyte(limit, ok):
    from trtprof.errors import BadInput
    from trtprof.measure.maxbatch import default_budget

    if ok:
        assert default_budget(float(limit))[0] == 2**50
    else:
        with pytest.raises(BadInput, match="at most 1,073,741,824"):
            default_budget(float(limit))


@pytest.mark.parametrize("option, inside, outside, says", [
    ("--shape", f"input:1x{INT32}", f"input:1x{INT32 + 1}", "at most 2147483647"),
    ("--int-range", f"{-2**63},{2**64 - 1}", f"0,{2**64}", "LOW and HIGH must be from"),
    ("--int-range", f"{-2**63},{2**64 - 1}", f"{-2**63 - 1},5", "LOW and HIGH must be from"),
    ("--older-than", "36500d", "36501d", "at most 36,500d"),
])
def test_text_options_with_numbers_inside_and_outside(option, inside, outside, says):
    from trtprof.engines.cache_admin import parse_age
    from trtprof.errors import BadInput
    from trtprof.model.inputs import parse_int_range, parse_shape_arg

    parse = {"--shape": parse_shape_arg, "--int-range": parse_int_range, "--older-than": parse_age}[option]
    parse(inside)
    with pytest.raises(BadInput, match=says):
        parse(outside)
    if option == "--older-than":
        with pytest.raises(BadInput, match="at most"):
            parse_age("9" * 400)  # a float of inf days: refused, not compared


@pytest.mark.parametrize("field, value, says", [
    ("time_budget_s", "1e308", "at most 86,400 (a day)"),
    ("time_budget_s", "86400.001", "at most 86,400"),
    ("round_iterations", "1000001", "at most 1,000,000"),
    ("iterations", "18446744073709551617", "at most 1,000,000"),
    ("target_ci", "1", "below 1"),
])
def test_spec_fields_have_the_options_bounds(tmp_path, conv_model, field, value, says):
    from trtprof.errors import BadInput
    from trtprof.sweep.spec import load_spec

    spec = tmp_path / "s.toml"
    spec.write_text(f'[sweep]\nbackend = "onnxruntime"\n\n[[models]]\npath = "{conv_model}"\n{field} = {value}\n')
    with pytest.raises(BadInput, match=re.escape(f"{field} must be {says}")):
        load_spec(spec)
    inside = {"time_budget_s": "86400", "round_iterations": "1000000", "iterations": "1000000",
              "target_ci": "0.999"}[field]
    spec.write_text(f'[sweep]\nbackend = "onnxruntime"\n\n[[models]]\npath = "{conv_model}"\n{field} = {inside}\n')
    load_spec(spec)
