"""`trtprof compare` end to end on the embedded backend (ONNX Runtime, CPU), with a tiny time budget.

No timing assertions: the contract checked is the JSON shape, the loud overflow flag, the diagnosis
that the CPU "fp16" is not FP16, and that `trtprof report` turns the file into one HTML page.
"""
from __future__ import annotations

import json
import math

import pytest

from trtprof.cli import main
from trtprof.measure.interleave import RoundPlan

from .test_accuracy import make_overflow_model
from ..report.test_report import assert_self_contained

pytest.importorskip("onnxruntime")

FAST = ["--backend", "onnxruntime", "--time-budget-s", "0.5", "--round-iterations", "20"]
VERDICTS = ("faster", "slower", "equivalent", "inconclusive")


def test_compare_model_then_report(conv_model, tmp_path, capsys):
    out = tmp_path / "compare.json"
    engines = tmp_path / "engines"
    assert main(["compare", str(conv_model), "--batch-sizes", "1,4", "--engines", str(engines), "--out", str(out),
                 *FAST]) == 0
    printed = capsys.readouterr().out
    assert printed.count("speedup") == 2 and "[95% CI" in printed and "why [fp16_not_fp16]" in printed

    data = json.loads(out.read_text())
    assert data["schema"] == "trtprof.compare/2"
    assert data["settings"]["isolation"] == "process" and "Student-t" in data["settings"]["method"]["speedup"]
    assert [c["batch_size"] for c in data["comparisons"]] == [1, 4]
    for c in data["comparisons"]:
        assert (c["baseline"], c["candidate"]) == ("fp32", "fp16")
        s = c["speedup"]
        assert s["ci_low"] <= s["estimate"] <= s["ci_high"] and s["ci_low"] > 0
        assert c["verdict"] in VERDICTS
        # a 0.5 s budget holds less than the minimum design: the floor (2 loads × 2 rounds) runs
        # c["loads"]: loads opened; s["loads"]: loads with rounds in the interval (a load opened as the budget
        # ran out may have measured none: seen in CI, 6 opened and 5 measured) — the df follows the latter
        assert c["loads"] >= s["loads"] >= 2 and c["rounds"] >= 2 * s["loads"]
        assert s["df"] == s["loads"] - 1 and "A B rounds" in s["method"]
        assert len(s["load_log_ratios"]) == s["loads"] and isinstance(s["mixture"], str)
        for side in ("baseline", "candidate"):
            lat = c["latency"][side]
            # issue 44: an arm's interval is the order-statistic one of its load medians, which 95 % needs 6 of;
            # from fewer it is not defined (NaN), never a t interval's [0.665, 3575]
            if math.isnan(lat["ci_low_ms"]):
                assert math.isnan(lat["ci_high_ms"]) and s["loads"] < 6
            else:
                assert lat["ci_low_ms"] <= lat["median_ms"] <= lat["ci_high_ms"]
            assert set(c["shape"][side]) >= {"modes", "multimodal", "heavy_tail"}
        assert set(c["accuracy"]) >= {"max_abs_err", "max_rel_err", "mismatch_fraction", "nonfinite"}
        assert c["accuracy"]["nonfinite"] == 0 and math.isfinite(c["accuracy"]["max_abs_err"])
        rules = {f["rule"] for f in c["diagnosis"]}
        assert "fp16_not_fp16" in rules  # ORT CPU has no FP16 Conv/Gemm kernels: always true here
        assert rules <= {"fp16_not_fp16", "unstable_clocks"}  # no GPU-only rule on a CPU
        assert all(f["message"] and isinstance(f["evidence"], dict) for f in c["diagnosis"])
        assert len(c["round_ratios"]) == c["rounds"]
        assert c["roofline"]["baseline"]["flops"] > 0
    assert "environment" in data and len(data["results"]) == 4  # 2 precisions × 2 batch sizes, raw samples
    assert all(len(r["samples_ms"]) == r["stats"]["latency_ms"]["n"] for r in data["results"])

    # An engines dir works as input too: the same engines, no build.
    out2 = tmp_path / "again.json"
    assert main(["compare", str(engines), "--batch-sizes", "4", "--out", str(out2), *FAST]) == 0
    assert [c["batch_size"] for c in json.loads(out2.read_text())["comparisons"]] == [4]
    capsys.readouterr()

    html = tmp_path / "report.html"
    assert main(["report", str(out), "-o", str(html)]) == 0
    assert "| 1 | fp16 (effective fp32+casts) vs fp32 |" in capsys.readouterr().out  # ORT CPU: what really ran
    assert_self_contained(html.read_text())


