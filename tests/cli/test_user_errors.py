"""Issue 12: every user mistake is exit 2 with one line naming the option/path and the cause, found
before long work; Ctrl-C / SIGTERM during `bench` keeps what finished (exit 130)."""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from trtprof.cli import main

from ..conftest import tree_snapshot
from .test_cli import FAST, _assert_clean_failure, run_cli


def run_main(capsys, *argv: str) -> tuple[int, str, str]:
    """The CLI in-process (argparse errors exit through SystemExit): (code, stdout, stderr)."""
    try:
        code = main(list(argv))
    except SystemExit as exc:
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def assert_one_line(code: int, err: str, *needles: str) -> str:
    assert code == 2, err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert "Traceback" not in err
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


@pytest.fixture
def engines(conv_model, tmp_path) -> Path:
    out = tmp_path / "engines"
    assert main(["build", str(conv_model), "--fp32", "--fp16", "--batch-sizes", "1,2", "--engines", str(out),
                 "--backend", "onnxruntime"]) == 0
    return out


@pytest.fixture
def results_file(engines, tmp_path, capsys) -> Path:
    out = tmp_path / "results.json"
    assert main(["bench", str(engines), *FAST, "--out", str(out)]) == 0
    capsys.readouterr()
    return out


# (argv after the command's own path, needles in the one error line). "{e}" is the engines dir,
# "{t}" tmp_path, "{r}" a results file.
BENCH_MISTAKES = [
    (["--batch-sizes", "1,,2"], ["--batch-sizes", "empty item"]),
    (["--batch-sizes", "999999999999999999999"], ["--batch-sizes", "at most 2147483647"]),
    (["--batch-sizes", "0"], ["--batch-sizes", "positive"]),
    (["--duration-s", "0"], ["--duration-s", "must be > 0"]),
    (["--duration-s", "nan"], ["--duration-s", "not a finite number"]),
    (["--duration-s", "inf"], ["--duration-s", "not a finite number"]),
    (["--iterations", "0"], ["--iterations", "must be > 0"]),
    (["--warmup", "-1"], ["--warmup", "must be >= 0"]),
    (["--seed", "-1"], ["--seed", "between 0 and"]),
    (["--threads", "0"], ["--threads", "must be > 0"]),
    (["--out", "{t}"], ["--out", "is a directory"]),
    (["--out", "{r}/x.json"], ["--out", "not a directory"]),
    (["--csv", "{t}"], ["--csv", "is a directory"]),
]


@pytest.mark.parametrize("extra,needles", BENCH_MISTAKES, ids=[" ".join(a) for a, _ in BENCH_MISTAKES])
def test_bench_option_mistakes_are_one_line_exit_2_and_write_nothing(extra, needles, engines, results_file,
                                                                      tmp_path, capsys):
    extra = [a.format(t=tmp_path, r=results_file) for a in extra]
    default_out = tmp_path / "never.json"
    argv = ["bench", str(engines), *FAST, *extra]
    if "--out" not in extra:
        argv += ["--out", str(default_out)]
    before = tree_snapshot(engines)
    code, out, err = run_main(capsys, *argv)
    assert_one_line(code, err, *needles)
    assert not default_out.exists() and tree_snapshot(engines) == before
    assert "median ms" not in out  # refused before any measurement


def test_out_checked_before_the_benchmark_runs(engines, tmp_path, capsys):
    """A directory as --out used to be found only after the whole run: now it fails at once."""
    started = time.perf_counter()
    code, out, err = run_main(capsys, "bench", str(engines), "--duration-s", "30", "--out", str(tmp_path))
    assert_one_line(code, err, str(tmp_path), "--out", "is a directory")
    assert time.perf_counter() - started < 20  # 4 configs × 30 s would be 120 s


def test_engines_that_is_a_file(conv_model, tmp_path, capsys):
    a_file = tmp_path / "engines"
    a_file.write_text("x")
    code, _, err = run_main(capsys, "build", str(conv_model), "--engines", str(a_file), "--backend", "onnxruntime")
    assert_one_line(code, err, str(a_file), "--engines", "not a directory")


def test_convert_output_that_is_a_directory(tmp_path, capsys):
    """Refused before TensorFlow is even imported (the model need not be real for this check)."""
    model = tmp_path / "model.keras"
    model.write_bytes(b"not read")
    code, _, err = run_main(capsys, "convert", str(model), "-o", str(tmp_path))
    assert_one_line(code, err, str(tmp_path), "--output", "is a directory")


