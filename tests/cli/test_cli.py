"""The CLI contract, end to end on the embedded default backend (ONNX Runtime, CPU)."""
from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest

from trtprof.cli import main

from ..conftest import tree_snapshot

FAST = ["--warmup", "2", "--iterations", "5"]


def run_cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """The real console path (python -m trtprof): exit code, stdout and stderr as a user sees them."""
    return subprocess.run([sys.executable, "-m", "trtprof", *args], capture_output=True, text=True, cwd=cwd,
                          timeout=300)


def test_build_cache_hit_bench_plot(conv_model, tmp_path, capsys):
    engines = tmp_path / "engines"
    assert main(["build", str(conv_model), "--fp32", "--fp16", "--batch-sizes", "1,4", "--engines", str(engines),
                 "--backend", "onnxruntime"]) == 0
    out = capsys.readouterr().out
    lines = [l for l in out.splitlines() if not l.startswith("    ")]
    assert len(lines) == 2 and all(" built " in l for l in lines)
    assert "fp16 (effective fp32+casts)" in out and "NOT an FP16 result" in out

    assert main(["build", str(conv_model), "--fp16", "--fp32", "--batch-sizes", "4,1", "--engines", str(engines),
                 "--backend", "onnxruntime"]) == 0
    out = capsys.readouterr().out
    assert out.count("cache hit") == 2

    results = tmp_path / "results.json"
    table = tmp_path / "results.csv"
    assert main(["bench", str(engines), *FAST, "--out", str(results), "--csv", str(table)]) == 0
    out = capsys.readouterr().out
    assert "median ms" in out and "p99 ms" in out and "throughput/s" in out
    data = json.loads(results.read_text())
    assert data["schema"] == "trtprof.results/1"
    assert data["environment"]["host"]["cpu_count"] >= 1
    entries = data["results"]
    assert sorted((e["precision"], e["batch_size"]) for e in entries) == [("fp16", 1), ("fp16", 4), ("fp32", 1), ("fp32", 4)]
    for e in entries:
        assert {"model", "precision", "backend", "batch_size", "config", "stats", "throughput_per_s", "samples_ms"} <= set(e)
        lat = e["stats"]["latency_ms"]
        assert {"n", "mean", "std", "min", "p50", "p90", "p95", "p99", "max", "cv"} <= set(lat)
        assert lat["n"] == len(e["samples_ms"]) == 5
        assert lat["min"] <= lat["p50"] <= lat["p99"] <= lat["max"]
        assert e["config"]["warmup"] == 2 and e["config"]["iterations"] == 5
        assert e["config"]["input_shapes"]["input"] == [e["batch_size"], 3, 16, 16]
        assert e["throughput_per_s"] > 0
    fp16 = [e for e in entries if e["precision"] == "fp16"]
    assert all(e["engine"]["effective_precision"] == "fp32+casts" for e in fp16)
    rows = list(csv.DictReader(table.open()))
    assert len(rows) == 4 and float(rows[0]["latency_ms.p50"]) > 0

    plots = tmp_path / "plots"
    assert main(["plot", str(results), "--out", str(plots)]) == 0
    made = sorted(p.name for p in plots.iterdir())
    assert made == ["ecdf_batch1.png", "ecdf_batch4.png", "hist_batch1.png", "hist_batch4.png", "latency_vs_batch.png",
                    "throughput_vs_batch.png"]
    assert all((plots / m).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for m in made)
    assert main(["plot", str(results), "--out", str(plots), "--format", "svg"]) == 0
    assert (plots / "hist_batch1.svg").read_text().lstrip().startswith("<?xml")


def test_bench_one_engine_with_other_batch_sizes(conv_model, tmp_path, capsys):
    engines = tmp_path / "engines"
    main(["build", str(conv_model), "--engines", str(engines), "--backend", "onnxruntime"])
    (meta,) = engines.glob("*.json")
    results = tmp_path / "r.json"
    assert main(["bench", str(meta.with_suffix(".onnx")), "--batch-sizes", "2,3", *FAST, "--out", str(results)]) == 0
    assert [e["batch_size"] for e in json.loads(results.read_text())["results"]] == [2, 3]


