"""Issue 36 items 7-9: numeric options are bounded at parse time (exit 2, one line naming the option),
each just inside and just outside its bound; a duration the safety stop cut short says so."""
from __future__ import annotations

import pytest

from trtprof.cli import _common, _serving, main
from trtprof.measure import timing
from trtprof.measure.timing import MAX_ITERATIONS, TimingConfig
from trtprof.serving.driver import MAX_WINDOW_S


def _exit_code(argv) -> int:
    try:
        return main(argv)
    except SystemExit as done:  # argparse's own errors
        return int(done.code or 0)


@pytest.fixture
def four_cores(monkeypatch):
    monkeypatch.setattr("trtprof.serving.driver.usable_cores", lambda: 4)


def test_threads_just_inside_and_outside_cores_times_the_factor(four_cores):
    limit = 4 * _common.MAX_THREADS_PER_CORE
    assert _common.thread_count(str(limit)) == limit
    with pytest.raises(Exception, match=f"at most {limit}"):
        _common.thread_count(str(limit + 1))


def test_threads_100000_is_refused_by_the_cli_before_any_build(four_cores, conv_model, tmp_path, capsys):
    code = _exit_code(["bench", str(tmp_path / "e"), "--threads", "100000", "--out", str(tmp_path / "r.json")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and "--threads" in err[-1] and "per usable core" in err[-1]
    assert not (tmp_path / "r.json").exists()


def test_window_just_inside_and_outside():
    assert _serving.window_seconds(str(MAX_WINDOW_S)) == MAX_WINDOW_S
    for text in (str(MAX_WINDOW_S * 1.001), "1e12"):
        with pytest.raises(Exception, match="at most"):
            _serving.window_seconds(text)


def test_window_1e12_is_refused_by_compare(conv_model, tmp_path, capsys):
    code = _exit_code(["compare", str(conv_model), "--window-s", "1e12", "--out", str(tmp_path / "c.json")])
    assert code == 2 and "--window-s" in capsys.readouterr().err
    assert not (tmp_path / "c.json").exists()


def test_iterations_just_inside_and_outside_the_safety_stop():
    assert _common.iteration_count(str(MAX_ITERATIONS)) == MAX_ITERATIONS
    with pytest.raises(Exception, match="safety stop"):
        _common.iteration_count(str(MAX_ITERATIONS + 1))
    TimingConfig(iterations=MAX_ITERATIONS)
    with pytest.raises(Exception, match="safety stop"):
        TimingConfig(iterations=MAX_ITERATIONS + 1)


@pytest.mark.parametrize("command", ["compare", "fix-fp16"])
def test_round_iterations_above_the_safety_stop_is_refused(command, conv_model, tmp_path, capsys):
    code = _exit_code([command, str(conv_model), "--round-iterations", str(MAX_ITERATIONS + 1), "--engines",
                       str(tmp_path / "e"), "--out", str(tmp_path / "c.json")])
    assert code == 2 and "--round-iterations" in capsys.readouterr().err
    assert not (tmp_path / "e").exists()


def test_a_duration_cut_by_the_safety_stop_says_so(monkeypatch):
    monkeypatch.setattr(timing, "MAX_ITERATIONS", 50)
    samples = timing.time_host(lambda: None, TimingConfig(warmup=0, iterations=10, duration_s=30.0))
    assert samples.n == 50
    assert any("--duration-s 30 not reached" in note and "safety stop of 50" in note for note in samples.notes)


def test_a_duration_that_was_met_has_no_note(monkeypatch):
    monkeypatch.setattr(timing, "MAX_ITERATIONS", 10**9)
    samples = timing.time_host(lambda: None, TimingConfig(warmup=0, iterations=10, duration_s=0.01))
    assert samples.span_s >= 0.01 and not samples.notes
