"""Issue 21: fault injection. Each case runs the real CLI in a subprocess with one fault injected (by
tests/faults/sitecustomize.py, named per test) or a real limit (``ulimit -f``), and asserts the promise:
the exit code, the one line, and the user files that must still exist."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from trtprof.cli import main

from .test_cli import _assert_clean_failure
from .test_user_errors import run_main as _run
from ..conftest import one_line_error

FAULTS_DIR = Path(__file__).parent.parent / "faults"
REPO = Path(__file__).resolve().parents[2]


def run_with_fault(fault: str, *argv: str, preexec_fn=None, timeout: float = 300) -> subprocess.CompletedProcess:
    """``python -m trtprof ARGV`` with ``fault`` injected (see tests/faults/sitecustomize.py)."""
    env = dict(os.environ, TRTPROF_TEST_FAULT=fault,
               PYTHONPATH=os.pathsep.join([str(FAULTS_DIR), str(REPO), os.environ.get("PYTHONPATH", "")]))
    return subprocess.run([sys.executable, "-m", "trtprof", *argv], capture_output=True, text=True,
                          timeout=timeout, env=env, preexec_fn=preexec_fn)


def test_a_write_fault_hits_exact_paths_never_substrings(tmp_path):
    """Was: ``enospc:c.json`` also hit an engine ``….0123456789ac.json``, so a test failed or passed with
    the key. A fault names an absolute path: the file itself, or its atomic temp ``.NAME.XXXX.tmp``
    beside it; ``DIR/`` names the files directly in DIR."""
    from ..conftest import load_script

    faults = load_script("tests/faults/sitecustomize.py", "trtprof_test_faults")
    out, engines = tmp_path / "c.json", tmp_path / "e"
    assert faults.hits(str(out), out) and faults.hits(str(out), tmp_path / ".c.json.k3_x9z.tmp")
    for other in (engines / "convnet.fp32.onnxruntime.0123456789ac.json", tmp_path / "abc.json",
                  tmp_path / "c.json.bak", tmp_path / ".abc.json.k3_x9z.tmp", tmp_path / "sub" / "c.json", ""):
        assert not faults.hits(str(out), other), other
    assert faults.hits(f"{engines}/", engines / "convnet.fp32.onnxruntime.0123456789ac.json")
    assert faults.hits(f"{engines}/", engines / ".convnet.fp32.onnxruntime.0123456789ac.onnx.k3_x9z.tmp")
    assert not faults.hits(f"{engines}/", engines / ".locks" / "x.lock") and not faults.hits(f"{engines}/", out)
    relative = subprocess.run([sys.executable, "-c", "pass"], capture_output=True, text=True,
                              env=dict(os.environ, TRTPROF_TEST_FAULT="enospc:c.json",
                                       PYTHONPATH=os.pathsep.join([str(FAULTS_DIR), os.environ.get("PYTHONPATH", "")])))
    assert relative.returncode != 0 and "not an absolute path" in relative.stderr  # a bare name is refused


@pytest.fixture
def engines(conv_model, tmp_path) -> Path:
    out = tmp_path / "engines"
    assert main(["build", str(conv_model), "--fp32", "--batch-sizes", "1,2", "--engines", str(out),
                 "--backend", "onnxruntime"]) == 0
    return out


def test_ort_allocation_failure_while_running_is_exit_2_naming_the_batch(engines, tmp_path):
    """Fault: ORT's session run raises its own "Failed to allocate memory" RuntimeException at batch
    4096 (injected: whether a real run fails depends on the ORT version and the machine). The CLI
    says which batch ran out, what to try, and writes no half result."""
    (meta,) = engines.glob("*.fp32.*.json")
    out = tmp_path / "r.json"
    proc = run_with_fault("ort_oom:4096", "bench", str(meta), "--batch-sizes", "4096", "--warmup", "1",
                          "--iterations", "2", "--out", str(out))
    _assert_clean_failure(proc, "out of memory at batch size 4096", "an allocation of", "inputs alone take",
                          "try --batch-sizes")
    assert not out.exists() and meta.exists()
    # the same injection leaves a batch below its threshold alone: the fault is what failed the run
    proc = run_with_fault("ort_oom:4096", "bench", str(meta), "--batch-sizes", "2", "--warmup", "1",
                          "--iterations", "2", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    assert out.exists()


# --- cache prune / ls touch only trtprof's entries ----------------------------------------------

def test_prune_refuses_a_folder_that_is_not_an_engines_dir(conv_model, tmp_path, capsys):
    """Was: `prune DIR --corrupt` on a model folder removed the model and the results (exit 0)."""
    results = tmp_path / "results.json"
    results.write_text('{"schema": 1, "results": []}')
    for argv in (["--corrupt"], ["--corrupt", "--dry-run"], ["--older-than", "0s"], ["--model", "convnet"]):
        code, out, err = _run(capsys, "cache", "prune", str(tmp_path), *argv)
        one_line_error(code, err, str(tmp_path), "holds no trtprof engine entry", "2 other files")
        assert "remove" not in out
    code, _, err = _run(capsys, "cache", "ls", str(tmp_path))
    one_line_error(code, err, "holds no trtprof engine entry")
    assert conv_model.exists() and results.exists()


@pytest.mark.parametrize("where", ["root", "home"])
def test_prune_and_ls_refuse_a_filesystem_root_and_home(where, capsys):
    folder = "/" if where == "root" else str(Path.home())
    for argv in (["prune", folder, "--corrupt", "--dry-run"], ["ls", folder]):
        code, out, err = _run(capsys, "cache", *argv)
        one_line_error(code, err, folder, "filesystem root or a home dir")
        assert out == ""


def test_prune_keeps_user_files_inside_an_engines_dir(engines, tmp_path, capsys):
    """Results, a model and a symlink in the engines dir, and metadata whose artifact names a user's
    file: `prune --corrupt` removes only the entry's own files."""
    results = engines / "results.json"
    results.write_text('{"schema": 1}')
    model = engines / "mlp.onnx"
    model.write_bytes(b"a user's model")
    outside = tmp_path / "outside.txt"
    outside.write_text("keep")
    link = engines / "x.fp32.onnxruntime.0123456789ab.onnx"
    link.symlink_to(outside)
    (meta,) = engines.glob("*.fp32.*.json")
    data = json.loads(meta.read_text())
    artifact = engines / data["artifact"]
    data["artifact"] = "results.json"  # points the entry at a user's file
    meta.write_text(json.dumps(data))
    code, out, _ = _run(capsys, "cache", "prune", str(engines), "--corrupt")
    assert code == 0 and "removed 1 of 1" in out and "3 other files not trtprof's, left alone" in out
    assert not meta.exists() and not artifact.exists()  # the corrupt entry itself
    assert results.exists() and model.exists() and link.is_symlink() and outside.read_text() == "keep"


