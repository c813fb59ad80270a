"""Numbers for people (issue 34, deliverable 3): rates without scientific notation, no CI from too
few serving rounds."""
from __future__ import annotations

import json

import pytest

from trtprof.util.labels import fmt_rate


@pytest.mark.parametrize("value,text", [
    (253_900.0, "253,900"), (2_539_000.4, "2,539,000"), (100.0, "100"), (99.99, "99.99"), (12.345, "12.35"),
    (0.4567, "0.4567"), (0.0, "0"), (0.00001234, "0.000012"), (None, "-"), (float("nan"), "nan"),
])
def test_rates_have_thousands_separators_and_never_an_exponent(value, text):
    assert fmt_rate(value) == text
    assert "e+" not in fmt_rate(value) and "e-" not in fmt_rate(value)


def test_serving_tables_print_rates_without_an_exponent():
    from trtprof.report.serving_page import point_rows

    point = {"arm": "fp16", "batch_size": 64, "concurrency": 4, "samples_per_s": 253_900.0, "requests_per_s": 3967.2,
             "latency_ms": {"p50": 12_345.6, "p99": 0.01234}, "memory": {}, "energy": {}}
    (row,) = point_rows([point], reasons=False)
    assert row[3:7] == ["253,900", "3,967", "12346", "0.01234"]


def _points(rounds: int):
    from tests.serving.test_serving import _point

    return [_point("fp32", 1, 1, [1000.0 + i for i in range(rounds)], 2.0),
            _point("fp16", 1, 1, [1500.0 + 3 * i for i in range(rounds)], 2.0)]


def test_a_serving_ratio_from_fewer_rounds_than_an_interval_needs_prints_no_ci():
    """MIN_SERVING_ROUNDS rounds give an interval; one fewer gives the ratio, no CI, and one line why."""
    from trtprof.report.serving_page import slo_lines
    from trtprof.stats.slo import at_target
    from trtprof.system.validity import MIN_SERVING_ROUNDS

    enough = at_target(_points(MIN_SERVING_ROUNDS), ["fp32", "fp16"], 5.0)["verdicts"][0]
    assert "ci_low" in enough and enough["rounds"] == MIN_SERVING_ROUNDS
    few = at_target(_points(MIN_SERVING_ROUNDS - 1), ["fp32", "fp16"], 5.0)
    v = few["verdicts"][0]
    assert "ci_low" not in v and v["verdict"] == "inconclusive" and v["estimate"] == pytest.approx(1.5, rel=0.01)
    assert "no interval" in v["reason"] and f"--serving-rounds {MIN_SERVING_ROUNDS}" in v["reason"]
    line = slo_lines(few)[-1]
    assert "CI" not in line and "inf" not in line and "INCONCLUSIVE: 2 rounds: no interval" in line


def test_memory_is_never_negative_a_negative_rss_delta_is_below_resolution():
    """RSS falling across a run (memory freed elsewhere in the process) is not a negative size: the
    entry says below resolution, keeps the measured delta and says why; a delta of 0 is 0."""
    from trtprof.system.memory import fmt_in_use, inference_memory

    class CpuRunner:  # no memory_report: the host RSS path
        pass

    mib = 1 << 20
    fell = inference_memory(CpuRunner(), rss_before_load=100 * mib, rss_after_load=100 * mib,
                            rss_before_run=100 * mib, rss_after_run=100 * mib - 430_000)
    assert fell["in_use_bytes"] is None and fell["below_resolution"] and fell["measured_delta_bytes"] == -430_000
    assert "process-wide" in fell["resolution"]
    assert fmt_in_use(fell) == "below resolution (RSS fell 0.41 MiB)" and "-" not in fmt_in_use(fell)
    same = inference_memory(CpuRunner(), rss_before_load=100 * mib, rss_after_load=100 * mib,
                            rss_before_run=100 * mib, rss_after_run=100 * mib)
    assert same["in_use_bytes"] == 0 and "below_resolution" not in same and fmt_in_use(same) == "0 B"
    grew = inference_memory(CpuRunner(), rss_before_load=100 * mib, rss_after_load=101 * mib,
                            rss_before_run=101 * mib, rss_after_run=101 * mib)
    assert fmt_in_use(grew) == "1 MiB"


