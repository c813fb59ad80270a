"""``bench --find-max-batch`` (issue 24): the largest batch whose inference fits, per engine.

On the CPU the answer is against a memory budget, and the test model makes it computable: its input
is SAMPLE_BYTES per sample and the graph reduces it to one number, so a batch needs the input plus a
fixed overhead (the session, its thread pool) and nothing else of size. GPU tests (torch, TensorRT)
are marked ``gpu`` and run on the device machine."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from trtprof.system import cuda
from trtprof.builder.pipeline import BuildSettings, build_engines
from trtprof.cli import main
from trtprof.measure.maxbatch import SearchSettings, find_max_batch, fit_line, search
from trtprof.spec import Precision

MIB = 1 << 20
FLOATS = 1 << 23  # floats per sample: 32 MiB of float32 input, the only per-sample memory of the model
SAMPLE_BYTES = 4 * FLOATS
OVERHEAD_BOUND = 32 * MIB  # what the test assumes the fixed overhead stays under (checked in the first test)


def _reduce_model(path: Path, floats: int = FLOATS) -> Path:
    import onnx
    from onnx import TensorProto, helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", floats])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 1])
    axes = helper.make_tensor("axes", TensorProto.INT64, [1], [1])
    graph = helper.make_graph([helper.make_node("ReduceSum", ["x", "axes"], ["y"], keepdims=1)], "reduce", [x], [y],
                              initializer=[axes])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


@pytest.fixture(scope="module")
def reduce_engine(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("maxbatch")
    outcome = build_engines(_reduce_model(tmp / "reduce.onnx"), [Precision.FP32], (1,),
                            settings=BuildSettings(engines_dir=tmp / "engines", backend="onnxruntime"))
    return outcome[0].record


def _budget(budget_bytes: int, limit: int = 4096) -> SearchSettings:
    return SearchSettings(max_batch_limit=limit, budget_bytes=budget_bytes, budget_source="test budget", threads=1)


def test_a_budget_just_above_batch_4s_need_fits_4_and_not_5(reduce_engine):
    # batch b needs overhead + b × 32 MiB; overhead < 32 MiB, so 4 × 32 MiB + 32 MiB holds batch 4, not 5
    [found] = search([reduce_engine], _budget(4 * SAMPLE_BYTES + OVERHEAD_BOUND))
    peaks = {p["batch_size"]: p.get("peak_bytes") for p in found["probes"]}
    assert 0 < peaks[1] - SAMPLE_BYTES < OVERHEAD_BOUND  # the assumption the limits below rest on
    assert abs((peaks[4] - peaks[1]) - 3 * SAMPLE_BYTES) < 2 * MIB  # the measurement sees the input, nothing else
    assert (found["largest_fit"], found["smallest_fail"]) == (4, 5)
    assert [p["batch_size"] for p in found["probes"]] == [1, 2, 4, 8, 6, 5]  # doubling, then bisection
    assert found["stopped_by"] == "memory_budget" and found["at_largest_fit"]["peak_bytes"] == peaks[4]
    assert not found["at_smallest_fail"]["fits"]
    line = fit_line(found)
    assert "largest batch within the 160 MiB memory budget: 4" in line and "a budget, not an allocation failure" in line
    assert "searched to within" not in line  # 4 fits and 5 does not: the answer is exact


def test_a_budget_just_below_batch_4s_input_fits_3(reduce_engine):
    [found] = search([reduce_engine], _budget(4 * SAMPLE_BYTES - MIB))
    assert (found["largest_fit"], found["smallest_fail"]) == (3, 4)
    over = found["at_smallest_fail"]
    # the watchdog stopped batch 4 once it passed the budget, or the peak read after it is over it
    assert over.get("over_budget_bytes", over.get("peak_bytes", 0)) > 4 * SAMPLE_BYTES - MIB


def test_max_batch_limit_stops_the_search_and_says_so(reduce_engine):
    [found] = search([reduce_engine], _budget(64 * SAMPLE_BYTES, limit=3))
    assert (found["largest_fit"], found["smallest_fail"], found["stopped_by"]) == (3, None, "max_batch_limit")
    assert [p["batch_size"] for p in found["probes"]] == [1, 2, 3]
    assert "≥ 3" in fit_line(found) and "--max-batch-limit 3" in fit_line(found)


def test_bench_cli_prints_writes_and_reports_the_answer(reduce_engine, tmp_path, capsys):
    from trtprof.report.compare_page import write_report

    out = tmp_path / "r.json"
    limit_mb = (2 * SAMPLE_BYTES + OVERHEAD_BOUND) // MIB
    assert main(["bench", str(reduce_engine.meta_path), "--iterations", "3", "--warmup", "1", "--threads", "1",
                 "--find-max-batch", "--memory-limit-mb", str(limit_mb), "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert f"max batch: fp32 (onnxruntime, reduce): largest batch within the {limit_mb} MiB memory budget: 2" in text
    [entry] = json.loads(out.read_text())["max_batch"]
    assert entry["largest_fit"] == 2 and entry["budget_source"] == f"--memory-limit-mb {limit_mb}"
    page, _ = write_report(out, tmp_path / "r.html")
    body = page.read_text()
    assert "<h3>Largest batch that fits</h3>" in body and "memory budget: 2" in body


@pytest.mark.parametrize("argv, says", [
    (["--find-max-batch", "--memory-limit-mb", "0"], "--memory-limit-mb 0: must be a number > 0"),
    (["--find-max-batch", "--memory-limit-mb", "-5"], "--memory-limit-mb -5: must be a number > 0"),
    (["--find-max-batch", "--memory-limit-mb", "nan"], "must be a number > 0"),
    (["--memory-limit-mb", "100"], "--memory-limit-mb applies to --find-max-batch"),
    (["--max-batch-limit", "8"], "--max-batch-limit applies to --find-max-batch"),  # no longer silently ignored
    # batch 1 needs the 32 MiB input alone: a 20 MiB budget holds nothing
    (["--find-max-batch", "--memory-limit-mb", "20"], "batch 1 of reduce fp32 (onnxruntime) needs"),
])
def test_bad_limits_exit_2_with_one_line_and_no_results_file(reduce_engine, tmp_path, capsys, argv, says):
    out = tmp_path / "r.json"
    assert main(["bench", str(reduce_engine.meta_path), "--iterations", "3", "--out", str(out), *argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and says in err[0]  # the progress line is on stdout: a user error is ONE stderr line
    assert not out.exists()


def _scaled_model(path: Path, batch: object = "N") -> Path:
    """x:[batch,3,8,8] times an auxiliary input scale:[1]: with batch "N", one dynamic first dim next to a fixed one."""
    import onnx
    from onnx import TensorProto, helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, 3, 8, 8])
    scale = helper.make_tensor_value_info("scale", TensorProto.FLOAT, [1])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, 3, 8, 8])
    graph = helper.make_graph([helper.make_node("Mul", ["x", "scale"], ["y"])], "scaled", [x, scale], [y])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def test_static_batch_only_when_every_inputs_first_dim_is_fixed_and_they_agree():
    from trtprof.measure.maxbatch import static_batch
    from trtprof.spec import TensorSpec

    x_dyn, x_2, scale_1 = (TensorSpec("x", "float32", ("N", 3, 8, 8)), TensorSpec("x", "float32", (2, 3, 8, 8)),
                           TensorSpec("scale", "float32", (1,)))
    assert static_batch((x_dyn, scale_1)) is None  # was 1: "static batch 1: nothing to search"
    assert static_batch((x_2, TensorSpec("scale", "float32", (2,)))) == 2
    assert static_batch((x_2, scale_1)) is None  # they disagree
    assert static_batch((x_2, TensorSpec("s", "float32", ()))) == 2  # a scalar has no batch dim
    assert static_batch((TensorSpec("s", "float32", ()),)) is None


def test_a_dynamic_input_next_to_a_fixed_one_is_searched_not_called_static(tmp_path, capsys):
    outcome = build_engines(_scaled_model(tmp_path / "scaled.onnx"), [Precision.FP32], (1,),
                            settings=BuildSettings(engines_dir=tmp_path / "engines", backend="onnxruntime"))
    meta = str(outcome[0].record.meta_path)
    assert main(["bench", meta, "--iterations", "3", "--warmup", "1", "--find-max-batch",
                 "--memory-limit-mb", "64"]) == 2
    captured = capsys.readouterr()
    # batch 1 ran; batch 2 cannot (scale fixes its first dim to 1): said, not "static batch 1"
    assert "static batch" not in captured.out and "searching the largest batch" in captured.out
    [line] = captured.err.strip().splitlines()
    assert "input 'scale' has a static batch of 1; batch size 2 cannot run" in line
    static = build_engines(_scaled_model(tmp_path / "static.onnx", batch=1), [Precision.FP32], (1,),
                           settings=BuildSettings(engines_dir=tmp_path / "static_engines", backend="onnxruntime"))
    [found] = search([static[0].record], _budget(64 * MIB))
    assert found["static_batch"] == 1 and "nothing to search" in fit_line(found)  # every first dim fixed to 1


def test_the_search_is_shared_with_train_compare():
    from trtprof.train import pytorch

    assert pytorch.find_max_batch is find_max_batch


class FakeOutOfMemoryError(RuntimeError):
    """Named as torch's is (``torch.cuda.OutOfMemoryError``): the type name is what is matched."""