def test_metadata_named_like_an_entry_but_unproven_is_left_alone(engines, capsys):
    """A JSON that follows the naming scheme but is not a record, with no build lock of its key:
    not provably trtprof's, so neither listed for removal nor removed."""
    stray = engines / "notes.fp32.onnxruntime.abcdefabcdef.json"
    stray.write_text("[1, 2]")
    code, out, _ = _run(capsys, "cache", "prune", str(engines), "--corrupt")
    assert code == 0 and "removed 0 of 1" in out and stray.exists()
    (engines / ".locks" / ("abcdefabcdef" + "0" * 52 + ".lock")).touch()  # a build of that key was here
    code, out, _ = _run(capsys, "cache", "prune", str(engines), "--corrupt")
    assert code == 0 and "removed 1 of 2" in out and not stray.exists()


@pytest.mark.skipif(os.geteuid() == 0, reason="root ignores a read-only mode")
def test_prune_in_a_read_only_dir_is_one_line(engines, capsys):
    (meta,) = engines.glob("*.fp32.*.json")
    meta.write_text("[]")  # corrupt, so prune wants it gone
    engines.chmod(0o555)
    try:
        code, _, err = _run(capsys, "cache", "prune", str(engines), "--corrupt")
    finally:
        engines.chmod(0o755)
    one_line_error(code, err, str(engines), "cannot remove", "Permission denied")
    assert meta.exists()


# --- output paths checked before work starts ----------------------------------------------------

FAST = ["--warmup", "1", "--iterations", "2"]


def test_bench_out_inside_the_engines_dir_is_refused(engines, tmp_path, capsys):
    """Was: `bench e5 --out e5/results.json` exited 0, then `bench e5` failed on that file."""
    before = sorted(p.name for p in engines.iterdir())
    code, out, err = _run(capsys, "bench", str(engines), *FAST, "--out", str(engines / "results.json"))
    one_line_error(code, err, "--out", "inside the engines dir")
    assert "median" not in out and sorted(p.name for p in engines.iterdir()) == before
    code, _, err = _run(capsys, "bench", str(engines), *FAST, "--csv", str(engines / "sub" / "r.csv"),
                        "--out", str(tmp_path / "r.json"))
    one_line_error(code, err, "--csv", "inside the engines dir")
    # an engine of another engines dir is refused the same way (found by its build locks)
    other = tmp_path / "other"
    other.mkdir()
    (other / ".locks").mkdir()
    (other / ".locks" / ("ab" * 32 + ".lock")).touch()
    code, _, err = _run(capsys, "bench", str(engines), *FAST, "--out", str(other / "r.json"))
    one_line_error(code, err, "--out", "inside the engines dir", str(other))
    assert main(["bench", str(engines), *FAST, "--out", str(tmp_path / "r.json")]) == 0  # next to it is fine


def test_out_naming_an_engine_metadata_file_is_refused(engines, tmp_path, capsys):
    (meta,) = engines.glob("*.fp32.*.json")
    original = meta.read_bytes()
    moved = tmp_path / "elsewhere" / meta.name  # even outside the engines dir: the name is an engine's
    code, _, err = _run(capsys, "bench", str(meta), *FAST, "--out", str(meta))
    one_line_error(code, err, "--out", "inside the engines dir")
    code, _, err = _run(capsys, "bench", str(meta), *FAST, "--out", str(moved))
    one_line_error(code, err, "--out", "named like an engine's file")
    assert meta.read_bytes() == original and not moved.exists()