def test_no_help_text_prints_a_doubled_percent_sign():
    """argparse %-formats help strings but not descriptions: a "95%% CI" in a description is printed
    as typed (fix-fp16 --help did). Every command's --help is checked."""
    import argparse

    from trtprof.cli import make_parser

    parser = make_parser()
    subs = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    assert "fix-fp16" in subs.choices
    for name, sub in subs.choices.items():
        assert "%%" not in sub.format_help(), name
    import re

    assert "95 % CI" in re.sub(r"\s+", " ", subs.choices["fix-fp16"].format_help())


def test_a_second_engine_of_a_precision_is_labelled_by_what_differs_not_numbered():
    from types import SimpleNamespace

    from trtprof.serving.sweep import group_arms
    from trtprof.util.labels import variant_label

    user = {"calibration": "minmax", "calibration_data": "inputs.npz (64 samples), sha256 3f2a9c01d2e3f4a5"}
    rand = {"calibration": "minmax", "calibration_data": "random N(0,1), seed 0"}
    assert variant_label("int8", user, rand) == "int8 (calib 3f2a…)"
    assert variant_label("int8", {**rand, "calibration_data": "random N(0,1), seed 1"}, rand) == "int8 (calib seed 1)"
    assert variant_label("fp16", {"keep_fp32": "a,b"}, {}) == "fp16 (keep_fp32=a,b)"
    assert variant_label("fp16", {}, {}, key="0123456789abcdef") == "fp16 (engine 01234567)"

    def record(precision, options, created, key):
        return SimpleNamespace(model="m", backend="onnxruntime", precision=precision, created=created, key=key,
                               spec=SimpleNamespace(options=tuple(sorted(options.items()))))

    (arms,) = group_arms([record("int8", rand, 1, "k1"), record("fp32", {}, 0, "k0"), record("int8", user, 2, "k2"),
                          record("int8", user, 3, "k3")])
    assert list(arms) == ["fp32", "int8", "int8 (calib 3f2a…)", "int8 (engine k3)"]
    assert not any("#2" in a for a in arms)


def test_an_npz_that_fixes_every_dim_needs_no_shape(tmp_path, capsys):
    """A model with a dynamic non-batch dim: --inputs of shape [4, 7] fixes it, so compare, profile
    and bench run without --shape (it was "fix them with --shape x:NxN")."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper

    from trtprof.cli import main

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", "S"])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", "S"])
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g", [x], [y])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(tmp_path / "dyn.onnx"))
    np.savez(tmp_path / "in.npz", x=np.random.default_rng(0).random((4, 7)).astype(np.float32))
    common = ["--inputs", str(tmp_path / "in.npz"), "--backend", "onnxruntime", "--engines", str(tmp_path / "e")]
    assert main(["profile", str(tmp_path / "dyn.onnx"), *common, "--batch-size", "4", "--iterations", "2",
                 "--out", str(tmp_path / "l.json")]) == 0
    data = json.loads((tmp_path / "l.json").read_text())
    assert data["table"]["batch_size"] == 4
    out = tmp_path / "o" / "b.json"
    assert main(["bench", str(tmp_path / "e"), "--inputs", str(tmp_path / "in.npz"), "--batch-sizes", "4",
                 "--iterations", "3", "--warmup", "1", "--out", str(out)]) == 0
    r = json.loads(out.read_text())["results"][0]
    assert r["config"]["input_shapes"]["x"] == [4, 7]
    capsys.readouterr()


def test_the_runtime_start_up_is_measured_apart_from_the_first_engine(conv_model, tmp_path, capsys):
    """bench primes ONNX Runtime (a one-node session) before the first engine loads, records what that
    took beside the results and prints it on its own line, so the first engine's memory is its own.
    No size is asserted: what the start-up costs here depends on what this process imported before."""
    from trtprof.cli import main

    engines, out = tmp_path / "e", tmp_path / "o" / "r.json"
    assert main(["build", str(conv_model), "--fp32", "--fp16", "--batch-sizes", "1", "--engines", str(engines),
                 "--backend", "onnxruntime"]) == 0
    capsys.readouterr()
    assert main(["bench", str(engines), "--iterations", "3", "--warmup", "1", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    startup = json.loads(out.read_text())["environment"]["host"]["runtime_startup_bytes"]
    assert set(startup) == {"onnxruntime"} and isinstance(startup["onnxruntime"], int)
    assert "runtime start-up, not in any engine's memory: onnxruntime " in text