FakeOutOfMemoryError.__name__ = "OutOfMemoryError"


class FakeDeviceRunner:
    """A FAKE GPU runner (no device here): batches above ``capacity`` raise an out-of-memory error,
    and every probe is followed by one ``trim`` (the allocator's cache emptied between tries)."""

    device = "cuda"

    def __init__(self, capacity: int, error: type[Exception] = FakeOutOfMemoryError) -> None:
        from trtprof.spec import TensorSpec

        self.inputs = (TensorSpec("x", "float32", ("N", 4)),)
        self.capacity, self.error, self.calls, self.trims, self.closed = capacity, error, [], 0, False

    def infer(self, feeds):
        batch = feeds["x"].shape[0]
        self.calls.append(batch)
        if batch > self.capacity:
            raise self.error(f"CUDA out of memory. Tried to allocate {batch} GiB" if self.error is FakeOutOfMemoryError
                             else "shape mismatch")
        return {"y": feeds["x"][:, :1]}

    def reset_memory_peak(self) -> None:
        self.peak = 0

    def memory_report(self):
        return {"kind": "torch_allocator", "allocated_peak_bytes": 1000 * self.calls[-1], "in_use_bytes": 1000 * self.calls[-1]}

    def trim(self) -> None:
        self.trims += 1

    def close(self) -> None:
        self.closed = True