def test_out_and_csv_naming_one_file_is_refused(engines, tmp_path, capsys):
    """Was: `--out x.json --csv x.json` kept the CSV and lost the JSON."""
    target = tmp_path / "x.json"
    code, out, err = _run(capsys, "bench", str(engines), *FAST, "--out", str(target), "--csv", str(target))
    one_line_error(code, err, "--csv", "same file as --out")
    code, out, err = _run(capsys, "bench", str(engines), *FAST, "--out", str(target),
                          "--csv", str(tmp_path / "." / "x.json"))
    one_line_error(code, err, "--csv", "same file as --out")
    assert not target.exists() and "median" not in out


def test_sweep_out_inside_its_engines_dir_is_refused(conv_model, tmp_path, capsys):
    """Was: `sweep --engines X --out X` let a later prune delete sweep.json and cells.jsonl."""
    engines = tmp_path / "X"
    for out in (engines, engines / "sweep"):
        code, _, err = _run(capsys, "sweep", "--models", str(conv_model), "--engines", str(engines),
                            "--out", str(out), "--batch-sizes", "1")
        one_line_error(code, err, "--out", "inside the engines dir")
    assert not engines.exists()


def test_plot_never_leaves_a_truncated_image(tmp_path, monkeypatch):
    """Fault: the PNG write fails with ENOSPC. Plots are written atomically: no half image."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from trtprof.report.plots import save_figure

    fig, _ = plt.subplots()
    target = tmp_path / "p.png"
    target.write_bytes(b"old image")

    def failing_replace(src, dst):  # fault injection: the rename never happens, as on a full disk
        raise OSError(28, "No space left on device", str(dst))

    with monkeypatch.context() as patch:
        patch.setattr(os, "replace", failing_replace)
        with pytest.raises(OSError, match="No space"):
            save_figure(fig, target)
    plt.close(fig)
    assert target.read_bytes() == b"old image" and [p.name for p in tmp_path.iterdir()] == ["p.png"]
    fig, _ = plt.subplots()
    save_figure(fig, target)
    plt.close(fig)
    assert target.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


# --- data never becomes a path; specs and result files bounded and typed ---------------------------

def _spec(tmp_path: Path, text: str, name: str = "s.toml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def _sweep_line(capsys, spec: Path, *extra: str) -> str:
    code, out, err = _run(capsys, "sweep", str(spec), "--out", str(spec.parent / "sweep_out"), *extra)
    line = one_line_error(code, err)
    assert not (spec.parent / "sweep_out" / "cells.jsonl").exists()
    return line


def test_spec_backend_is_checked_before_it_names_a_folder(conv_model, tmp_path, capsys):
    """Was: `backend = "../../x"` created a folder outside the engines root, then was refused."""
    spec = _spec(tmp_path, f'[sweep]\nengines = "e"\n[[models]]\npath = "{conv_model}"\nbackend = "../../escaped"\n')
    line = _sweep_line(capsys, spec)
    assert "backend" in line and "'../../escaped'" in line
    assert not (tmp_path / "e").exists() and not list(tmp_path.parent.glob("*escaped*"))


@pytest.mark.parametrize("body,needles", [
    ('sweep = 5\n[[models]]\npath = "{m}"\n', ["[sweep] must be a table"]),
    ('models = "x"\n', ["models must be a list"]),
    ('[[models]]\npath = "{m}"\ntime_budget_s = nan\n', ["time_budget_s", "finite number > 0"]),
    ('[[models]]\npath = "{m}"\ntime_budget_s = inf\n', ["time_budget_s", "finite number > 0"]),
    ('[[models]]\npath = "{m}"\nround_iterations = 2.5\n', ["round_iterations", "an integer"]),
    ('[[models]]\npath = "{m}"\nround_iterations = true\n', ["round_iterations", "an integer"]),
    ('[[models]]\npath = "{m}"\nbatch_sizes = [true, 1.9]\n', ["batch_sizes", "True"]),
    ('[[models]]\npath = "{m}"\nbatch_sizes = [1.9]\n', ["batch_sizes", "1.9"]),
    ('[[models]]\npath = "{m}"\nbatch_sizes = [2147483648]\n', ["batch_sizes", "2147483647"]),
    ('[[models]]\npath = "{m}"\nshape = ["x:' + "1x" * 70000 + '1"]\n', ["shape[0]", "more than 4096"]),
    ('[[models]]\npath = "{m}"\nshape = ["x:1xq"]\n', ["shape", "integers"]),
    ('[[models]]\npath = 5\n', ["a model needs a path"]),
    ('[sweep]\ngpu_types = ["../H200"]\n[[models]]\npath = "{m}"\n', ["gpu_types", "not a plain name"]),
    ('[[models]]\npath = "{m}"\nargs = "--x \'unclosed"\n', ["args", "quotation"]),
])
def test_spec_fields_are_typed_and_bounded(body, needles, conv_model, tmp_path, capsys):
    """Was: TypeError tracebacks, `nan` accepted and failing every cell, `[true, 1.9]` read as [1],
    a 140 KB shape reaching exec as 'Argument list too long'."""
    line = _sweep_line(capsys, _spec(tmp_path, body.replace("{m}", str(conv_model))))
    for needle in needles:
        assert needle in line, line


def test_spec_batch_size_limit_just_inside_is_accepted(conv_model, tmp_path):
    from trtprof.model.inputs import MAX_BATCH_SIZE
    from trtprof.sweep.spec import load_spec

    spec = load_spec(_spec(tmp_path, f'[[models]]\npath = "{conv_model}"\nbatch_sizes = [{MAX_BATCH_SIZE}, "8"]\n'))
    assert spec.models[0].batch_sizes == (8, MAX_BATCH_SIZE)


def test_spec_file_size_limit(conv_model, tmp_path):
    from trtprof.util.datafile import MAX_SPEC_BYTES
    from trtprof.errors import BadInput
    from trtprof.sweep.spec import load_spec

    body = f'[[models]]\npath = "{conv_model}"\n'
    pad = MAX_SPEC_BYTES - len(body.encode()) - 1
    just_inside = _spec(tmp_path, body + "#" * pad + "\n")
    assert just_inside.stat().st_size == MAX_SPEC_BYTES
    assert load_spec(just_inside).models
    just_outside = _spec(tmp_path, body + "#" * (pad + 1) + "\n", "big.toml")
    with pytest.raises(BadInput, match=f"more than the {MAX_SPEC_BYTES}-byte limit"):
        load_spec(just_outside)


def test_yaml_alias_bomb_is_refused_at_once(conv_model, tmp_path, capsys):
    """Was: 1 GB of memory after 40 s. Ten levels of ten aliases: refused in well under a second."""
    pytest.importorskip("yaml")
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]" for i in range(1, 10)]
    spec = _spec(tmp_path, "\n".join(lines) + f"\nmodels:\n  - path: {conv_model}\n", "bomb.yaml")
    line = _sweep_line(capsys, spec)
    assert "alias bomb" in line and str(spec) in line


def test_structure_limits_just_inside_and_outside():
    from trtprof.util.datafile import MAX_DEPTH, MAX_SPEC_NODES, check_bounded
    from trtprof.errors import BadInput

    check_bounded([0] * (MAX_SPEC_NODES - 1), "x", max_nodes=MAX_SPEC_NODES)  # the list itself is one value
    with pytest.raises(BadInput, match="more than"):
        check_bounded([0] * MAX_SPEC_NODES, "x", max_nodes=MAX_SPEC_NODES)
    nested: list = []
    for _ in range(MAX_DEPTH):
        nested = [nested]
    check_bounded(nested, "x")  # depth MAX_DEPTH
    with pytest.raises(BadInput, match="nested deeper"):
        check_bounded([nested], "x")


def test_same_model_by_two_spellings_is_one_set_of_cells(conv_model, tmp_path, monkeypatch):
    from trtprof.sweep.spec import load_spec

    monkeypatch.chdir(conv_model.parent)
    spec = load_spec(_spec(tmp_path, f'[[models]]\npath = "{conv_model.name}"\n[[models]]\npath = "./{conv_model.name}"\n'
                           f'[[models]]\npath = "{conv_model}"\n'))
    cells = spec.cells()
    assert len(spec.models) == 1 and len({c.id for c in cells}) == len(cells) == 1


def _fake_sweep(tmp_path: Path, entry_id: str, result_file: str | None = None) -> Path:
    """A sweep.json (fake: written by hand) whose one ok entry points at a real bench result."""
    from trtprof.sweep.store import SCHEMA

    out = tmp_path / "sw"
    (out / "cells").mkdir(parents=True)
    (out / "cells" / "ok.json").write_text(json.dumps({"schema": "trtprof.results/1", "results": []}))
    entry = {"id": entry_id, "name": "m bench batch 1", "status": "ok",
             "result_file": result_file or f"cells/{entry_id}.json"}
    (out / "sweep.json").write_text(json.dumps({"schema": SCHEMA, "entries": [entry]}))
    return out / "sweep.json"


@pytest.mark.parametrize("entry_id", ["../../outside/x", "/tmp/abs", "..", ".hidden", "a/b"])
def test_report_never_writes_where_an_entry_id_points(entry_id, tmp_path, capsys):
    """Was: `report sweep.json` wrote a page wherever an entry's id pointed."""
    sweep = _fake_sweep(tmp_path, entry_id)
    before = sorted(str(p) for p in tmp_path.rglob("*"))
    code, _, err = _run(capsys, "report", str(sweep), "-o", str(tmp_path / "report" / "r.html"))
    one_line_error(code, err, "entries[0].id", "not a plain name")
    assert sorted(str(p) for p in tmp_path.rglob("*")) == before
    assert not Path("/tmp/abs.html").exists()


