"""``bench --find-max-batch`` (issue 24): the largest batch whose inference fits, per engine.

On the CPU the answer is against a memory budget, and the test model makes it computable: its input
is SAMPLE_BYTES per sample and the graph reduces it to one number, so a batch needs the input plus a
fixed overhead (the session, its thread pool) and nothing else of size. GPU tests (torch, TensorRT)
are marked ``gpu`` and run on the device machine."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from trtprof import cuda
from trtprof.build import BuildSettings, build_engines
from trtprof.cli import main
from trtprof.maxbatch import SearchSettings, find_max_batch, fit_line, search
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
    from trtprof.report import write_report

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
    # batch 1 needs the 32 MiB input alone: a 20 MiB budget holds nothing
    (["--find-max-batch", "--memory-limit-mb", "20"], "batch 1 of reduce fp32 (onnxruntime) needs"),
])
def test_bad_limits_exit_2_with_one_line_and_no_results_file(reduce_engine, tmp_path, capsys, argv, says):
    out = tmp_path / "r.json"
    assert main(["bench", str(reduce_engine.meta_path), "--iterations", "3", "--out", str(out), *argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len([line for line in err if not line.startswith("searching")]) == 1 and says in err[-1]
    assert not out.exists()


def test_the_search_is_shared_with_train_compare():
    from trtprof.train import pytorch

    assert pytorch.find_max_batch is find_max_batch


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