def test_fp16_overflow_is_flagged_loudly(tmp_path, capsys):
    model = make_overflow_model(tmp_path / "overflow.onnx")
    out = tmp_path / "compare.json"
    assert main(["compare", str(model), "--batch-sizes", "2", "--engines", str(tmp_path / "e"), "--out", str(out),
                 *FAST]) == 0
    printed = capsys.readouterr().out
    assert "NON-FINITE" in printed and "WARNING" in printed
    data = json.loads(out.read_text())
    (c,) = data["comparisons"]
    assert c["accuracy"]["nonfinite"] > 0 and c["accuracy"]["nonfinite_flag"] is True
    assert c["diagnosis"][0]["rule"] == "nonfinite" and data["warnings"]


@pytest.mark.parametrize("args, needle", [
    (["--precisions", "fp32"], "baseline and at least one candidate"),
    (["--precisions", "fp32,fp9"], "unknown precision"),
    (["--precisions", "fp32,fp8", "--backend", "onnxruntime"], "no FP8 kernels"),
    (["--target-ci", "0"], "--target-ci"),
    (["--time-budget-s", "-1"], "--time-budget-s"),
])
def test_bad_arguments_are_one_line_errors(conv_model, tmp_path, capsys, args, needle):
    assert main(["compare", str(conv_model), "--engines", str(tmp_path / "e"), *args]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("trtprof compare: error:") and needle in err and "\n" not in err


def test_engines_dir_without_the_candidate_is_an_error(conv_model, tmp_path, capsys):
    engines = tmp_path / "engines"
    assert main(["build", str(conv_model), "--fp32", "--engines", str(engines), "--backend", "onnxruntime"]) == 0
    capsys.readouterr()
    assert main(["compare", str(engines), "--out", str(tmp_path / "c.json")]) == 2
    assert "no fp16 engine here" in capsys.readouterr().err


def test_a_a_run_measures_one_engine_as_two_independently_loaded_arms(conv_model, tmp_path, capsys):
    out = tmp_path / "aa.json"
    assert main(["compare", str(conv_model), "--precisions", "fp32,fp32", "--engines", str(tmp_path / "e"),
                 "--out", str(out), *FAST]) == 0
    captured = capsys.readouterr()
    assert captured.out.count(" built ") == 1  # one engine
    assert "loads" in captured.err and "batch 1:" in captured.err  # progress and the early verdict line
    data = json.loads(out.read_text())
    (c,) = data["comparisons"]
    assert (c["baseline"], c["candidate"]) == ("fp32", "fp32#2")
    assert c["latency"]["baseline"]["engine"] == c["latency"]["candidate"]["engine"]
    assert "A/A" in c["verdict_note"] and "noise floor" in c["verdict_note"]
    assert {r["config"]["arm"] for r in data["results"]} == {"fp32", "fp32#2"}


@pytest.mark.parametrize("loads", ["1", "65", "0", "x"])
def test_min_loads_outside_two_to_the_limit_is_a_one_line_error(conv_model, tmp_path, capsys, loads):
    from trtprof.measure.interleave import LOADS_LIMIT

    assert LOADS_LIMIT == 64
    assert main(["compare", str(conv_model), "--engines", str(tmp_path / "e"), "--min-loads", loads]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("trtprof compare: error:") and "--min-loads" in err and "\n" not in err
    assert not (tmp_path / "e").exists()  # refused before any build


def test_min_loads_from_two_to_the_limit_is_run_and_recorded_in_the_plan(conv_model, tmp_path, capsys):
    """Above the default ceiling of 20 loads, --min-loads lifts it (29 loads see a 10 % mode 95 % of
    the time, the lopsided calibration case)."""
    engines = tmp_path / "e"
    for loads, most in ((2, 20), (20, 20), (21, 21), (29, 29), (64, 64)):
        out = tmp_path / f"m{loads}.json"
        assert main(["compare", str(conv_model), "--in-process", "--engines", str(engines), "--out", str(out),
                     "--min-loads", str(loads), *FAST]) == 0
        capsys.readouterr()
        settings = json.loads(out.read_text())["settings"]
        assert (settings["min_loads"], settings["max_loads"]) == (loads, most)


@pytest.mark.parametrize("margin", ["0", "0.7"])
def test_bad_margin_is_a_one_line_error(conv_model, tmp_path, capsys, margin):
    assert main(["compare", str(conv_model), "--engines", str(tmp_path / "e"), "--margin", margin]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("trtprof compare: error:") and "--margin" in err and "\n" not in err


def test_in_process_loads_are_recorded_as_such(conv_model, tmp_path, capsys):
    out = tmp_path / "ip.json"
    assert main(["compare", str(conv_model), "--in-process", "--engines", str(tmp_path / "e"), "--out", str(out),
                 *FAST]) == 0
    capsys.readouterr()
    data = json.loads(out.read_text())
    assert data["settings"]["isolation"] == "in-process"
    assert 2 <= data["comparisons"][0]["loads"] <= data["settings"]["max_loads"]


def test_serial_loads_run_one_worker_process_at_a_time_and_are_recorded_as_such(conv_model, tmp_path, capsys,
                                                                              monkeypatch):
    """``--serial-loads`` end to end (real ONNX Runtime workers): said at the start, recorded in the JSON; every
    worker's process served alone (the next one starts once the last was told to exit, and loads while it exits; on
    the CPU none starts ahead but life 0's, with the command, so nothing ran beside a timed round: the record
    says so), load i of both batch sizes was one process (as many processes as the most loads of a batch size, not
    their sum), life 0's worker ran the accuracy pass, and each life's seconds are in the budget's record."""
    from trtprof.measure import serial_loads, workers

    started = []

    class CountedWorker(serial_loads.Worker):
        def __init__(self, *args, **kwargs):
            # the last life's process may still be exiting (told to: its rounds are done), never serving
            assert all(w.proc.poll() is not None or w._asked_to_close for w in started), \
                "a worker started while another was still serving"
            super().__init__(*args, **kwargs)
            started.append(self)

    monkeypatch.setattr(serial_loads, "Worker", CountedWorker)
    monkeypatch.setattr(workers, "Worker", CountedWorker)  # life 0's process, started with the command (``spares``)
    out = tmp_path / "serial.json"
    assert main(["compare", str(conv_model), "--serial-loads", "--batch-sizes", "1,2", "--engines",
                 str(tmp_path / "e"), "--out", str(out), "--backend", "onnxruntime", "--time-budget-s", "4",
                 "--round-iterations", "20"]) == 0
    printed = capsys.readouterr()
    assert "loads one at a time (--serial-loads)" in printed.out + printed.err
    data = json.loads(out.read_text())
    assert data["settings"]["isolation"] == "serial"
    beside = data["concurrent_with_timing"]
    assert beside["timed_calls"] > 0 and beside["overlapping"] == []
    assert "the accuracy pass (life 0's worker)" in [w["what"] for w in beside["work"]]
    assert [c["batch_size"] for c in data["comparisons"]] == [1, 2]
    assert all(c["loads"] >= 2 and c["rounds"] >= 2 * c["loads"] for c in data["comparisons"])
    assert len(started) == max(c["loads"] for c in data["comparisons"]) < sum(c["loads"] for c in data["comparisons"])
    lives = data["budget"]["lives"]
    assert [life["life"] for life in lives] == list(range(len(started)))
    assert [life["started_ahead"] for life in lives] == [True] + [False] * (len(lives) - 1)  # life 0: with the command
    for life in lives:
        assert set(life["arms_s"]) == {"fp32", "fp16"} and all(v > 0 for v in life["arms_s"].values())
        assert all(life[k] > 0 for k in ("python_s", "engines_s", "waited_s", "serving_s", "exit_s"))


def test_serial_loads_tell_life_0_the_cached_engines_with_the_command(conv_model, tmp_path):
    """With the engines cached, ``--serial-loads`` tells life 0's process the engines it will find as the command
    starts (they load while the model is read and the cache looked up): the second run's life 0 says so; the first
    run, which built them, could not (no engines to guess yet). Both runs measure the same engines."""
    runs = []
    for name in ("first", "second"):
        out = tmp_path / f"{name}.json"
        assert main(["compare", str(conv_model), "--serial-loads", "--batch-sizes", "1", "--engines",
                     str(tmp_path / "e"), "--out", str(out), "--backend", "onnxruntime", "--time-budget-s", "4",
                     "--allow-fewer-loads", "--round-iterations", "10"]) == 0
        runs.append(json.loads(out.read_text()))
    told = [run["budget"]["lives"][0]["engines_told_ahead"] for run in runs]
    assert told == [False, True]
    assert [[r["engine"] for r in run["results"]] for run in runs][0] == \
        [[r["engine"] for r in run["results"]] for run in runs][1]


def test_serial_loads_and_in_process_cannot_both_be_asked(conv_model, tmp_path, capsys):
    assert main(["compare", str(conv_model), "--serial-loads", "--in-process", "--engines", str(tmp_path / "e")]) == 2
    err = capsys.readouterr().err.strip()
    assert "--serial-loads" in err and "--in-process" in err and "\n" not in err and "Traceback" not in err


@pytest.mark.slow
@pytest.mark.parametrize("sig", ["SIGINT", "SIGTERM"])
def test_interrupt_keeps_the_batch_sizes_already_decided(conv_model, tmp_path, sig):
    """A real signal to a real `trtprof compare` (worker-process loads) once batch 1's verdict is out:
    exit 130, and the JSON holds batch 1's comparison, says it was interrupted and what was not measured."""
    import signal
    import subprocess
    import sys
    import time

    out = tmp_path / "c.json"
    proc = subprocess.Popen(
        [sys.executable, "-m", "trtprof", "compare", str(conv_model), "--batch-sizes", "1,2", "--time-budget-s", "8",
         "--engines", str(tmp_path / "eng"), "--out", str(out)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stderr is not None
    deadline = time.monotonic() + 240
    seen = []
    for line in proc.stderr:  # the per-batch verdict line is printed as soon as batch 1 is decided
        seen.append(line)
        if line.startswith("batch 1: fp16 vs fp32:") or time.monotonic() > deadline:
            break
    assert seen and seen[-1].startswith("batch 1: fp16 vs fp32:"), "".join(seen[-5:])
    time.sleep(1.0)  # batch 2 is running now (its budget is 8 s)
    proc.send_signal(getattr(signal, sig))
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130, stderr[-2000:]
    data = json.loads(out.read_text())
    assert data["interrupted"] is True and data["pending_batch_sizes"] == [2]
    assert [c["batch_size"] for c in data["comparisons"]] == [1]
    kept = data["comparisons"][0]  # the same answer that was printed when batch 1 was decided
    assert f"{kept['speedup']['estimate']:.3f}× [{kept['speedup']['ci_low']:.3f}, {kept['speedup']['ci_high']:.3f}] " \
        f"{kept['verdict'].upper()}" in seen[-1]
    assert "Traceback" not in stderr and "not measured: 2" in stderr


def test_the_budget_accounting_end_to_end(conv_model, tmp_path, capsys):
    """Real workers: what was spent (from the start of the command; worker start-up in the first batch
    size) is in the JSON and in the progress line; each batch size stops by its budget, or only the
    floor (2 loads × 2 rounds), which runs regardless, ran past it and a warning says so in one line.
    No speed is asserted: on a slow machine the floor is what runs."""
    import re

    from trtprof.measure.interleave import FLOOR_LOADS, FLOOR_ROUNDS

    out = tmp_path / "c.json"
    budget = 4.0
    assert main(["compare", str(conv_model), "--batch-sizes", "1,2", "--engines", str(tmp_path / "e"), "--out", str(out),
                 "--backend", "onnxruntime", "--time-budget-s", f"{budget:g}"]) == 0
    captured = capsys.readouterr()
    assert re.search(r"batch 1: \d+ loads?, \d+ rounds?, [\d.]+ of 4 s spent", captured.err)
    data = json.loads(out.read_text())
    account = data["budget"]
    assert account["time_budget_s"] == budget and account["batch_sizes"] == 2
    assert account["counts_from"] == "command start (engine builds left out)"
    assert account["startup_s"] > 0 and account["reserve_s"] >= 0 and account["spent_s"] >= account["startup_s"]
    # the end's reserve is a multiple of what the command's imports took (here: from main() to the parse),
    # not of the launch up to the comparison (backend imports, engine loads)
    from trtprof.measure.budget import TAIL_PER_IMPORTS

    assert account["reserve_basis"] == "imports" and 0 < account["reserve_basis_s"] < account["launch_s"]
    # both rounded to 1 ms in the JSON: the basis's rounding (±0.5 ms) is multiplied by 2 × 2, the reserve's adds ±0.5 ms
    assert account["reserve_s"] == pytest.approx(TAIL_PER_IMPORTS * account["reserve_basis_s"] * 2, abs=2.6e-3)
    for c in data["comparisons"]:
        batch = account["per_batch"][str(c["batch_size"])]
        assert batch["stop_reason"] == c["stop_reason"]
        # the first: one budget from the start; the second: by two budgets (less if the first stopped early)
        assert batch["budget_s"] == budget if c["batch_size"] == 1 else batch["budget_s"] <= 2 * budget
        # past the budget only the floor's rounds ran: on every load opened (2, or more where the budget seemed
        # to fit them before a busy machine overran it: CI saw 3), none after (a single load: two round pairs)
        floor = FLOOR_ROUNDS if c["loads"] >= FLOOR_LOADS else 2 * FLOOR_ROUNDS
        if batch["floor_overrun"]:
            assert c["rounds"] == c["loads"] * floor and batch["floor_overrun"] in "\n".join(data["warnings"])
            loads = f"{c['loads']} load{'s' if c['loads'] != 1 else ''}"
            assert f"WARNING: batch {c['batch_size']}: the floor of {loads} × {floor} rounds needed" in captured.out


def test_the_command_s_clock_starts_at_its_process_start_only_when_it_is_the_command(monkeypatch):
    """`trtprof …` from the command line (argv None): the budget counts from the process's start (fake
    here); a caller running main(argv) in its own, older process: from the moment main began."""
    import sys

    from trtprof.util import clock
    from trtprof.cli import compare as cli_compare

    seen: list[float] = []
    monkeypatch.setattr(cli_compare, "run", lambda args, clock: seen.append(clock.started) or 0)
    monkeypatch.setattr(clock, "process_start", lambda: -123.0)
    monkeypatch.setattr(sys, "argv", ["trtprof", "compare", "model.onnx"])
    assert main() == 0 and seen == [-123.0]
    import time

    before = time.perf_counter()
    assert main(["compare", "model.onnx"]) == 0
    assert before <= seen[-1] <= time.perf_counter()  # the moment main() began, not the process's start


def test_each_verdict_opens_with_its_validity_stamp_and_the_json_and_page_carry_it(conv_model, tmp_path, capsys):
    """On this CPU, ONNX Runtime's "fp16" runs FP32 behind casts: every comparison is NOT VALID for
    that reason at least (other reasons, such as a busy host, depend on the machine and are not asserted)."""
    from trtprof.report.compare_page import write_report

    out = tmp_path / "c.json"
    assert main(["compare", str(conv_model), "--in-process", "--engines", str(tmp_path / "e"), "--out", str(out),
                 "--batch-sizes", "1", "--time-budget-s", "2", "--backend", "onnxruntime"]) == 0
    text = capsys.readouterr().out.splitlines()
    data = json.loads(out.read_text())
    (c,) = data["comparisons"]
    stamp = c["validity"]
    assert not stamp["valid"] and "fp16_is_fp32" in [r["code"] for r in stamp["reasons"]]
    assert all(r["advice"] for r in stamp["reasons"]) and {"loads", "budget", "precision"} <= set(stamp["checked"])
    first = text.index(stamp["stamp"])  # the stamp, its advice lines, then the verdict line
    assert text[first + 1 + len(stamp["reasons"])].startswith("batch 1: fp16 vs fp32")
    assert data["validity"]["stamp"] == stamp["stamp"]
    page, _ = write_report(out, tmp_path / "c.html")
    body = page.read_text()
    assert "NOT VALID" in body[:body.index("<h2>")]
    # beside the verdict: this comparison's stamp and its results' warnings (fp16's effective precision)
    verdict = body[body.index("<h2>Verdict</h2>"):]
    box = verdict[verdict.index('<div class="warn"><b>batch 1, fp16 vs fp32</b>'):]
    box = box[:box.index("</div>")]
    import html

    assert html.escape(stamp["stamp"].split(";")[0]) in box and "fp16: requested fp16, effective fp32+casts" in box


@pytest.mark.parametrize("sig", ["SIGINT", "SIGTERM"])
def test_a_signal_during_the_analysis_keeps_every_verdict(conv_model, tmp_path, monkeypatch, sig):
    """A Ctrl-C/SIGTERM after the last batch size was measured (on the H200: `timeout` ending a ConvNeXt-T
    compare whose batch sizes were both decided, in the analysis) waits for the verdicts: exit 130, every
    batch size in the JSON, marked interrupted. A real signal to this process, sent from inside the analysis."""
    import os
    import signal

    from trtprof.compare import core

    real = core.analyse

    def analyse_signalled(*args, **kwargs):
        os.kill(os.getpid(), getattr(signal, sig))  # delivered here, before the analysis runs
        return real(*args, **kwargs)

    monkeypatch.setattr(core, "analyse", analyse_signalled)
    out = tmp_path / "c.json"
    rc = main(["compare", str(conv_model), "--batch-sizes", "1,2", "--time-budget-s", "3", "--in-process",
               "--engines", str(tmp_path / "eng"), "--out", str(out)])
    data = json.loads(out.read_text())
    assert rc == 130
    assert sorted(c["batch_size"] for c in data["comparisons"]) == [1, 2] and data["interrupted"] is True
    assert any("interrupted after every batch size was measured" in w for w in data["warnings"])


def test_a_second_signal_during_the_analysis_stops_it():
    import os
    import signal

    from trtprof.util.signals import interrupts_noted

    noted: list[int] = []
    with pytest.raises(KeyboardInterrupt):
        with interrupts_noted(noted):
            os.kill(os.getpid(), signal.SIGTERM)
            assert noted == [signal.SIGTERM]  # the first is only noted
            os.kill(os.getpid(), signal.SIGINT)
    assert signal.getsignal(signal.SIGTERM) is not None  # the handlers were put back