def test_report_refuses_a_result_file_outside_cells(tmp_path, capsys):
    sweep = _fake_sweep(tmp_path, "ok", result_file="../../etc/passwd")
    code, _, err = _run(capsys, "report", str(sweep), "-o", str(tmp_path / "r.html"))
    one_line_error(code, err, "entries[0].result_file", "cells/ok.json")


@pytest.mark.parametrize("entries", ['"x"', "[5]"])
def test_report_refuses_entries_of_the_wrong_shape(entries, tmp_path, capsys):
    from trtprof.sweep.store import SCHEMA

    sweep = tmp_path / "sweep.json"
    sweep.write_text(f'{{"schema": "{SCHEMA}", "entries": {entries}}}')
    code, _, err = _run(capsys, "report", str(sweep), "-o", str(tmp_path / "r.html"))
    one_line_error(code, err, "entries", "expected")
    assert not (tmp_path / "r.html").exists()


def test_results_file_nested_too_deeply_is_one_line(tmp_path, capsys):
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100000 + "]" * 100000)
    for argv in (["report", str(deep), "-o", str(tmp_path / "r.html")], ["plot", str(deep), "--out", str(tmp_path / "p")]):
        code, _, err = _run(capsys, *argv)
        one_line_error(code, err, str(deep), "nested")