def test_multi_io_int64_inputs(multi_io_model, tmp_path, capsys):
    engines = tmp_path / "engines"
    assert main(["build", str(multi_io_model), "--batch-sizes", "1,3", "--engines", str(engines), "--backend", "onnxruntime"]) == 0
    results = tmp_path / "r.json"
    assert main(["bench", str(engines), *FAST, "--int-range", "5,50", "--out", str(results)]) == 0
    entries = json.loads(results.read_text())["results"]
    assert [e["config"]["input_shapes"] for e in entries] == [{"x": [1, 4], "ids": [1, 3]}, {"x": [3, 4], "ids": [3, 3]}]
    assert entries[0]["config"]["int_range"] == [5, 50]


def test_static_batch_model_runs_its_own_batch(static_batch_model, tmp_path, capsys):
    engines = tmp_path / "engines"
    assert main(["build", str(static_batch_model), "--batch-sizes", "2", "--engines", str(engines), "--backend", "onnxruntime"]) == 0
    results = tmp_path / "r.json"
    assert main(["bench", str(engines), *FAST, "--out", str(results)]) == 0
    assert json.loads(results.read_text())["results"][0]["batch_size"] == 2


def test_shape_is_recorded_and_reused_by_bench(dynamic_seq_model, tmp_path, capsys):
    engines = tmp_path / "engines"
    assert main(["build", str(dynamic_seq_model), "--shape", "tokens:1x7x4", "--batch-sizes", "1,2",
                 "--engines", str(engines), "--backend", "onnxruntime"]) == 0
    meta = json.loads(next(engines.glob("*.json")).read_text())
    assert meta["spec"]["shapes"] == {"tokens": [1, 7, 4]}
    results = tmp_path / "r.json"
    assert main(["bench", str(engines), *FAST, "--out", str(results)]) == 0
    shapes = [e["config"]["input_shapes"]["tokens"] for e in json.loads(results.read_text())["results"]]
    assert shapes == [[1, 7, 4], [2, 7, 4]]


# --- bad input: exit 2, one line naming the file and the cause, no traceback, nothing written ----

def _assert_clean_failure(proc: subprocess.CompletedProcess, *needles: str) -> None:
    assert proc.returncode == 2, proc.stderr
    err_lines = [l for l in proc.stderr.splitlines() if l.strip()]
    assert len(err_lines) == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    for needle in needles:
        assert needle in err_lines[0], err_lines[0]


def _bad_files(tmp_path: Path, conv_model: Path) -> dict[str, tuple[Path, str]]:
    empty = tmp_path / "empty.onnx"
    empty.write_bytes(b"")
    truncated = tmp_path / "truncated.onnx"
    truncated.write_bytes(conv_model.read_bytes()[:300])
    text = tmp_path / "notes.onnx"
    text.write_text("this is not a model\n" * 20)
    return {
        "missing": (tmp_path / "nope.onnx", "no such file"),
        "empty": (empty, "empty"),
        "truncated": (truncated, "ONNX"),
        "not onnx": (text, "ONNX"),
    }


def test_bad_model_files(conv_model, tmp_path):
    engines = tmp_path / "engines"
    for label, (path, cause) in _bad_files(tmp_path, conv_model).items():
        proc = run_cli("build", str(path), "--engines", str(engines), "--backend", "onnxruntime")
        _assert_clean_failure(proc, str(path), cause)
    assert tree_snapshot(engines) == {}


def test_debug_shows_the_traceback(tmp_path):
    proc = run_cli("build", str(tmp_path / "nope.onnx"), "--debug")
    assert proc.returncode != 0 and "Traceback" in proc.stderr


def test_unknown_backend(conv_model, tmp_path):
    proc = run_cli("build", str(conv_model), "--backend", "nosuch", "--engines", str(tmp_path / "e"))
    _assert_clean_failure(proc, "unknown backend", "nosuch")


