"""Issue 36 items 7 and 9: a damaged or implausible trtexec export is exit 2 with one line naming the
file and the field, and nothing is written; through the real CLI (``trtprof import trtexec``)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from trtprof.cli import main
from trtprof.measure.trtexec import MAX_PLAUSIBLE_MS


def _iteration(i: int, latency: float = 1.0) -> dict:
    start = i * 1.5
    return {"startEnqMs": start, "endEnqMs": start + 0.1, "startH2dMs": start, "endH2dMs": start + 0.1,
            "startComputeMs": start + 0.1, "endComputeMs": start + 1.0, "startD2hMs": start + 1.0,
            "endD2hMs": start + 1.1, "h2dMs": 0.1, "computeMs": 0.9, "d2hMs": 0.1, "latencyMs": latency,
            "endToEndMs": latency}


def _times(**change) -> list[dict]:
    rows = [_iteration(i) for i in range(20)]
    for key, value in change.items():
        rows[3][key] = value
    return rows


PROFILE = [{"count": 20}, {"name": "conv", "timeMs": 4.0, "averageMs": 0.2, "medianMs": 0.2, "percentage": 100.0}]


def _run(tmp_path: Path, times_text: str, *, profile_text: str | None = None, layer_text: str | None = None):
    times = tmp_path / "t.json"
    times.write_text(times_text)
    argv = ["import", "trtexec", "--times", str(times), "--precision", "fp16", "--batch-size", "1",
            "--out", str(tmp_path / "r.json")]
    for option, text, name in (("--profile", profile_text, "p.json"), ("--layer-info", layer_text, "l.json")):
        if text is not None:
            (tmp_path / name).write_text(text)
            argv += [option, str(tmp_path / name)]
    return main(argv)


def test_a_good_export_is_imported(tmp_path):
    assert _run(tmp_path, json.dumps(_times()), profile_text=json.dumps(PROFILE)) == 0
    assert (tmp_path / "r.json").exists()


BAD_TIMES = {
    "string": (json.dumps(_times(latencyMs="abc")), "iteration 3 latencyMs"),
    "null": (json.dumps(_times(computeMs=None)), "iteration 3 computeMs"),
    "bool": (json.dumps(_times(latencyMs=True)), "iteration 3 latencyMs"),
    "400 digits": (json.dumps(_times(latencyMs=10**400)), "too large"),
    "1e308": (json.dumps(_times(latencyMs=1e308)), "not a plausible trtexec time"),
    "just above plausible": (json.dumps(_times(latencyMs=MAX_PLAUSIBLE_MS * 1.0001)), "not a plausible"),
    "negative": (json.dumps(_times(latencyMs=-1.0)), "iteration 3 latencyMs"),
    "NaN": (json.dumps(_times(latencyMs=float("nan"))), "iteration 3 latencyMs"),
    "Infinity stamp": (json.dumps(_times(startH2dMs=float("inf"))), "iteration 3 startH2dMs"),
    "negative span": (json.dumps(_times(endD2hMs=-5.0)), "negative span"),
    "enqueue backwards": (json.dumps(_times(endEnqMs=-1.0)), "endEnqMs is before"),
    "missing key": (json.dumps([_iteration(0), {k: v for k, v in _iteration(1).items() if k != "latencyMs"}]),
                    "iteration 1 has no 'latencyMs'"),
    "all zero": (json.dumps([_iteration(i, 0.0) | {"computeMs": 0, "h2dMs": 0, "d2hMs": 0} for i in range(9)]),
                 "every latencyMs is 0"),
    "zero span": (json.dumps([{**_iteration(0), "endD2hMs": 0.0, "startH2dMs": 0.0}] * 5), "span"),
}


@pytest.mark.parametrize("case", sorted(BAD_TIMES))
def test_bad_times_are_one_line_exit_2(tmp_path, capsys, case):
    text, expected = BAD_TIMES[case]
    assert _run(tmp_path, text) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "t.json" in err[0] and expected in err[0], err
    assert not (tmp_path / "r.json").exists()


def test_latency_just_inside_the_plausible_bound_is_kept(tmp_path):
    rows = [_iteration(i) for i in range(5)]
    rows[3].update(latencyMs=MAX_PLAUSIBLE_MS, endD2hMs=rows[3]["startH2dMs"] + MAX_PLAUSIBLE_MS)
    assert _run(tmp_path, json.dumps(rows)) == 0


def test_a_span_shorter_than_one_iteration_is_refused(tmp_path, capsys):
    rows = [_iteration(i) for i in range(5)]
    rows[2]["latencyMs"] = 50.0  # the whole run lasts 7.1 ms
    assert _run(tmp_path, json.dumps(rows)) == 2
    assert "shorter than its longest iteration" in capsys.readouterr().err


BAD_PROFILES = {
    "count abc": ([{"count": "abc"}, *PROFILE[1:]], "count: 'abc'"),
    "count null": ([{"count": None}, *PROFILE[1:]], "count: 'None'"),
    "count Infinity": ([{"count": float("inf")}, *PROFILE[1:]], "count: 'inf'"),
    "count 2.5": ([{"count": 2.5}, *PROFILE[1:]], "count: '2.5'"),
    "count 0": ([{"count": 0}, *PROFILE[1:]], "count: '0'"),
    "average string": ([PROFILE[0], {**PROFILE[1], "averageMs": "x"}], "'conv' averageMs"),
    "median 1e308": ([PROFILE[0], {**PROFILE[1], "medianMs": 1e308}], "'conv' medianMs"),
    "percentage 1000": ([PROFILE[0], {**PROFILE[1], "percentage": 1000}], "'conv' percentage"),
}


@pytest.mark.parametrize("case", sorted(BAD_PROFILES))
def test_bad_profiles_are_one_line_exit_2(tmp_path, capsys, case):
    data, expected = BAD_PROFILES[case]
    assert _run(tmp_path, json.dumps(_times()), profile_text=json.dumps(data)) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "p.json" in err[0] and expected in err[0], err


@pytest.mark.parametrize("key", ["Outputs", "Inputs"])
def test_layer_info_whose_outputs_is_a_number_is_refused(tmp_path, capsys, key):
    layers = {"Layers": [{"Name": "conv", "LayerType": "Convolution", key: 5}]}
    assert _run(tmp_path, json.dumps(_times()), layer_text=json.dumps(layers)) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "l.json" in err[0] and f"layer 0 {key}" in err[0], err