@pytest.fixture
def results_file(engines, tmp_path) -> Path:
    out = tmp_path / "results.json"
    assert main(["bench", str(engines), *FAST, "--out", str(out)]) == 0
    return out


@pytest.mark.parametrize("where,value,needle", [
    ("samples_ms", [1.0, float("nan")], "results[0].samples_ms[1]"),
    ("samples_ms", [float("inf")], "results[0].samples_ms[0]"),
    ("samples_ms", [], "results[0].samples_ms: expected a non-empty list"),
    ("samples_ms", "x", "results[0].samples_ms: expected a non-empty list"),
    ("samples_ms", [True], "results[0].samples_ms[0]"),
])
def test_report_and_plot_accept_only_finite_samples(where, value, needle, results_file, tmp_path, capsys):
    """Was: tracebacks on NaN/inf samples and `samples_ms: []`. Now one line naming the bad entry."""
    data = json.loads(results_file.read_text())
    data["results"][0][where] = value
    results_file.write_text(json.dumps(data, allow_nan=True))
    for argv in (["report", str(results_file), "-o", str(tmp_path / "r.html")],
                 ["plot", str(results_file), "--out", str(tmp_path / "plots")]):
        code, _, err = _run(capsys, *argv)
        one_line_error(code, err, str(results_file), needle)
    assert not (tmp_path / "r.html").exists() and not (tmp_path / "plots").exists()


@pytest.mark.parametrize("results", ['"x"', "[5]"])
def test_results_of_the_wrong_shape_are_one_line(results, results_file, tmp_path, capsys):
    data = json.loads(results_file.read_text())
    results_file.write_text(json.dumps(data).replace(json.dumps(data["results"]), results))
    for argv in (["report", str(results_file), "-o", str(tmp_path / "r.html")],
                 ["plot", str(results_file), "--out", str(tmp_path / "plots")]):
        code, _, err = _run(capsys, *argv)
        one_line_error(code, err, str(results_file), "results")


@pytest.mark.parametrize("sizes", [[0, -3], [], [1.5], [True], "1"])
def test_metadata_with_impossible_batch_sizes_is_corrupt_not_a_crash(sizes, engines, tmp_path, capsys):
    (meta,) = engines.glob("*.fp32.*.json")
    data = json.loads(meta.read_text())
    data["spec"]["batch_sizes"] = sizes
    meta.write_text(json.dumps(data))
    code, _, err = _run(capsys, "bench", str(engines), *FAST, "--out", str(tmp_path / "r.json"))
    one_line_error(code, err, str(meta), "batch_sizes")
    assert not (tmp_path / "r.json").exists()


# --- resume over a torn line; signals; full disks; temp dirs --------------------------------------

def test_resume_repairs_a_torn_last_line_before_appending(tmp_path):
    """Was: after a torn last line, --resume wrote the next record onto it and that result was lost."""
    from trtprof.sweep.store import SweepStore

    out = tmp_path / "sw"
    store = SweepStore(out, resume=False)
    store.add({"id": "aaaaaaaaaaaa", "status": "ok"})
    with open(store.log, "a") as fh:
        fh.write('{"id": "bbbbbbbbbbbb", "sta')  # killed mid-write
    resumed = SweepStore(out, resume=True)
    resumed.add({"id": "cccccccccccc", "status": "ok"})
    assert [r["id"] for r in resumed.read_records()] == ["aaaaaaaaaaaa", "cccccccccccc"]
    assert store.log.read_text().endswith("}\n") and len(store.log.read_text().splitlines()) == 2


