"""`trtprof compare results.json` on imported trtexec runs: the real trtexec exports of ResNet-50 on an
RTX 3090 (fp32 and fp16; tests/data/trtexec/ORIGIN.md) imported, compared and reported through the
CLI; bad inputs refused with one line; the iteration threshold tested on fake imported runs."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from trtprof.cli import main
from trtprof.errors import BadInput
from trtprof.compare.imported import MIN_ITERATIONS, ONE_LOAD_WARNING, PSEUDO_ROUNDS, compare_imported
from trtprof.measure.results import BenchResult, ResultSet
from trtprof.schemas import COMPARE
from trtprof.stats.speedup import verdict

from ..measure.test_trtexec_import import _import, exports  # noqa: F401  (the fixture: the real exports, decompressed)
from ..cli.test_user_errors import assert_one_line, run_main


def _both(exports, tmp_path: Path) -> Path:  # noqa: F811
    out = tmp_path / "results.json"
    assert _import(exports, "fp32", out) == 0
    assert _import(exports, "fp16", out, "--append") == 0
    return out


def test_two_imported_runs_compare_and_report(exports, tmp_path, capsys):  # noqa: F811
    results = _both(exports, tmp_path)
    capsys.readouterr()
    cmp_json = tmp_path / "cmp.json"
    code, out, err = run_main(capsys, "compare", str(results), "--out", str(cmp_json))
    assert code == 0, err
    data = json.loads(cmp_json.read_text())
    assert data["schema"] == COMPARE and data["backend"] == "trtexec"
    [c] = data["comparisons"]
    s = c["speedup"]
    assert (c["baseline"], c["candidate"], c["batch_size"]) == ("fp32", "fp16", 32)
    assert c["verdict"] == verdict(s["ci_low"], s["ci_high"], s["margin"])
    assert s["ci_low"] < s["estimate"] < s["ci_high"] and s["loads"] == 1 and c["rounds"] == PSEUDO_ROUNDS
    assert "NOT interleaved" in s["method"] and c["accuracy"] is None
    # the block estimate agrees with the ratio of the two runs' medians, computed here from the file
    runs = {r.precision: np.asarray(r.samples_ms["latency_ms"]) for r in ResultSet.read(results).results}
    assert s["estimate"] == pytest.approx(np.median(runs["fp32"]) / np.median(runs["fp16"]), rel=0.01)
    assert data["warnings"] == [ONE_LOAD_WARNING]
    assert f"fp16 vs fp32  speedup {s['estimate']:.3f}×" in out and "not interleaved" in out
    html = tmp_path / "report.html"
    assert main(["report", str(cmp_json), "-o", str(html)]) == 0
    text = html.read_text()
    assert f"{s['estimate']:.3f}" in text
    assert "one process and one engine load each, not interleaved" in text
    assert "drift between the two trtexec runs" in text


def test_precisions_choose_the_baseline(exports, tmp_path, capsys):  # noqa: F811
    results = _both(exports, tmp_path)
    outs = {}
    for order in ("fp32,fp16", "fp16,fp32"):
        path = tmp_path / f"{order}.json"
        assert main(["compare", str(results), "--precisions", order, "--out", str(path)]) == 0
        outs[order] = json.loads(path.read_text())["comparisons"][0]
    assert outs["fp16,fp32"]["baseline"] == "fp16"
    assert outs["fp16,fp32"]["speedup"]["estimate"] == pytest.approx(1 / outs["fp32,fp16"]["speedup"]["estimate"])
    assert outs["fp16,fp32"]["verdict"] == "slower"


def test_one_precision_only_is_refused(exports, tmp_path, capsys):  # noqa: F811
    results = tmp_path / "results.json"
    assert _import(exports, "fp32", results) == 0
    capsys.readouterr()
    code, _, err = run_main(capsys, "compare", str(results), "--out", str(tmp_path / "c.json"))
    assert_one_line(code, err, "no batch size with two imported precisions", "fp32 at batch 32")
    assert not (tmp_path / "c.json").exists()


def test_two_batch_sizes_are_refused(exports, tmp_path, capsys):  # noqa: F811
    results = tmp_path / "results.json"
    assert _import(exports, "fp32", results) == 0
    assert main(["import", "trtexec", "--times", str(exports[("fp16", "timing")]), "--precision", "fp16",
                 "--batch-size", "16", "--model", "resnet50", "--out", str(results), "--append"]) == 0
    capsys.readouterr()
    code, _, err = run_main(capsys, "compare", str(results), "--out", str(tmp_path / "c.json"))
    assert_one_line(code, err, "fp32 at batch 32", "fp16 at batch 16")
    assert not (tmp_path / "c.json").exists()


def _fake(precision: str, n: int, backend: str = "trtexec", median: float = 1.0) -> BenchResult:
    """A FAKE imported run: n seeded latencies around ``median`` (no trtexec ran)."""
    lat = median * (1 + 0.01 * np.random.default_rng(n).standard_normal(n))
    return BenchResult.from_samples(stages={"latency_ms": lat}, span_s=float(lat.sum()) / 1000, batch_size=8,
                                    model="m", precision=precision, backend=backend, engine={}, config={})


def test_a_results_file_not_imported_is_refused(tmp_path, capsys):
    results = tmp_path / "bench.json"
    ResultSet(environment={}, results=[_fake("fp32", 200, "onnxruntime"), _fake("fp16", 200, "onnxruntime")]).write_json(results)
    code, _, err = run_main(capsys, "compare", str(results), "--out", str(tmp_path / "c.json"))
    assert_one_line(code, err, "not imported trtexec runs", "onnxruntime")
    assert not (tmp_path / "c.json").exists()


def test_measuring_options_are_refused(tmp_path, capsys):
    results = tmp_path / "r.json"
    ResultSet(environment={}, results=[_fake("fp32", 200), _fake("fp16", 200)]).write_json(results)
    code, _, err = run_main(capsys, "compare", str(results), "--layers", "--out", str(tmp_path / "c.json"))
    assert_one_line(code, err, "--layers", "not for imported trtexec runs")


def test_iteration_threshold(tmp_path):
    path = tmp_path / "r.json"
    data = compare_imported([_fake("fp32", MIN_ITERATIONS, median=2.0), _fake("fp16", MIN_ITERATIONS)], path)
    assert data["comparisons"][0]["verdict"] == "faster"
    with pytest.raises(BadInput, match=f"{MIN_ITERATIONS - 1} iterations; at least {MIN_ITERATIONS}"):
        compare_imported([_fake("fp32", MIN_ITERATIONS - 1, median=2.0), _fake("fp16", MIN_ITERATIONS)], path)