def test_plot_and_report_output_mistakes(results_file, tmp_path, capsys):
    a_file = tmp_path / "a_file"
    a_file.write_text("x")
    code, _, err = run_main(capsys, "plot", str(results_file), "--out", str(a_file))
    assert_one_line(code, err, str(a_file), "--out", "not a directory")
    code, _, err = run_main(capsys, "report", str(results_file), "-o", str(tmp_path))
    assert_one_line(code, err, str(tmp_path), "--out", "is a directory")
    code, _, err = run_main(capsys, "plot", str(tmp_path))
    assert_one_line(code, err, str(tmp_path), "is a directory", "results JSON")


def test_int_range_beyond_an_embedding_is_refused_from_the_model(multi_io_model, tmp_path, capsys):
    engines = tmp_path / "engines"
    assert main(["build", str(multi_io_model), "--engines", str(engines), "--backend", "onnxruntime"]) == 0
    out = tmp_path / "r.json"
    code, _, err = run_main(capsys, "bench", str(engines), *FAST, "--int-range", "0,5000", "--out", str(out))
    assert_one_line(code, err, "--int-range 0,5000", "'ids'", "100 rows", "--int-range 0,100")
    assert not out.exists()
    code, _, err = run_main(capsys, "bench", str(engines), *FAST, "--int-range=-101,5", "--out", str(out))
    assert_one_line(code, err, "--int-range -101,5")
    assert main(["bench", str(engines), *FAST, "--int-range", "0,100", "--out", str(out)]) == 0  # the edge is fine


def test_engine_json_that_is_a_list_is_corrupt_for_bench_and_repaired_by_build(conv_model, engines, tmp_path, capsys):
    meta = sorted(engines.glob("*fp32*.json"))[0]
    meta.write_text("[1, 2, 3]\n")
    code, _, err = run_main(capsys, "bench", str(engines), *FAST, "--out", str(tmp_path / "r.json"))
    assert_one_line(code, err, str(meta), "JSON list")
    assert main(["build", str(conv_model), "--fp32", "--batch-sizes", "1,2", "--engines", str(engines),
                 "--backend", "onnxruntime"]) == 0
    assert " built " in capsys.readouterr().out
    assert json.loads(meta.read_text())["schema"] == 1


@pytest.mark.parametrize("content", [
    '{"schema": 1, "key": "k", "model": "m", "spec": [], "artifact": "a", "artifact_sha256": "x", "inputs": [], "outputs": []}',
    '{"schema": 1, "key": 5, "model": "m"}',
    '"just a string"',
    '{"schema": 1, "key": "k", "model": "m", "spec": {"model_sha256": "a", "backend": "onnxruntime", '
    '"precision": "fp99", "batch_sizes": [1]}, "artifact": "a", "artifact_sha256": "x", "inputs": [], "outputs": []}',
])
def test_metadata_of_the_wrong_shape_is_corrupt(content, tmp_path):
    from trtprof.engines.cache import EngineRecord
    from trtprof.errors import CacheCorrupt

    meta = tmp_path / "m.fp32.onnxruntime.0123456789ab.json"
    meta.write_text(content)
    with pytest.raises(CacheCorrupt):
        EngineRecord.read(meta)


def test_huge_batch_is_refused_before_allocating(engines, tmp_path, capsys):
    code, _, err = run_main(capsys, "bench", str(engines), *FAST, "--batch-sizes", "2000000000",
                            "--out", str(tmp_path / "r.json"))
    line = assert_one_line(code, err, "batch size 2000000000", "GiB", "try --batch-sizes")
    suggested = int(line.split("try --batch-sizes ")[1].split()[0])
    assert 1 <= suggested < 2000000000


@pytest.mark.parametrize("error, batch, expected, match", [
    (RuntimeError("[ONNXRuntimeError] : 6 : RUNTIME_EXCEPTION : Failed to allocate memory for requested buffer "
                  "of size 68719476736"), 512, "OutOfMemory", r"batch size 512 \(an allocation of 64 GiB failed.*"
                                                             r"try --batch-sizes \d+"),
    (MemoryError("Unable to allocate 8.00 GiB for an array"), 64, "OutOfMemory", "batch size 64"),
    # a cuDNN workspace that could not be allocated escaped bench as a traceback before the shared classifier
    (RuntimeError("cuDNN error: CUDNN_STATUS_ALLOC_FAILED"), 32, "OutOfMemory",
     r"^out of memory at batch size 32 \(RuntimeError; .*try --batch-sizes"),
    (RuntimeError("cuDNN error: CUDNN_STATUS_BAD_PARAM"), 32, "RuntimeError", "CUDNN_STATUS_BAD_PARAM"),  # not memory
])
def test_allocation_failure_while_running_names_batch_and_memory(conv_model, tmp_path, error, batch, expected, match):
    """An allocation failure from a run (here from a fake runner: forcing a real one out of memory would
    take the test machine's memory with it, or need a GPU) becomes OutOfMemory with the batch size;
    another error passes through as it was."""
    from trtprof.measure.bench import bench_one
    from trtprof.builder.pipeline import BuildSettings, build_engines
    from trtprof.errors import OutOfMemory
    from trtprof.spec import Precision
    from trtprof.measure.timing import TimingConfig

    (outcome,) = build_engines(conv_model, [Precision.FP32],
                               settings=BuildSettings(engines_dir=tmp_path / "e", backend="onnxruntime"))

    class FakeFailingRunner:  # a fake, named so: only the error path is under test
        device = "cpu"
        inputs = outcome.record.inputs
        outputs = outcome.record.outputs

        def infer(self, feeds):
            raise error

    with pytest.raises(OutOfMemory if expected == "OutOfMemory" else type(error), match=match):
        bench_one(outcome.record, FakeFailingRunner(), batch, TimingConfig(warmup=1, iterations=2))