def test_records_whose_id_is_not_a_plain_name_are_never_used(tmp_path):
    from trtprof.sweep.store import SweepStore

    store = SweepStore(tmp_path / "sw", resume=False)
    store.log.write_text('{"id": "../../x", "status": "ok"}\n{"id": 5}\n{"id": "abcdef012345"}\n')
    assert [r["id"] for r in store.read_records()] == ["abcdef012345"]
    with pytest.raises(ValueError, match="not a plain name"):
        store.add({"id": "../escape", "status": "ok"})
    assert not (tmp_path / "escape.log").exists()


def test_build_under_a_file_size_limit_blames_the_disk_not_the_model(conv_model, tmp_path):
    """Real limit: `ulimit -f` 2 KiB (the 26 KB model's writes fail with EFBIG). Was: "onnxruntime
    cannot load the model: Protobuf serialization failed" naming the model."""
    import resource

    def small_files():
        resource.setrlimit(resource.RLIMIT_FSIZE, (2048, 2048))

    engines = tmp_path / "engines"
    proc = run_with_fault("", "build", str(conv_model), "--fp32", "--engines", str(engines),
                          "--backend", "onnxruntime", preexec_fn=small_files)
    _assert_clean_failure(proc, "cannot write", "File too large", "ulimit -f")
    assert "cannot load the model" not in proc.stderr and f"{conv_model}:" not in proc.stderr
    assert conv_model.exists() and not list(engines.glob("*.json"))


@pytest.mark.parametrize("fault", ["enospc", "efbig"])
def test_bench_on_a_full_disk_keeps_the_measurements(fault, engines, tmp_path):
    """Fault: writing the results JSON fails with ENOSPC / EFBIG. Exit 2, one line naming the file and
    the cause; the measurements are on stdout (the fallback summary); an older results file is kept."""
    out = tmp_path / "results.json"
    old = '{"schema": "trtprof.results/1", "old": true}'  # an earlier run's (a user's file is refused first)
    out.write_text(old)
    proc = run_with_fault(f"{fault}:{out}", "bench", str(engines), *FAST, "--out", str(out))
    cause = "No space left on device" if fault == "enospc" else "File too large"
    _assert_clean_failure(proc, str(out), "cannot write", cause, "measurements are in the table above")
    assert "fp32" in proc.stdout and "batch" in proc.stdout.lower()  # the table: the measurements themselves
    assert out.read_text() == old and not list(tmp_path.glob(".results.json.*"))


@pytest.mark.parametrize("command", ["report", "plot"])
def test_report_and_plot_on_a_full_disk_are_one_line(command, results_file, tmp_path):
    """Fault: ENOSPC on the report page; EFBIG on every file written into the plots folder."""
    report, plots = tmp_path / "r.html", tmp_path / "plots"
    if command == "report":
        argv, fault = ["report", str(results_file), "-o", str(report)], f"enospc:{report}"
    else:
        argv, fault = ["plot", str(results_file), "--out", str(plots)], f"efbig:{plots}/"
    proc = run_with_fault(fault, *argv)
    _assert_clean_failure(proc, "cannot write")
    assert not report.exists() and not list(plots.glob("*.png")) and results_file.exists()


