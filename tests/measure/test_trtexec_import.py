"""`trtprof import trtexec` on real trtexec exports (NVIDIA/TensorRT's trt-engine-explorer examples,
tests/data/trtexec/ORIGIN.md): parsed, checked against trtexec's own summary of the same run, and
round-tripped through `trtprof report` and `trtprof plot` for an fp32 and an fp16 run."""
from __future__ import annotations

import gzip
import hashlib
import json
from pathlib import Path

import pytest

from trtprof.cli import main
from trtprof.measure.results import ResultSet

from ..conftest import tree_snapshot

DATA = Path(__file__).parent.parent / "data" / "trtexec"
SHA256 = {("fp32", "timing"): "0bb957d502b99da2ada7893ec17c7b8bf603283d84038d7c333e15b8a23c6a55",
          ("fp16", "timing"): "21b2af23a6858b1c89b1b0ac35ba61d64cb0ec98cb2b74b92a1cb29aefb0aac1",
          ("fp16", "graph"): "c8d3c2636534bfbad0fce8d9455f418e3d6724fbd3f577f1733817305bdeb640"}


@pytest.fixture
def exports(tmp_path: Path) -> dict[tuple[str, str], Path]:
    """The committed exports decompressed into tmp_path, as trtexec wrote them."""
    out = {}
    for precision in ("fp32", "fp16"):
        for kind in ("timing", "profile", "graph"):
            path = tmp_path / f"{precision}.{kind}.json"
            path.write_bytes(gzip.decompress((DATA / f"resnet50-rtx3090-{precision}.{kind}.json.gz").read_bytes()))
            out[(precision, kind)] = path
    return out


def _import(exports, precision: str, out: Path, *extra: str) -> int:
    return main(["import", "trtexec", "--times", str(exports[(precision, "timing")]),
                 "--profile", str(exports[(precision, "profile")]), "--layer-info", str(exports[(precision, "graph")]),
                 "--precision", precision, "--batch-size", "32", "--model", "resnet50", "--out", str(out), *extra])


def test_committed_files_are_the_originals(exports):
    for key, digest in SHA256.items():
        assert hashlib.sha256(exports[key].read_bytes()).hexdigest() == digest


def test_import_agrees_with_trtexecs_own_summary(exports, tmp_path):
    out = tmp_path / "results.json"
    for precision in ("fp32", "fp16"):
        assert _import(exports, precision, out, *(["--append"] if precision == "fp16" else [])) == 0
        summary = json.loads((DATA / f"resnet50-rtx3090-{precision}.profile.metadata.json").read_text())["performance_summary"]
        result = ResultSet.read(out).results[-1]
        low, _high, _mean, median, _p = summary["Latency"]  # TREx's parse of trtexec's log: min, max, mean, median, p
        assert result.latency.min == pytest.approx(low, rel=1e-6)
        assert result.latency.p50 == pytest.approx(median, rel=1e-3)
        # trtexec's throughput is in batches/s; trtprof's in samples/s (batch 32)
        assert result.throughput_per_s / 32 == pytest.approx(summary["Throughput"], rel=5e-3)
        assert result.config["loads"] == 1 and any("one engine load" in w for w in result.warnings)


def test_layer_info_and_profile_are_kept(exports, tmp_path):
    out = tmp_path / "r.json"
    assert _import(exports, "fp16", out) == 0
    result = ResultSet.read(out).results[0]
    meta = result.engine["backend_metadata"]
    assert meta["layers_by_precision"]["fp16"] > meta["layers_by_precision"].get("fp32", 0) > 0
    assert meta["reformat_layers"] > 0  # this engine has "Reformatting CopyNode" layers
    layers = meta["trtexec_profile"]["layers"]
    assert layers[0]["name"] == "resnet50/conv1_conv/Conv2D__6"
    assert sum(x["percentage"] for x in layers) == pytest.approx(100, abs=1)
    assert result.engine["effective_precision"] == "fp16"


def test_two_imported_runs_point_at_compare_and_give_a_report_and_plots(exports, tmp_path, capsys):
    out = tmp_path / "results.json"
    assert _import(exports, "fp32", out) == 0
    assert _import(exports, "fp16", out, "--append") == 0
    printed = capsys.readouterr().out
    # one statistic for an imported pair, and it is compare's (tests/compare/test_imported_compare.py)
    assert f"compare them: trtprof compare {out}" in printed and "one load" in printed
    html = tmp_path / "report.html"
    assert main(["report", str(out), "-o", str(html)]) == 0
    text = html.read_text()
    assert "resnet50" in text and "trtexec" in text
    plots = tmp_path / "plots"
    assert main(["plot", str(out), "--out", str(plots)]) == 0
    assert (plots / "hist_batch32.png").stat().st_size > 0


def test_not_a_times_file_is_one_line_exit_2(exports, tmp_path, capsys):
    out = tmp_path / "r.json"
    code = main(["import", "trtexec", "--times", str(exports[("fp16", "profile")]), "--precision", "fp16",
                 "--batch-size", "32", "--out", str(out)])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "--exportTimes" in err[0] and not out.exists()


def test_a_file_trtprof_did_not_write_is_not_replaced(exports, tmp_path, capsys):
    out = tmp_path / "notes.json"
    out.write_text('{"mine": true}\n')
    before = tree_snapshot(tmp_path)
    assert _import(exports, "fp16", out) == 2
    assert "not a trtprof results" in capsys.readouterr().err
    assert tree_snapshot(tmp_path) == before and out.read_text() == '{"mine": true}\n'


def test_append_needs_an_existing_file(exports, tmp_path, capsys):
    assert _import(exports, "fp16", tmp_path / "none.json", "--append") == 2
    assert "--append" in capsys.readouterr().err


def test_layer_info_without_detailed_verbosity_has_no_counts(tmp_path):
    from trtprof.measure.trtexec import parse_layer_info

    names_only = {"Layers": ["conv1 + relu1", "fc"], "Bindings": ["input", "output"]}
    assert parse_layer_info(names_only, tmp_path / "l.json") == (None, None)
