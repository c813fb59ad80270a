"""`trtprof sweep`: spec parsing, worker slots, the merged result, and real sweeps on ONNX Runtime (CPU).

The end-to-end tests run real `trtprof build` + `trtprof compare` subprocesses with tiny time budgets;
nothing here asserts on timings. Ray tests start a local Ray (`ray.init(num_cpus=2)`) themselves.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from trtprof.cli import main
from trtprof.errors import BadInput
from trtprof.sweep.cell import Slot, error_line, summarize
from trtprof.sweep.local import local_slots, partition
from trtprof.sweep.spec import load_spec, make_spec
from trtprof.sweep.store import neighbours

ROOT = Path(__file__).resolve().parents[2]
FAST = ["--backend", "onnxruntime", "--time-budget-s", "0.3", "--round-iterations", "10"]
FAKE_GPUS = [{"index": 0, "name": "FakeGPU A", "uuid": "GPU-aaaa", "driver": "1.0"},
             {"index": 1, "name": "FakeGPU A", "uuid": "GPU-bbbb", "driver": "1.0"}]


@pytest.fixture
def two_models(tmp_path: Path) -> tuple[Path, Path]:
    from trtprof.model.demo import make_demo_model

    return (make_demo_model(tmp_path / "small.onnx", channels=4, image=8, classes=5),
            make_demo_model(tmp_path / "wide.onnx", channels=8, image=16, classes=10))


@pytest.fixture
def broken_model(tmp_path: Path) -> Path:
    """A readable ONNX model whose build fails (an op no runtime has): the sweep takes it, its cells fail.
    (A file that is not ONNX at all is refused before any cell: tests/cli/test_bad_model_files.py.)"""
    import onnx
    from onnx import TensorProto, helper

    x = helper.make_tensor_value_info("input", TensorProto.FLOAT, ["batch", 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 4])
    node = helper.make_node("NoSuchOp", ["input"], ["y"], domain="com.example.broken")
    model = helper.make_model(helper.make_graph([node], "g", [x], [y]), opset_imports=[
        helper.make_opsetid("", 17), helper.make_opsetid("com.example.broken", 1)])
    model.ir_version = 9
    path = tmp_path / "broken.onnx"
    onnx.save(model, str(path))
    return path


# --- spec and cells ---------------------------------------------------------------------------------


def test_toml_spec_with_per_model_overrides(tmp_path, two_models):
    spec_file = tmp_path / "specs" / "sweep.toml"
    spec_file.parent.mkdir()
    spec_file.write_text(
        '[sweep]\nkind = "compare"\nbackend = "onnxruntime"\nprecisions = ["fp32", "fp16"]\nbatch_sizes = [1, 8]\n'
        'time_budget_s = 2\nengines = "eng"\n\n'
        '[[models]]\npath = "../small.onnx"\n\n'
        '[[models]]\npath = "../wide.onnx"\nbatch_sizes = [4]\nshape = ["input:1x3x16x16"]\n')
    spec = load_spec(spec_file)
    small, wide = spec.models
    assert small.path == str(two_models[0].resolve()) and small.batch_sizes == (1, 8)
    assert wide.batch_sizes == (4,) and wide.shape == ("input:1x3x16x16",) and wide.time_budget_s == 2.0
    assert spec.engines == str((spec_file.parent / "eng").resolve())
    cells = spec.cells()
    # largest batch first (the long cells must not be the last ones on a worker)
    assert [(c.model.stem, c.batch_size) for c in cells] == [("small", 8), ("wide", 4), ("small", 1)]
    assert len({c.id for c in cells}) == 3 and [c.id for c in load_spec(spec_file).cells()] == [c.id for c in cells]
    argv = cells[1].run_argv("out.json")
    assert argv[:2] == ["compare", cells[1].engines_dir] and "--time-budget-s" in argv and "4" in argv
    build = cells[2].build_argv()  # the whole batch list: one engine per precision for every cell of the model
    assert build[build.index("--batch-sizes") + 1] == "1,8" and "--fp32" in build and "--fp16" in build
    # flags override the spec
    assert load_spec(spec_file, {"batch_sizes": "2"}).models[0].batch_sizes == (2,)


def test_spec_errors_are_bad_input(tmp_path, two_models):
    base = tmp_path
    with pytest.raises(BadInput, match="no models"):
        make_spec({}, base=base)
    with pytest.raises(BadInput, match="unknown key"):
        make_spec({"models": [{"path": str(two_models[0]), "batchsize": 3}]}, base=base)
    with pytest.raises(BadInput, match="model not found"):
        make_spec({"models": [{"path": "nope.onnx"}]}, base=base)
    with pytest.raises(BadInput, match="baseline and a candidate"):
        make_spec({"sweep": {"precisions": "fp16"}, "models": [{"path": str(two_models[0])}]}, base=base)
    with pytest.raises(BadInput, match="unknown precision"):
        make_spec({"sweep": {"precisions": "fp32,fp9"}, "models": [{"path": str(two_models[0])}]}, base=base)
    bad = tmp_path / "bad.toml"
    bad.write_text("[sweep\n")
    with pytest.raises(BadInput, match="not valid TOML"):
        load_spec(bad)


def test_cli_bad_input_is_one_line_exit_2(tmp_path, two_models, capsys):
    assert main(["sweep", "--out", str(tmp_path / "o")]) == 2
    assert main(["sweep", "--models", str(two_models[0]), "--resume", "--out", str(tmp_path / "none")]) == 2
    assert main(["sweep", "--models", str(two_models[0]), "--gpus", "none", "--workers", "99",
                 "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 3 and all(line.startswith("trtprof sweep: error:") for line in err)
    assert "no models" in err[0] and "--resume" in err[1] and "--workers 99" in err[2]
    assert not (tmp_path / "o" / "cells.jsonl").exists()


@pytest.mark.parametrize("args", [["--cell-timeout-s", "0"], ["--ray-cpus-per-cell", "0"], ["--workers", "-1"]])
def test_cli_non_positive_counts_and_timeouts_are_refused_at_parse_time(tmp_path, two_models, capsys, args):
    assert main(["sweep", "--models", str(two_models[0]), *args, "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("trtprof sweep: error:") and args[0] in err and "\n" not in err
    assert not (tmp_path / "o").exists()


# --- slots: one worker per GPU, cores partitioned -----------------------------------------------------


def test_partition_is_disjoint_and_covers_all_cores():
    parts = partition(list(range(10)), 3)
    assert parts == [(0, 1, 2, 3), (4, 5, 6), (7, 8, 9)]
    with pytest.raises(ValueError):
        partition([0, 1], 3)


def test_local_slots_one_worker_per_gpu_with_its_uuid():
    slots = local_slots("all", None, gpus=FAKE_GPUS, cores=range(32))
    assert [s.name for s in slots] == ["gpu0", "gpu1"]
    assert slots[0].cpus == tuple(range(16)) and slots[1].cpus == tuple(range(16, 32))
    env = slots[1].env({"PATH": "/bin"})
    assert env["CUDA_VISIBLE_DEVICES"] == "GPU-bbbb" and env["OMP_NUM_THREADS"] == "16"
    assert env["PYTHONPATH"].split(os.pathsep)[0] == str(ROOT)
    assert [s.name for s in local_slots("1", None, gpus=FAKE_GPUS, cores=range(8))] == ["gpu1"]
    with pytest.raises(BadInput, match="no GPU 5"):
        local_slots("5", None, gpus=FAKE_GPUS, cores=range(8))
    with pytest.raises(BadInput, match="one worker per GPU"):
        local_slots("all", 3, gpus=FAKE_GPUS, cores=range(8))


def test_local_slots_on_cpu_default_to_one_worker():
    (only,) = local_slots(None, None, gpus=[], cores=range(4))
    assert only.cpus == (0, 1, 2, 3) and only.gpu is None
    two = local_slots("none", 2, gpus=FAKE_GPUS, cores=range(4))
    assert [s.cpus for s in two] == [(0, 1), (2, 3)]
    assert two[0].env({})["CUDA_VISIBLE_DEVICES"] == ""  # CPU workers on a GPU host keep off the GPUs


# --- reading results back -----------------------------------------------------------------------------


def test_summarize_reads_both_compare_schemas():
    v1 = {"schema": "trtprof.compare/1", "comparisons": [{
        "batch_size": 4, "baseline": "fp32", "candidate": "fp16", "verdict": "no measurable difference",
        "speedup": {"estimate": 1.01, "ci_low": 0.98, "ci_high": 1.04, "confidence": 0.95},
        "latency": {"baseline": {"median_ms": 2.0}, "candidate": {"median_ms": 1.98, "effective_precision": "fp16"}}}]}
    v2 = {"schema": "trtprof.compare/2", "comparisons": [{
        "batch_size": 4, "baseline": "fp32", "candidate": "fp16", "verdict": "equivalent",
        "speedup": {"estimate": 1.5, "ci_low": 1.4, "ci_high": 1.6}, "something_new": {"x": 1}}]}
    (a,), (b,) = summarize("compare", v1), summarize("compare", v2)
    assert (a["speedup"], a["verdict"], a["baseline_median_ms"]) == (1.01, "no measurable difference", 2.0)
    assert (b["speedup"], b["ci_low"], b["verdict"], b["baseline_median_ms"]) == (1.5, 1.4, "equivalent", None)
    assert summarize("compare", {}) == []


def test_error_line_prefers_the_cli_error():
    text = "building…\ntrtprof build: error: /x.onnx: not a model\n"
    assert error_line(text, 2) == "trtprof build: error: /x.onnx: not a model"
    assert error_line("Traceback …\nSegfault", -11).startswith("killed by signal 11")


def test_neighbours_are_overlapping_cells_on_the_same_host():
    def rec(cid, host, start, end):
        return {"id": cid, "name": cid, "host": {"hostname": host}, "started_epoch": start, "finished_epoch": end,
                "slot": {"name": "s"}, "gpu": None}

    recs = [rec("a", "h1", 0, 10), rec("b", "h1", 5, 12), rec("c", "h1", 12, 20), rec("d", "h2", 0, 20)]
    beside = neighbours(recs)
    assert [n["id"] for n in beside["a"]] == ["b"] and beside["a"][0]["overlap_s"] == 5
    assert [n["id"] for n in beside["b"]] == ["a"]  # c starts when b ends: no overlap
    assert beside["c"] == [] and beside["d"] == []  # another host is not a neighbour


def test_interference_warnings_use_the_measured_figures(tmp_path):
    from trtprof.sweep.runner import read_interference
    from trtprof.sweep.store import interference_warnings

    crowded = [{"id": "a", "gpu": None, "beside": [{"id": "b"}]}, {"id": "b", "gpu": None, "beside": [{"id": "a"}]},
               {"id": "c", "gpu": {"uuid": "GPU-1"}, "beside": [{"id": "d"}]}]
    (unmeasured,) = interference_warnings(crowded, None)
    assert "3 cell(s) ran beside" in unmeasured and "sweep_interference" in unmeasured
    figures = {"cpu": {"above_noise": True, "worst_slowdown": 0.05, "noise_floor": 0.012, "device": "Xeon"},
               "gpu": {"above_noise": False, "worst_slowdown": 0.004, "noise_floor": 0.01, "device": "H200"}}
    (cpu,) = interference_warnings(crowded, figures)  # GPU figures within the noise: no GPU warning
    assert cpu.startswith("2 CPU cell(s)") and "+5.0%" in cpu and "±1.2%" in cpu and "Xeon" in cpu
    assert interference_warnings([{"id": "x", "beside": []}], figures) == []
    path = tmp_path / "figures.json"
    path.write_text(json.dumps(figures))
    assert read_interference(path) == figures
    path.write_text("{}")
    with pytest.raises(BadInput, match="not a sweep_interference result"):
        read_interference(path)


# --- real sweeps (ONNX Runtime, CPU) ------------------------------------------------------------------


def test_local_sweep_two_workers_two_models_and_a_failing_cell(tmp_path, two_models, broken_model, capsys):
    out = tmp_path / "sweep"
    models = ",".join(str(p) for p in (*two_models, broken_model))
    rc = main(["sweep", "--models", models, "--batch-sizes", "1,4", "--gpus", "none", "--workers", "2",
               "--engines", str(tmp_path / "engines"), "--out", str(out), *FAST])
    printed = capsys.readouterr().out
    assert rc == 1  # the sweep ran; some cells failed
    assert "workers: cpu0" in printed and "cpu1" in printed
    merged = json.loads((out / "sweep.json").read_text())
    assert merged["schema"] == "trtprof.sweep/1"
    assert (merged["cells_total"], merged["cells_ok"], merged["cells_failed"]) == (6, 4, 2)
    slots_used = {e["slot"]["name"] for e in merged["entries"] if e["status"] == "ok"}
    assert slots_used <= {"cpu0", "cpu1"}
    for e in merged["entries"]:
        if e["model"] == "broken":
            assert e["status"] == "failed" and "broken.onnx" in e["error"] and e["error"].startswith("build:")
            assert len(e["attempts"]) == 1  # bad input (exit 2) is not retried
            continue
        assert e["status"] == "ok" and e["host"]["hostname"] and e["packages"]["onnxruntime"]
        (row,) = e["summary"]
        assert row["baseline"] == "fp32" and row["candidate"] == "fp16" and row["batch_size"] == e["batch_size"]
        assert row["ci_low"] <= row["speedup"] <= row["ci_high"] and row["verdict"]
        cell = json.loads((out / e["result_file"]).read_text())
        assert [c["batch_size"] for c in cell["comparisons"]] == [e["batch_size"]]
        assert e["slot"]["cpus"] and len(e["slot"]["cpus"]) == 1  # 2 workers on 2 cores: one core each
    # the failed build left no empty engines dir behind (issue 34); the others keep theirs
    assert not list((tmp_path / "engines").glob("broken-*"))
    # engines built once per model × precision, shared by both batch-size cells
    for stem in ("small", "wide"):
        (folder,) = (tmp_path / "engines").glob(f"{stem}-onnxruntime-*")
        assert sorted(p.name.split(".")[1] for p in folder.glob("*.json")) == ["fp16", "fp32"]
    csv_lines = (out / "sweep.csv").read_text().splitlines()
    assert csv_lines[0].startswith("model,kind,batch_size,device_type") and len(csv_lines) == 1 + 6
    assert "| small | 1 |" in printed and "**FAILED** broken compare batch 1" in printed

    html = tmp_path / "report" / "sweep.html"
    assert main(["report", str(out / "sweep.json"), "-o", str(html)]) == 0
    page = html.read_text()
    assert "Verdict matrix" in page and "fp16 vs fp32" in page and "failed" in page
    pages = sorted((tmp_path / "report" / "sweep_cells").glob("*.html"))
    assert len(pages) == 4 and all(f'href="sweep_cells/{p.name}"' in page for p in pages)
    assert "| small | 4 |" in capsys.readouterr().out


def test_bench_cells_yaml_spec_and_a_cell_timeout(tmp_path, two_models, capsys):
    pytest.importorskip("yaml")
    spec = tmp_path / "sweep.yaml"
    spec.write_text(f"sweep:\n  kind: bench\n  backend: onnxruntime\n  iterations: 20\n  batch_sizes: [3]\n"
                    f"models:\n  - path: {two_models[0].name}\n")
    out = tmp_path / "bench"
    assert main(["sweep", str(spec), "--gpus", "none", "--out", str(out), "--engines", str(tmp_path / "e")]) == 0
    printed = capsys.readouterr().out
    (entry,) = json.loads((out / "sweep.json").read_text())["entries"]
    assert entry["kind"] == "bench" and entry["status"] == "ok"
    assert sorted(r["precision"] for r in entry["summary"]) == ["fp16", "fp32"]
    assert all(r["batch_size"] == 3 and r["n"] == 20 and r["median_ms"] > 0 for r in entry["summary"])
    assert "| small | " in printed and " fp32 | " in printed  # the bench table of the Markdown summary

    # a step that outlives --cell-timeout-s is killed and recorded, not retried
    out2 = tmp_path / "slow"
    assert main(["sweep", "--models", str(two_models[0]), "--gpus", "none", "--cell-timeout-s", "0.05",
                 "--out", str(out2), "--engines", str(tmp_path / "e2"), *FAST]) == 1
    (entry,) = json.loads((out2 / "sweep.json").read_text())["entries"]
    assert entry["status"] == "failed" and "killed after the cell timeout of 0.05 s" in entry["error"]
    assert len(entry["attempts"]) == 1 and entry["attempts"][0]["exit_code"] == 124
    capsys.readouterr()


def test_gpu_types_need_the_ray_executor(tmp_path, two_models, capsys):
    assert main(["sweep", "--models", str(two_models[0]), "--gpu-types", "H200", "--out", str(tmp_path / "o")]) == 2
    assert "--executor ray" in capsys.readouterr().err


def _sweep_cmd(models: str, out: Path, engines: Path, budget: str) -> list[str]:
    return [sys.executable, "-m", "trtprof", "sweep", "--models", models, "--batch-sizes", "1,2",
            "--gpus", "none", "--workers", "1", "--engines", str(engines), "--out", str(out),
            "--backend", "onnxruntime", "--time-budget-s", budget, "--round-iterations", "10"]


def _lines(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []


def _cell_process(tmp_path: Path, stage: bytes) -> int | None:
    """The pid of a running cell process (``trtprof.cli.sweep_worker … STAGE …``) of this test, if any."""
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                argv = (entry / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if b"trtprof.cli.sweep_worker" in argv and stage in argv and any(str(tmp_path).encode() in a for a in argv):
                return int(entry.name)
    return None


def _ended(pid: int) -> bool:
    """Gone, or a zombie nobody reaped yet (an orphan's new parent may be slow to reap)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] in ("Z", "X")


def _wait_for(predicate, timeout_s: float = 120.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting")
        time.sleep(0.05)


def test_sigint_keeps_finished_cells_and_resume_skips_them(tmp_path, two_models):
    out, engines = tmp_path / "sweep", tmp_path / "engines"
    models = ",".join(str(p) for p in two_models)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(_sweep_cmd(models, out, engines, "1"), env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        _wait_for(lambda: len(_lines(out / "cells.jsonl")) >= 1 or proc.poll() is not None)
        proc.send_signal(signal.SIGINT)  # what Ctrl-C sends
        stdout, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, stderr
    assert "interrupted" in stderr and "--resume" in stderr
    kept = _lines(out / "cells.jsonl")
    assert 1 <= len(kept) < 4 and all(r["status"] == "ok" for r in kept)
    merged = json.loads((out / "sweep.json").read_text())
    assert merged["interrupted"] is True and merged["cells_missing"] == 4 - len(kept)
    assert _cell_process(tmp_path, b"compare") is None  # the interrupted cell's process was stopped …
    time.sleep(0.5)
    assert len(_lines(out / "cells.jsonl")) == len(kept)  # … and recorded nothing

    done = subprocess.run(_sweep_cmd(models, out, engines, "1") + ["--resume"], env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert f"resumed: {len(kept)} cell(s) already done were skipped" in done.stdout
    lines = _lines(out / "cells.jsonl")
    assert len(lines) == 4 and len({r["id"] for r in lines}) == 4  # no finished cell ran twice
    merged = json.loads((out / "sweep.json").read_text())
    assert (merged["cells_ok"], merged["cells_missing"], merged["interrupted"]) == (4, 0, False)


def test_a_killed_cell_process_is_retried_once(tmp_path, two_models):
    """Worker death: SIGKILL the cell's compare process mid-measurement; the sweep retries the cell."""
    out = tmp_path / "sweep"
    cmd = _sweep_cmd(str(two_models[0]), out, tmp_path / "engines", "2")
    cmd[cmd.index("1,2")] = "1"
    proc = subprocess.Popen(cmd, env={**os.environ, "PYTHONPATH": str(ROOT)}, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)

    def compare_pid() -> int | None:
        return _cell_process(tmp_path, b"compare")

    try:
        _wait_for(lambda: compare_pid() is not None or proc.poll() is not None)
        pid = compare_pid()
        assert pid is not None, "the compare process finished before it could be killed"
        time.sleep(0.5)
        os.kill(pid, signal.SIGKILL)
        stdout, stderr = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, stderr
    (rec,) = _lines(out / "cells.jsonl")
    assert rec["status"] == "ok" and len(rec["attempts"]) == 2
    assert rec["attempts"][0]["exit_code"] == -signal.SIGKILL and "killed by signal 9" in rec["attempts"][0]["error"]


# --- Ray (a local Ray started here) ------------------------------------------------------------------


@pytest.fixture
def local_ray():
    ray = pytest.importorskip("ray")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        yield ray
    finally:
        ray.shutdown()


def test_ray_executor_streams_cells_and_records_failures(tmp_path, two_models, broken_model, local_ray, capsys):
    out = tmp_path / "sweep"
    models = ",".join(str(p) for p in (*two_models, broken_model))
    rc = main(["sweep", "--models", models, "--batch-sizes", "2", "--executor", "ray",
               "--engines", str(tmp_path / "engines"), "--out", str(out), *FAST])
    printed = capsys.readouterr().out
    assert rc == 1
    merged = json.loads((out / "sweep.json").read_text())
    assert merged["executor"]["name"] == "ray" and merged["executor"]["use_gpu"] is False
    assert merged["executor"]["cluster_resources"]["CPU"] == 2
    by_model = {e["model"]: e for e in merged["entries"]}
    assert by_model["broken"]["status"] == "failed" and "broken.onnx" in by_model["broken"]["error"]
    for stem in ("small", "wide"):
        e = by_model[stem]
        assert e["status"] == "ok" and e["slot"]["name"].startswith("ray:") and e["ray"]["node_id"]
        assert e["summary"][0]["speedup"] > 0 and (out / e["result_file"]).is_file()
    assert printed.count("[") >= 3 and "| small | 2 |" in printed

    # a GPU type no node advertises fails at once instead of pending forever
    rc = main(["sweep", "--models", str(two_models[0]), "--executor", "ray", "--gpu-types", "H200",
               "--out", str(tmp_path / "typed"), "--engines", str(tmp_path / "engines"), *FAST])
    assert rc == 1
    (entry,) = json.loads((tmp_path / "typed" / "sweep.json").read_text())["entries"]
    assert entry["status"] == "failed" and "accelerator_type:H200" in entry["error"]
    assert entry["gpu_type_wanted"] == "H200"
    capsys.readouterr()


def test_ray_gpu_tasks_and_gpu_types_on_declared_resources(tmp_path, two_models, capsys):
    """The GPU path of the Ray executor on a CPU machine: Ray is told it has 2 GPUs and 2 nodes' worth
    of a custom GPU type (no real GPU: the cells still run on onnxruntime's CPU provider)."""
    ray = pytest.importorskip("ray")
    ray.init(num_cpus=2, num_gpus=2, resources={"accelerator_type:FakeGPU": 2}, include_dashboard=False,
             log_to_driver=False)
    try:
        out = tmp_path / "sweep"
        rc = main(["sweep", "--models", str(two_models[0]), "--batch-sizes", "1,2", "--executor", "ray",
                   "--gpu-types", "FakeGPU", "--engines", str(tmp_path / "engines"), "--out", str(out), *FAST])
    finally:
        ray.shutdown()
    assert rc == 0
    merged = json.loads((out / "sweep.json").read_text())
    assert merged["executor"]["use_gpu"] is True
    for e in merged["entries"]:
        assert e["status"] == "ok" and e["gpu_type_wanted"] == "FakeGPU"
        (gpu_id,) = e["ray"]["gpu_ids"]
        assert gpu_id in ("0", "1") and e["gpu"]["index"] == int(gpu_id)  # the GPU Ray gave the task is recorded
    assert "FakeGPU: fp16 vs fp32" in capsys.readouterr().out  # the matrix column is the GPU type


def test_ray_task_whose_worker_dies_is_retried(tmp_path, two_models, local_ray, capsys):
    """A lost task: SIGKILL the Ray worker process running the cell; Ray runs the task again."""
    import threading

    out = tmp_path / "sweep"
    result: list[int] = []
    argv = ["sweep", "--models", str(two_models[0]), "--batch-sizes", "1", "--executor", "ray",
            "--engines", str(tmp_path / "engines"), "--out", str(out), "--backend", "onnxruntime",
            "--time-budget-s", "2", "--round-iterations", "10"]
    thread = threading.Thread(target=lambda: result.append(main(argv)), daemon=True)
    thread.start()
    _wait_for(lambda: _cell_process(tmp_path, b"compare") is not None or not thread.is_alive())
    child = _cell_process(tmp_path, b"compare")
    assert child is not None, "the cell finished before it could be killed"
    status = Path(f"/proc/{child}/status").read_text()
    ray_worker = int(next(line.split()[1] for line in status.splitlines() if line.startswith("PPid:")))
    os.kill(ray_worker, signal.SIGKILL)
    thread.join(timeout=240)
    assert result == [0]
    (rec,) = _lines(out / "cells.jsonl")
    assert rec["status"] == "ok" and rec["ray"]["worker_pid"] != ray_worker
    _wait_for(lambda: _ended(child), timeout_s=10)  # the orphaned cell process ended too
    capsys.readouterr()


def test_slot_without_pinning_leaves_threads_alone():
    env = Slot(name="ray").env({"OMP_NUM_THREADS": "3"})
    assert env["OMP_NUM_THREADS"] == "3" and "CUDA_VISIBLE_DEVICES" not in env


def test_dirs_made_for_a_build_are_removed_only_when_still_empty(tmp_path):
    """``dirs_kept_only_if_used``: the dirs it made and that stayed empty go (innermost first); a dir that
    existed before, or that got a file, stays — nothing trtprof did not write is removed (issue 34)."""
    from trtprof.util.files import dirs_kept_only_if_used

    (tmp_path / "root").mkdir()
    with dirs_kept_only_if_used(tmp_path / "root" / "engines" / "m-auto-1234") as made:
        assert made.is_dir()
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["root"]  # both made dirs gone, the old one kept
    with dirs_kept_only_if_used(tmp_path / "root" / "engines" / "m-auto-1234") as made:
        (made / "net.fp32.onnxruntime.0123456789ab.json").write_text("{}")
    assert (tmp_path / "root" / "engines" / "m-auto-1234" / "net.fp32.onnxruntime.0123456789ab.json").is_file()
    with pytest.raises(RuntimeError), dirs_kept_only_if_used(tmp_path / "root" / "other"):
        raise RuntimeError("the build failed")
    assert not (tmp_path / "root" / "other").exists()  # a failure cleans up too


def test_a_failed_builds_lock_files_go_with_its_dir_unless_held(tmp_path):
    """A build that failed leaves ``.locks/<key>.lock`` in the dir made for it: removed with the dir; a
    lock another process holds is kept, and so is the dir."""
    from trtprof.engines.cache_admin import remove_unheld_locks
    from trtprof.util.files import dirs_kept_only_if_used, file_lock

    name = "ab" * 32 + ".lock"
    with dirs_kept_only_if_used(tmp_path / "e" / "m-auto-1", remove_unheld_locks) as made:
        (made / ".locks").mkdir()
        (made / ".locks" / name).write_text("")
    assert not (tmp_path / "e").exists()
    with dirs_kept_only_if_used(tmp_path / "e" / "m-auto-2", remove_unheld_locks) as made:
        (made / ".locks").mkdir()
        held = file_lock(made / ".locks" / name, 0)
        held.acquire()
    try:
        assert (tmp_path / "e" / "m-auto-2" / ".locks" / name).exists()  # held by someone: kept, dir too
    finally:
        held.release()