def _fake_device_search(monkeypatch, runner, limit=4096):
    from types import SimpleNamespace

    from trtprof.measure import bench, maxbatch

    record = SimpleNamespace(model="m", precision="fp16", backend="torch", artifact_path=Path("m.torch.onnx"),
                             model_path=None, spec=SimpleNamespace(shape_overrides=dict, max_batch=1))
    monkeypatch.setattr(bench, "load_runner", lambda r, threads=None: runner)
    monkeypatch.setattr(maxbatch, "device_memory", lambda: (5_000_000, 10_000_000))  # fake cudaMemGetInfo
    return maxbatch.search_device(record, SearchSettings(max_batch_limit=limit))


def test_device_search_maps_out_of_memory_to_does_not_fit_and_empties_the_cache_between_tries(monkeypatch):
    runner = FakeDeviceRunner(capacity=20)
    found = _fake_device_search(monkeypatch, runner)
    # bisection stops once the gap is within 10 % of the fit (20..22), as train-compare's does
    assert (found["largest_fit"], found["smallest_fail"], found["stopped_by"]) == (20, 22, "out_of_memory")
    assert runner.calls == [1, 2, 4, 8, 16, 32, 24, 20, 22] and runner.trims >= len(runner.calls) and runner.closed
    assert found["at_largest_fit"]["in_use_bytes"] == 20_000 and found["at_largest_fit"]["device_total_bytes"] == 10_000_000
    assert found["at_smallest_fail"]["failure"] == "CUDA out of memory. Tried to allocate 22 GiB"
    line = fit_line(found)
    assert line.startswith("fp16 (torch, m): largest batch that fits: 20 (torch allocator peak ")
    # 21 was never tried: the line says the answer is to within 10 %, not exact
    assert line.endswith("; searched to within 10 %: 22 did not fit: CUDA out of memory. Tried to allocate 22 GiB)")