@pytest.mark.parametrize("model_fixture,extra,cause", [
    ("unsupported_op_model", [], "FancyOp"),  # an op the backend has no kernel for
    ("static_batch_model", ["--batch-sizes", "1,2"], "static batch of 2"),
    ("dynamic_seq_model", [], "--shape tokens:"),  # a dynamic dim other than batch, no --shape
    ("conv_model", ["--tf32", "--fp16"], "tf32 is not applicable"),  # checked before any build
])
def test_build_refuses_before_writing_anything(model_fixture, extra, cause, tmp_path, request):
    model = request.getfixturevalue(model_fixture)
    engines = tmp_path / "engines"
    proc = run_cli("build", str(model), *extra, "--engines", str(engines), "--backend", "onnxruntime")
    _assert_clean_failure(proc, cause)
    if model_fixture != "conv_model":
        assert str(model) in proc.stderr
    assert tree_snapshot(engines) == {}


def test_bench_refuses_a_corrupt_artifact(conv_model, tmp_path):
    engines = tmp_path / "engines"
    assert run_cli("build", str(conv_model), "--engines", str(engines), "--backend", "onnxruntime").returncode == 0
    (artifact,) = engines.glob("*.onnx")
    artifact.write_bytes(artifact.read_bytes()[:-10])
    out = tmp_path / "r.json"
    proc = run_cli("bench", str(engines), *FAST, "--out", str(out))
    _assert_clean_failure(proc, str(artifact), "sha256", "--rebuild")
    assert not out.exists()


def test_bench_bad_paths(tmp_path):
    _assert_clean_failure(run_cli("bench", str(tmp_path / "nothing")), "no such file")
    (tmp_path / "empty").mkdir()
    _assert_clean_failure(run_cli("bench", str(tmp_path / "empty")), "no engines here")


def test_plot_bad_results(tmp_path):
    bad = tmp_path / "r.json"
    bad.write_text('{"hello": 1}')
    _assert_clean_failure(run_cli("plot", str(bad)), str(bad), "not a trtprof results file")


def test_import_trtprof_is_light():
    code = ("import sys, trtprof, trtprof.cli; trtprof.cli.make_parser(); "
            "heavy = [m for m in ('onnxruntime', 'torch', 'tensorflow', 'tensorrt', 'matplotlib') if m in sys.modules]; "
            "print(','.join(heavy))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == ""


@pytest.mark.slow
def test_demo_runs_end_to_end(tmp_path):
    proc = run_cli("demo", "--dir", str(tmp_path / "demo"), "--iterations", "20", "--warmup", "5", "--batch-sizes", "1,4")
    assert proc.returncode == 0, proc.stderr
    assert "median ms" in proc.stdout
    assert (tmp_path / "demo" / "results.json").is_file()
    assert (tmp_path / "demo" / "plots" / "latency_vs_batch.png").is_file()


def _packaged_onnx_model(name: str) -> Path:
    """A model trtprof's authors did not write: the 'light' model-zoo graphs the onnx package ships
    (IR 3, weights listed as inputs and made by ConstantOfShape, static batch 1)."""
    import onnx

    path = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light" / f"{name}.onnx"
    if not path.is_file():
        pytest.skip(f"this onnx build does not ship {path.name}")
    return path


def test_contract_on_a_model_zoo_graph_we_did_not_write(tmp_path, capsys):
    model = _packaged_onnx_model("light_shufflenet")
    engines = tmp_path / "engines"
    assert main(["build", str(model), "--fp32", "--fp16", "--engines", str(engines), "--backend", "onnxruntime"]) == 0
    assert capsys.readouterr().out.count(" built ") == 2
    results = tmp_path / "r.json"
    assert main(["bench", str(engines), "--warmup", "1", "--iterations", "3", "--out", str(results)]) == 0
    entries = json.loads(results.read_text())["results"]
    assert [(e["precision"], e["config"]["input_shapes"]) for e in entries] == [
        ("fp32", {"gpu_0/data_0": [1, 3, 224, 224]}), ("fp16", {"gpu_0/data_0": [1, 3, 224, 224]})]  # fp32 first
    # its static batch of 1 is enforced
    assert main(["build", str(model), "--batch-sizes", "4", "--engines", str(engines), "--backend", "onnxruntime"]) == 2
    assert "static batch of 1" in capsys.readouterr().err