def test_sigterm_of_a_build_says_interrupted_like_ctrl_c(conv_model, tmp_path):
    """Was: SIGTERM of a build exited 143 silently. Now exit 130 and the same line as Ctrl-C."""
    import signal
    import time

    env = dict(os.environ, PYTHONPATH=str(REPO))
    proc = subprocess.Popen([sys.executable, "-c", "import time, sys; from trtprof.cli import main; "
                             "import trtprof.cli.build as b; real = b.build_model_engines\n"
                             "def slow(*a, **k):\n print('started', flush=True); time.sleep(60)\n"
                             "b.build_model_engines = slow\nsys.exit(main(sys.argv[1:]))",
                             "build", str(conv_model), "--engines", str(tmp_path / "e"), "--backend", "onnxruntime"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    assert proc.stdout.readline().strip() == "started"  # the build is under way (a slow fake build)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130 and err.strip() == "trtprof: interrupted", err
    assert conv_model.exists()


def test_second_ctrl_c_while_writing_still_writes_the_results(engines, tmp_path):
    """Was: a second Ctrl-C 20-50 ms after the first lost the finished results. While the results are
    written, SIGINT is ignored (the write here is slowed by a fault hook, so the second signal surely
    lands inside it)."""
    out = tmp_path / "r.json"
    hook = ("import sys, os, signal, time; import trtprof.measure.results as r; real = r.ResultSet.write_json\n"
            "def slow(self, path):\n os.kill(os.getpid(), signal.SIGINT); time.sleep(0.5); real(self, path)\n"
            "r.ResultSet.write_json = slow\nfrom trtprof.cli import main; sys.exit(main(sys.argv[1:]))")
    proc = subprocess.run([sys.executable, "-c", hook, "bench", str(engines), *FAST, "--out", str(out)],
                          capture_output=True, text=True, timeout=300, env=dict(os.environ, PYTHONPATH=str(REPO)))
    assert proc.returncode == 0, proc.stderr
    assert json.loads(out.read_text())["results"]


def test_stale_temp_dirs_are_removed_by_the_next_run(tmp_path, capsys):
    """A killed run's `trtprof-ort-p<pid>-*`: removed once its owner is gone and it is a day old; a
    live owner's, a fresh one's and any other name are kept."""
    import time

    from trtprof.util.scratch import MARKER, STALE_AFTER_S, clean_stale, marker_text, process_start_id

    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True).stdout.strip()
    now = time.time()

    def make(name: str, age_s: float) -> Path:
        d = tmp_path / name
        (d / "sub").mkdir(parents=True)
        (d / "sub" / "executed.onnx").write_bytes(b"x" * 100)
        pid = name.split("-p")[-1].split("-")[0]
        if pid.isdigit():  # the marker temp_dir writes (issue 36: unmarked dirs are never removed)
            (d / MARKER).write_text(marker_text(int(pid), process_start_id(int(pid)) or "1"))
        os.utime(d, (now - age_s, now - age_s))
        return d

    stale = make(f"trtprof-ort-p{dead}-abc", STALE_AFTER_S + 60)
    cell = make(f"trtprof-cell-0123456789ab-p{dead}-xyz", STALE_AFTER_S + 60)
    just_inside = make(f"trtprof-ort-p{dead}-new", STALE_AFTER_S - 60)
    alive = make(f"trtprof-ort-p{os.getpid()}-mine", STALE_AFTER_S * 3)
    other = make("trtprof-user-notes", STALE_AFTER_S * 3)
    assert sorted(clean_stale(tmp_path, now=now)) == sorted([stale, cell])
    assert just_inside.exists() and alive.exists() and other.exists()
    # the CLI runs it on every start, on $TMPDIR
    again = make(f"trtprof-ort-p{dead}-def", STALE_AFTER_S + 60)
    proc = subprocess.run([sys.executable, "-m", "trtprof", "cache", "ls", str(tmp_path / "nothing")],
                          capture_output=True, text=True, env=dict(os.environ, TMPDIR=str(tmp_path), PYTHONPATH=str(REPO)))
    assert proc.returncode == 2 and not again.exists() and alive.exists()


# --- compare runs bench's memory preflight -------------------------------------------------------

def test_compare_refuses_a_huge_batch_before_allocating(conv_model, tmp_path, capsys):
    """Was: `compare --batch-sizes 1000000` grew to 23.8 GB and was OOM-killed. Now the same
    pre-check as bench: one line naming the batch and a smaller one to try, nothing written."""
    out = tmp_path / "c.json"
    code, _, err = _run(capsys, "compare", str(conv_model), "--batch-sizes", "2000000000", "--backend", "onnxruntime",
                        "--engines", str(tmp_path / "e"), "--out", str(out))
    line = one_line_error(code, err, "batch size 2000000000", "GiB", "try --batch-sizes")
    suggested = int(line.split("try --batch-sizes ")[1].split()[0])
    assert 1 <= suggested < 2000000000 and not out.exists()


def test_compare_allocation_failure_is_exit_2_naming_the_batch(conv_model, tmp_path):
    """Fault: ORT fails to allocate at batch 4096 (injected, as in the bench test): compare says which
    batch ran out instead of a traceback (was: a numpy traceback under `ulimit -v`)."""
    out = tmp_path / "c.json"
    proc = run_with_fault("ort_oom:4096", "compare", str(conv_model), "--batch-sizes", "4096", "--backend",
                          "onnxruntime", "--engines", str(tmp_path / "e"), "--out", str(out))
    _assert_clean_failure(proc, "out of memory at batch size 4096", "try --batch-sizes")
    assert not out.exists() and conv_model.exists()


def test_memory_preflight_just_inside_and_outside():
    from trtprof.errors import OutOfMemory
    from trtprof.system.preflight import check_memory

    check_memory(8, 1000, available=1000)  # exactly what is available: allowed
    with pytest.raises(OutOfMemory, match="batch size 8 needs"):
        check_memory(8, 1001, available=1000)


def test_compare_of_built_engines_refuses_a_huge_batch_before_allocating(conv_model, tmp_path, capsys):
    """The engines exist (no build step to catch it): compare's own pre-check after loading them."""
    engines = tmp_path / "e"
    assert main(["build", str(conv_model), "--fp32", "--fp16", "--engines", str(engines), "--backend", "onnxruntime"]) == 0
    capsys.readouterr()
    out = tmp_path / "c.json"
    code, _, err = _run(capsys, "compare", str(engines), "--batch-sizes", "2000000000", "--out", str(out))
    one_line_error(code, err, "batch size 2000000000 needs", "try --batch-sizes")
    assert not out.exists()


def test_compare_on_a_full_disk_keeps_the_printed_comparison(conv_model, tmp_path):
    """Fault: ENOSPC on the compare JSON. One line naming it; the verdict was printed before."""
    out = tmp_path / "c.json"
    proc = run_with_fault(f"enospc:{out}", "compare", str(conv_model), "--backend", "onnxruntime",
                          "--engines", str(tmp_path / "e"), "--time-budget-s", "1", "--out", str(out))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    errors = [line for line in proc.stderr.splitlines() if "error:" in line]  # compare's progress is on stderr too
    assert len(errors) == 1 and errors[0] == proc.stderr.strip().splitlines()[-1]
    for needle in (str(out), "No space left on device", "comparisons are printed above"):
        assert needle in errors[0], errors[0]
    assert "fp16 vs fp32" in proc.stdout + proc.stderr and not out.exists()


def test_prune_that_cannot_remove_is_one_line(engines, monkeypatch, capsys):
    """Fault: the unlink is refused (a read-only engines dir as a non-root user sees it; root ignores
    the mode, so the refusal is injected here). Was: a PermissionError traceback."""
    import trtprof.engines.cache_admin as admin

    def refused(path):
        raise PermissionError(13, "Permission denied", str(path))

    (meta,) = engines.glob("*.fp32.*.json")
    meta.write_text("[]")
    monkeypatch.setattr(admin, "unlink_quietly", refused)
    code, _, err = _run(capsys, "cache", "prune", str(engines), "--corrupt")
    one_line_error(code, err, str(engines), "cannot remove", "Permission denied")
    assert meta.exists()


@pytest.mark.parametrize("name,ours", [
    ("convnet.fp32.onnxruntime.0123456789ab.onnx", True),
    ("convnet.fp32.onnxruntime.0123456789ab.json", True),
    ("m.fp16.torch.0123456789ab.torch.onnx", True),  # the torch backend's two-part suffix
    ("m.fp16.tensorrt-rtx.0123456789ab.sm89.rtxcache", True),  # TensorRT-RTX's runtime cache beside it
    ("modèle_v2.fp32.onnxruntime.0123456789ab.onnx", True),  # safe_stem keeps non-ASCII letters
    ("results.json", False), ("mlp.onnx", False), ("timing.cache", False),
    ("convnet.fp32.onnxruntime.0123456789AB.onnx", False), ("../x.fp32.onnxruntime.0123456789ab.onnx", False),
])
def test_entry_names(name, ours):
    from trtprof.engines.cache import ENTRY_NAME

    assert bool(ENTRY_NAME.fullmatch(name)) is ours


def test_bench_of_an_engines_dir_ignores_a_results_file_left_inside(engines, tmp_path, capsys):
    """Was: a results.json in the engines dir (written there by an older trtprof) failed every later
    `bench DIR`. Only entry metadata is read as an engine."""
    (engines / "results.json").write_text('{"schema": "trtprof.results/1", "results": []}')
    assert main(["bench", str(engines), *FAST, "--out", str(tmp_path / "r.json")]) == 0
    assert (engines / "results.json").exists()


def test_build_on_a_full_disk_names_the_engines_dir_not_the_model(conv_model, tmp_path):
    """Fault: ENOSPC while the artifact is written into the engines dir. One line with the cause; no
    half entry or temp file is left; the model is untouched and not blamed."""
    argv = ["build", str(conv_model), "--fp32", "--backend", "onnxruntime"]
    probe = tmp_path / "probe"  # the same build elsewhere names the artifact (its key is the content's, not the dir's)
    assert main([*argv, "--engines", str(probe)]) == 0
    (artifact,) = [p.name for p in probe.glob("convnet.fp32.*") if p.suffix != ".json"]
    engines = tmp_path / "engines"
    proc = run_with_fault(f"enospc:{engines / artifact}", *argv, "--engines", str(engines))
    _assert_clean_failure(proc, str(engines), "cannot write", "No space left on device")
    assert f"{conv_model}:" not in proc.stderr and conv_model.exists()
    assert [p.name for p in engines.iterdir() if p.name != ".locks"] == []


def test_a_second_ctrl_c_while_sweep_json_is_written_keeps_it(tmp_path, monkeypatch):
    """The sweep store writes sweep.json itself (not the CLI): a SIGINT arriving in the middle of that
    write (here sent by the process to itself from inside the first write) is deferred, not raised, and
    both files are complete."""
    import signal

    from trtprof.sweep import store as store_mod

    real = store_mod.atomic_write_text
    sent = []

    def write_then_interrupt(path, text):
        if not sent:
            sent.append(path)
            os.kill(os.getpid(), signal.SIGINT)  # the second Ctrl-C, 20 ms after the first
        real(path, text)

    monkeypatch.setattr(store_mod, "atomic_write_text", write_then_interrupt)
    # Python's own handler, whatever this process inherited (a shell's background job starts with SIGINT ignored)
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        store = store_mod.SweepStore(tmp_path / "out", resume=False)
        path = store.write_merged({"schema": "trtprof.sweep/1", "entries": []})
        assert sent and json.loads(path.read_text())["entries"] == []
        assert (tmp_path / "out" / store_mod.CSV).exists()
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # the handler is back
    finally:
        signal.signal(signal.SIGINT, previous)