def test_the_line_is_exact_only_when_fit_and_failure_are_adjacent():
    base = {"precision": "fp16", "backend": "torch", "model": "m", "stopped_by": "out_of_memory", "limit": 4096,
            "resolution": 0.1, "at_largest_fit": {}, "at_smallest_fail": {"failure": "CUDA out of memory"}}
    adjacent = fit_line({**base, "largest_fit": 20, "smallest_fail": 21})
    assert adjacent == "fp16 (torch, m): largest batch that fits: 20 (memory n/a; 21 did not fit: CUDA out of memory)"
    gap = fit_line({**base, "largest_fit": 20, "smallest_fail": 22})
    assert gap == ("fp16 (torch, m): largest batch that fits: 20 (memory n/a; searched to within 10 %: 22 did not "
                   "fit: CUDA out of memory)")
    budget = fit_line({**base, "stopped_by": "memory_budget", "budget_bytes": 64 * MIB, "largest_fit": 3,
                       "smallest_fail": 5, "at_smallest_fail": {"peak_bytes": 70 * MIB}})
    assert "3 (memory n/a; searched to within 10 %: 5 needs 70 MiB) — a budget" in budget


class FakeCompletedProcess:
    """A FAKE subprocess.run result: the probe child's exit without running one."""

    def __init__(self, returncode: int, stderr: str = "") -> None:
        self.returncode, self.stdout, self.stderr = returncode, "", stderr


@pytest.mark.parametrize("returncode", [-11, -6])
def test_a_probe_that_crashes_is_an_error_naming_batch_and_code_not_a_memory_limit(reduce_engine, monkeypatch,
                                                                                   returncode):
    from trtprof.measure import maxbatch
    from trtprof.errors import TrtprofError

    monkeypatch.setattr(maxbatch.subprocess, "run",
                        lambda *a, **k: FakeCompletedProcess(returncode, "loading\nFatal Python error: Segmentation fault"))
    with pytest.raises(TrtprofError) as info:
        maxbatch.host_probe(reduce_engine, 8, _budget(64 * MIB))
    message = str(info.value)
    assert f"at batch 8 died of signal {-returncode} (return code {returncode})" in message
    assert message.endswith("not a memory limit: Fatal Python error: Segmentation fault") and "\n" not in message


def test_a_probe_killed_by_sigkill_does_not_fit(reduce_engine, monkeypatch):
    from trtprof.measure import maxbatch

    monkeypatch.setattr(maxbatch.subprocess, "run", lambda *a, **k: FakeCompletedProcess(-9))
    answer = maxbatch.host_probe(reduce_engine, 8, _budget(64 * MIB))
    assert answer["fits"] is False and "SIGKILL" in answer["failure"]


def test_device_search_lets_other_errors_through_and_stops_at_the_limit(monkeypatch):
    with pytest.raises(ValueError, match="shape mismatch"):
        _fake_device_search(monkeypatch, FakeDeviceRunner(capacity=2, error=ValueError))
    found = _fake_device_search(monkeypatch, FakeDeviceRunner(capacity=100), limit=64)
    assert (found["largest_fit"], found["stopped_by"]) == (64, "max_batch_limit") and "≥ 64" in fit_line(found)
    none = _fake_device_search(monkeypatch, FakeDeviceRunner(capacity=0))
    assert none["largest_fit"] == 0 and "none (batch 1 did not fit: CUDA out of memory" in fit_line(none)