def test_one_line_argparse_errors_everywhere(capsys):
    code, _, err = run_main(capsys, "build", "m.onnx", "--builder-opt-level", "9")
    assert_one_line(code, err, "--builder-opt-level")
    code, _, err = run_main(capsys, "cache", "prune", "--older-than", "7d", "--bogus")
    assert_one_line(code, err, "--bogus")


def test_every_subcommand_help_has_examples(capsys):
    from trtprof.cli import make_parser

    from trtprof.cli._examples import EXAMPLES

    parser = make_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    base = {"build", "bench", "plot", "report", "demo", "convert", "inspect", "compare", "cache"}
    assert base <= set(sub.choices) and base <= set(EXAMPLES)
    for name in EXAMPLES:  # a subcommand added later gets its examples by adding an entry there
        text = sub.choices[name].format_help()
        assert "examples:\n  trtprof " + name in text, name


# --- read-only engines dir -----------------------------------------------------------------------

def _run_read_only(folder: Path, *args: str) -> subprocess.CompletedProcess:
    """Run the CLI with ``folder`` read-only: chmod for a normal user; for root (who ignores modes)
    a read-only bind mount in a private mount namespace (unshare), else skip."""
    cmd = [sys.executable, "-m", "trtprof", *args]
    if os.geteuid() != 0:
        mode = folder.stat().st_mode
        folder.chmod(0o555)
        try:
            return subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        finally:
            folder.chmod(mode)
    if shutil.which("unshare") is None:
        pytest.skip("root without unshare: cannot make a read-only folder")
    probe = subprocess.run(["unshare", "-m", "true"], capture_output=True)
    if probe.returncode != 0:
        pytest.skip("unshare -m is not permitted here")
    script = 'mount --bind -o ro "$0" "$0" && exec "$@"'
    return subprocess.run(["unshare", "-m", "sh", "-c", script, str(folder), *cmd], capture_output=True, text=True,
                          timeout=300, env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])})


def test_read_only_engines_dir_serves_cache_hits_and_refuses_builds(conv_model, tmp_path):
    engines = tmp_path / "engines"
    assert main(["build", str(conv_model), "--fp32", "--engines", str(engines), "--backend", "onnxruntime"]) == 0
    shutil.rmtree(engines / ".locks")  # the lock file must be created anew: impossible when read-only
    before = tree_snapshot(engines)
    hit = _run_read_only(engines, "build", str(conv_model), "--fp32", "--engines", str(engines), "--backend", "onnxruntime")
    assert hit.returncode == 0, hit.stderr
    assert "cache hit" in hit.stdout
    miss = _run_read_only(engines, "build", str(conv_model), "--fp16", "--engines", str(engines), "--backend", "onnxruntime")
    _assert_clean_failure(miss, str(engines), "not writable", "writable --engines")
    bench = _run_read_only(engines, "bench", str(engines), *FAST, "--out", str(engines / "r.json"))
    _assert_clean_failure(bench, "--out", "inside the engines dir")  # refused before its permissions matter (issue 21)
    assert tree_snapshot(engines) == before


# --- interruption ----------------------------------------------------------------------------------