# -- GPU: a real allocation attempt (run on the device machine) --------------------------------------
def _tile_model(path: Path) -> Path:
    """x [N, 1024] tiled to [N, 2**26] (256 MiB a sample in fp32, 128 MiB in fp16) and summed: the
    device runs out of memory at a few hundred samples while the host inputs stay 4 KiB a sample."""
    import onnx
    from onnx import TensorProto, helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 1024])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 1])
    inits = [helper.make_tensor("reps", TensorProto.INT64, [2], [1, 1 << 16]),
             helper.make_tensor("axes", TensorProto.INT64, [1], [1])]
    nodes = [helper.make_node("Tile", ["x", "reps"], ["t"]),
             helper.make_node("ReduceSum", ["t", "axes"], ["y"], keepdims=1)]
    onnx.save(helper.make_model(helper.make_graph(nodes, "tile", [x], [y], initializer=inits),
                                opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


@pytest.mark.gpu
@pytest.mark.skipif(cuda.device_count() == 0, reason="no CUDA device")
def test_torch_search_stops_at_cuda_out_of_memory_and_fp16_fits_more(tmp_path):
    pytest.importorskip("onnx2torch")
    outcomes = build_engines(_tile_model(tmp_path / "tile.onnx"), [Precision.FP32, Precision.FP16], (1,),
                             settings=BuildSettings(engines_dir=tmp_path / "engines", backend="torch"))
    found = {f["precision"]: f for f in search([o.record for o in outcomes], SearchSettings())}
    for f in found.values():
        assert f["stopped_by"] == "out_of_memory" and f["smallest_fail"] > f["largest_fit"] >= 1
        assert "out of memory" in f["at_smallest_fail"]["failure"].lower()
        at = f["at_largest_fit"]
        assert at["memory"]["kind"] == "torch_allocator" and 0 < at["in_use_bytes"] <= at["device_total_bytes"]
        assert "did not fit" in fit_line(f) and "torch allocator peak" in fit_line(f)
    assert found["fp16"]["largest_fit"] > found["fp32"]["largest_fit"]  # half the bytes per tiled sample


@pytest.mark.gpu
@pytest.mark.tensorrt
@pytest.mark.skipif(cuda.device_count() == 0, reason="no CUDA device")
def test_tensorrt_search_stops_at_the_engines_profile(tmp_path):
    pytest.importorskip("tensorrt")
    outcomes = build_engines(_reduce_model(tmp_path / "reduce.onnx", floats=1024), [Precision.FP16], (1, 8),
                             settings=BuildSettings(engines_dir=tmp_path / "engines", backend="tensorrt"))
    [found] = search([o.record for o in outcomes], SearchSettings())
    assert (found["largest_fit"], found["limit"], found["stopped_by"]) == (8, 8, "engine_profile")
    assert found["at_largest_fit"]["memory"]["kind"] == "tensorrt" and found["at_largest_fit"]["io_bytes"] > 0
    assert "optimization profile ends at batch 8" in fit_line(found)


@pytest.mark.parametrize("kind,words", [("torch_allocator", "torch allocator peak 1024 B"),
                                        ("tensorrt", "TensorRT context + IO buffers 1024 B"),
                                        ("n/a", "in use 1024 B"), (None, "in use 1024 B")])
def test_fit_memory_names_the_figure_by_the_memory_report_kind(kind, words):
    """The words come from the runners' declaration (``backends.base.MEMORY_REPORT_WORDS``) by the kind the
    result kept: a kind it does not list is "in use"."""
    from trtprof.measure.maxbatch import fit_memory

    assert fit_memory({"in_use_bytes": 1024, "memory": {"kind": kind}}) == words