@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_signal_during_bench_keeps_finished_entries(signum, conv_model, tmp_path):
    """A real signal to a real `trtprof bench` subprocess, mid-run: exit 130, the results JSON and CSV
    hold the finished entries, `"interrupted": true`, and the pending list has the rest."""
    engines = tmp_path / "engines"
    assert main(["build", str(conv_model), "--fp32", "--fp16", "--batch-sizes", "1,2,3", "--engines", str(engines),
                 "--backend", "onnxruntime"]) == 0
    out, table = tmp_path / "r.json", tmp_path / "r.csv"
    # 6 configs × 2 s = 12 s of measuring; the signal comes 8 s after the start (startup 1–5 s)
    proc = subprocess.Popen([sys.executable, "-m", "trtprof", "bench", str(engines), "--warmup", "1",
                             "--iterations", "5", "--duration-s", "2", "--out", str(out), "--csv", str(table)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(8)
    proc.send_signal(signum)
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130, stderr
    data = json.loads(out.read_text())
    assert data["interrupted"] is True
    done = [(e["precision"], e["batch_size"]) for e in data["results"]]
    todo = [(p["precision"], p["batch_size"]) for p in data["pending"]]
    assert 1 <= len(done) < 6, (done, todo)
    assert sorted(done + todo) == sorted((p, b) for p in ("fp16", "fp32") for b in (1, 2, 3))
    for e in data["results"]:
        assert e["stats"]["latency_ms"]["n"] >= 5  # finished entries are complete measurements
    rows = table.read_text().splitlines()
    assert len(rows) == 1 + len(done)
    assert "median ms" in stdout and "interrupted" in stderr and "Traceback" not in stderr


def test_interrupted_bench_library_call_returns_partial_set(conv_model, tmp_path):
    """bench_records turns a KeyboardInterrupt in the loop into interrupted=True with the rest pending."""
    from trtprof.measure.bench import BenchHooks, bench_records
    from trtprof.builder.pipeline import BuildSettings, build_engines
    from trtprof.spec import Precision
    from trtprof.measure.timing import TimingConfig

    outcomes = build_engines(conv_model, [Precision.FP32], [1, 2, 4],
                             settings=BuildSettings(engines_dir=tmp_path / "e", backend="onnxruntime"))
    seen = []

    def on_result(result):
        seen.append(result)
        if len(seen) == 2:
            raise KeyboardInterrupt  # as if Ctrl-C arrived right after the second entry

    results = bench_records([o.record for o in outcomes], TimingConfig(warmup=1, iterations=3),
                            hooks=BenchHooks(on_result=on_result))
    assert results.interrupted and [r.batch_size for r in results.results] == [1, 2]
    assert [p["batch_size"] for p in results.pending] == [4]
    assert results.to_json()["pending"] == results.pending


@pytest.mark.tf
def test_read_only_engines_dir_serves_a_converted_tensorflow_model(tmp_path_factory, tmp_path):
    """The TF → ONNX conversion cache (engines/onnx) also serves hits when read-only."""
    pytest.importorskip("tensorflow")
    pytest.importorskip("tf2onnx")
    from ..tf_helpers import load_make_models

    models = tmp_path_factory.mktemp("tf_models")
    load_make_models().make("mlp", models, ("keras",))
    model = models / "mlp.keras"
    engines = tmp_path / "engines"
    assert main(["build", str(model), "--fp32", "--engines", str(engines), "--backend", "onnxruntime"]) == 0
    for locks in engines.rglob(".locks"):
        shutil.rmtree(locks)
    before = tree_snapshot(engines)
    hit = _run_read_only(engines, "build", str(model), "--fp32", "--engines", str(engines), "--backend", "onnxruntime")
    assert hit.returncode == 0, hit.stderr
    assert "converted (cache hit)" in hit.stdout and " cache hit " in hit.stdout
    assert tree_snapshot(engines) == before


@pytest.mark.parametrize("command", [
    ["profile", "MODEL", "--out", "ADIR"],
    ["train-compare", "MODEL", "--out", "ADIR"],
    ["sweep", "--models", "MODEL", "--out", "MODEL"],
])
def test_newer_commands_check_their_output_before_any_work(conv_model, tmp_path, command):
    """profile, train-compare and sweep refuse an unusable --out before building or measuring anything."""
    (tmp_path / "adir").mkdir()
    engines = tmp_path / "engines"
    args = [str(conv_model) if a == "MODEL" else str(tmp_path / "adir") if a == "ADIR" else a for a in command]
    proc = run_cli(*args, "--engines", str(engines)) if command[0] == "profile" else run_cli(*args)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "--out" in lines[0] and "Traceback" not in proc.stderr
    assert not engines.exists()  # nothing was built


def test_inspect_checks_the_sha256_like_every_other_command(engines, capsys):
    """An artifact changed after its build: inspect (of the file or of its dir) is exit 2 with one
    line naming the file and the mismatch, before printing anything; the file is left as it is."""
    (artifact,) = [p for p in engines.iterdir() if p.suffix == ".onnx" and ".fp32." in p.name]
    assert main(["inspect", str(engines)]) == 0
    capsys.readouterr()
    artifact.write_bytes(artifact.read_bytes()[:-10])  # truncated
    for target in (artifact, engines):
        assert main(["inspect", str(target)]) == 2
        captured = capsys.readouterr()
        assert captured.out == "" and "does not match its metadata" in captured.err
        assert len(captured.err.strip().splitlines()) == 1 and artifact.name in captured.err
    assert artifact.exists()
