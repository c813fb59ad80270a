"""Per-layer attribution: the parsers on crafted profiler output with known answers, the table and
its rules, and `trtprof profile` / `compare --layers` end to end on ONNX Runtime (CPU).

The torch.profiler and TensorRT paths are checked here as contracts with fakes named as such (their
real runs need a GPU: tests/layers/test_layers_gpu.py and benchmarks/gpu_why.py)."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from trtprof.cli import main
from trtprof.diagnose import layer_rules as rules
from trtprof.layers.graph import node_facts, tensor_core_dims
from trtprof.layers.kernels import uses_tensor_cores
from trtprof.layers.ort import parse_profile
from trtprof.layers.table import KernelTime, LayerTable, LayerTiming, PrecisionProfile, format_table
from trtprof.layers.torch_profile import ITERATION, PREFIX, UNATTRIBUTED, attribute_kernels, summarize


# ------------------------------------------------------------------------------------ ORT parser
def _ort_events(runs: list[dict[str, float]], op: dict[str, str]) -> list[dict]:
    """A crafted ORT trace: one model_run per run, node events (µs) inside it, fences around."""
    events, ts = [], 0.0
    for durations in runs:
        start = ts
        ts += 1
        for node, us in durations.items():
            events.append({"cat": "Node", "name": f"{node}_fence_before", "ts": ts, "dur": 0, "args": {}})
            events.append({"cat": "Node", "name": f"{node}_kernel_time", "ts": ts, "dur": us,
                           "args": {"op_name": op[node], "provider": "CPUExecutionProvider"}})
            ts += us + 1
        events.append({"cat": "Session", "name": "model_run", "ts": start, "dur": ts - start})
        ts += 10
    return events


def test_ort_parser_medians_over_the_last_runs_only():
    op = {"conv": "Conv", "cast": "Cast", "InsertedPrecisionFreeCast_relu": "Relu"}
    warm = {"conv": 1000.0, "cast": 1000.0, "InsertedPrecisionFreeCast_relu": 1000.0}
    timed = [{"conv": 10.0 * k, "cast": 2.0, "InsertedPrecisionFreeCast_relu": 4.0} for k in (1, 2, 3)]
    layers, total = parse_profile(_ort_events([warm, *timed], op), iterations=3)
    by = {layer.name: layer for layer in layers}
    assert by["conv"].median_ms == pytest.approx(0.020)  # median of 10, 20, 30 µs; the 1000 µs warmup is out
    assert by["cast"].kind == "cast" and by["cast"].median_ms == pytest.approx(0.002)
    # ORT's rename of a node it runs in FP32 behind casts joins the original node's row
    assert "relu" in by and "FP32 behind inserted casts" in by["relu"].kernels[0].name
    assert total == pytest.approx((20 + 2 + 4) / 1e3)


# --------------------------------------------------------------------------- torch attribution
class FakeEvent(SimpleNamespace):
    """Stands in for torch.autograd's FunctionEvent: name, id, cpu_parent, kernels."""


def _tree(iteration_id: int, conv_us: float) -> list[FakeEvent]:
    it = FakeEvent(name=ITERATION, id=iteration_id, cpu_parent=None, kernels=[])
    node = FakeEvent(name=PREFIX + "conv1", id=iteration_id * 10 + 1, cpu_parent=it, kernels=[])
    op = FakeEvent(name="aten::cudnn_convolution", id=iteration_id * 10 + 2, cpu_parent=node,
                   kernels=[SimpleNamespace(name="sm90_xmma_fprop_implicit_gemm_f16f16", duration=conv_us),
                            SimpleNamespace(name="cudnn::nchwToNhwcKernel", duration=1.0)])
    stray = FakeEvent(name="aten::copy_", id=iteration_id * 10 + 3, cpu_parent=it,
                      kernels=[SimpleNamespace(name="elementwise_kernel", duration=2.0)])
    outside = FakeEvent(name="aten::fill_", id=iteration_id * 10 + 4, cpu_parent=None,
                        kernels=[SimpleNamespace(name="fill", duration=50.0)])
    return [it, node, op, stray, outside]


def test_torch_kernels_go_to_the_innermost_node_range_per_iteration():
    # every iteration event carries the same id, as torch's user ranges can (kineto correlation ids
    # repeat): iterations are told apart by the event objects, never merged
    events = _tree(7, 100.0) + _tree(7, 300.0) + _tree(7, 200.0)
    attributed, totals = attribute_kernels(events)
    assert set(attributed) == {"conv1", UNATTRIBUTED}  # the kernel outside every iteration is dropped
    assert sorted(totals.values()) == [103.0, 203.0, 303.0]
    iterations = [id(e) for e in events if e.name == ITERATION]
    layers = summarize(attributed, iterations, {"conv1": "Conv"}, ["conv1"], half=True)
    conv = layers[0]
    assert conv.name == "conv1" and conv.op_type == "Conv" and conv.kind == "compute"
    assert conv.median_ms == pytest.approx(0.201)  # median of 101, 301, 201 µs
    assert [k.calls for k in conv.kernels] == [1, 1]
    assert [k.tensor_core for k in conv.kernels] == [True, False]  # the layout kernel is CUDA-core work
    assert conv.kernels[0].median_ms == pytest.approx(0.2)


class FakeKineto:
    """Stands in for torch's raw KinetoEvent (the accessors attribute_by_launch reads)."""

    def __init__(self, name, device, start, end, corr=0, linked=0):
        self._v = (name, device, start, end, corr)
        self._linked = linked

    def name(self): return self._v[0]
    def device_type(self): return self._v[1]
    def start_ns(self): return self._v[2]
    def end_ns(self): return self._v[3]
    def duration_ns(self): return self._v[3] - self._v[2]
    def correlation_id(self): return self._v[4]
    def start_thread_id(self): return 1
    def linked_correlation_id(self): return self._linked


def test_launch_time_attribution_counts_each_gpu_activity_once():
    from trtprof.layers.torch_profile import attribute_by_launch

    cpu, gpu = "cpu", "cuda"
    raw = []
    for it, base in ((0, 0), (1, 10_000)):
        raw += [FakeKineto(ITERATION, cpu, base, base + 9_000),
                FakeKineto(PREFIX + "conv1", cpu, base + 100, base + 2_000),
                FakeKineto("cudaLaunchKernel", cpu, base + 500, base + 600, corr=100 + it),
                FakeKineto("cudaLaunchKernel", cpu, base + 2_500, base + 2_600, corr=200 + it),  # outside conv1
                FakeKineto("sm90_xmma_fprop_f16f16", gpu, base + 3_000, base + 3_000 + 1_000 * (it + 1), corr=100 + it),
                FakeKineto("elementwise_kernel", gpu, base + 5_000, base + 5_500, corr=200 + it)]
    raw.append(FakeKineto("fill", gpu, 50_000, 60_000, corr=999))  # its launch was not recorded
    raw.append(raw[4])  # one activity reported twice: counted once
    raw.append(FakeKineto(PREFIX + "conv1", gpu, 3_000, 4_000))  # the range's span on the GPU: not work
    attributed, totals, counts = attribute_by_launch(raw, cpu, (gpu,))
    assert counts["unmatched_us_by_name"] == {"fill": 10.0}
    del counts["unmatched_us_by_name"]
    assert counts == {"gpu_activities": 6, "gpu_range_spans_skipped": 1, "matched_to_launch": 4,
                      "matched_by_linked_op": 0, "duplicate_records": 1,
                      "outside_iterations_us": 0.0, "iterations": 2}
    assert set(attributed) == {"conv1", UNATTRIBUTED}
    assert sorted(totals.values()) == [1.5, 2.5]  # µs per iteration: kernel + stray
    layers = summarize(attributed, sorted(totals), {"conv1": "Conv"}, ["conv1"])
    assert layers[0].median_ms == pytest.approx(1.5e-3)


def test_launch_attribution_falls_back_to_the_linked_op_when_no_runtime_call_was_recorded():
    """A kernel a library launched through the driver API has no cudaLaunch* event; its linked
    correlation id names the aten op running then, whose start places it in conv1's range."""
    from trtprof.layers.torch_profile import attribute_by_launch

    cpu, gpu = "cpu", "cuda"
    raw = [FakeKineto(ITERATION, cpu, 0, 9_000, corr=1),
           FakeKineto(PREFIX + "conv1", cpu, 100, 2_000, corr=2),
           FakeKineto("aten::cudnn_convolution", cpu, 300, 1_800, corr=3),
           FakeKineto(PREFIX + "relu", cpu, 2_100, 2_900, corr=4),
           FakeKineto("sm90_xmma_fprop", gpu, 3_000, 4_000, corr=777, linked=3),
           FakeKineto("late_kernel", gpu, 20_000, 21_000, corr=778, linked=99)]  # its op is unknown
    attributed, totals, counts = attribute_by_launch(raw, cpu, (gpu,))
    assert counts["matched_by_linked_op"] == 1 and counts["matched_to_launch"] == 0
    assert list(attributed) == ["conv1"]
    assert counts["unmatched_us_by_name"] == {"late_kernel": 1.0}


def test_kernel_names_tensor_core_flag():
    assert uses_tensor_cores("sm90_xmma_fprop_implicit_gemm_f16f16_f16f32_f32_nhwckrsc_nhwc_tilesize128x128") is True
    assert uses_tensor_cores("ampere_fp16_s16816gemm_fp16_128x128_ldg8_f2f_stages_32x5_nn") is True
    assert uses_tensor_cores("cutlass_80_tensorop_s1688gemm_64x64_16x6_tn_align4") is True
    assert uses_tensor_cores("sm80_xmma_fprop_implicit_gemm_f32f32_f32f32_f32_nchwkcrs_ffma") is False
    assert uses_tensor_cores("implicit_convolve_sgemm<float, float, 128, 5, 5>") is False
    assert uses_tensor_cores("void at::native::vectorized_elementwise_kernel<4, elu>") is False
    assert uses_tensor_cores("some_unknown_kernel") is None
    # names seen on the H200 (torch 2.11, cuDNN 9)
    assert uses_tensor_cores("cutlass__5x_cudnn::Kernel<cutlass_tensorop_f16_s16816fprop_optimized_f16_256x64>") is True
    assert uses_tensor_cores("sm90_xmma_fprop_image_first_layer_f16f16_f32_f16_nhwckrsc_nhwc_hmma_k64c4r7s7") is True
    assert uses_tensor_cores("void convolve_common_engine_float_NHWC<__half, __half, 128, 5, 5, 3, 3, 3>") is False
    assert uses_tensor_cores("void cudnn::cnn::conv2d_grouped_direct_kernel<false, true, false>") is False
    assert uses_tensor_cores("void cudnn::engines_precompiled::nchwToNhwcKernel<__half, __half, float>") is False
    assert uses_tensor_cores("nvjet_sm90_hsh_320x128_64x3_4x2_v_bz_coopB_NNT") is None


# ----------------------------------------------------------------------------------- graph facts
def _conv(cin: int, cout: int, k: int = 3, group: int = 1):
    from onnx import helper

    node = helper.make_node("Conv", ["x", "w"], ["y"], group=group)
    shapes = {"w": (cout, cin // group, k, k)}
    return node, shapes.get


def test_tensor_core_eligibility_from_channels_and_gemm_dims():
    from onnx import helper

    three = tensor_core_dims(*_conv(3, 3, 32))
    assert three["eligible"] is False and three["reasons"] == ["input channels 3", "output channels 3"]
    assert tensor_core_dims(*_conv(64, 128))["eligible"] is True
    dw = tensor_core_dims(*_conv(32, 32, group=32))
    assert dw["eligible"] is False and dw["depthwise"] is True
    gemm = helper.make_node("Gemm", ["a", "b"], ["y"], transB=1)
    shape = {"a": (4, 512), "b": (10, 512)}.get
    assert tensor_core_dims(gemm, shape) == {"k": 512, "n": 10, "eligible": False, "reasons": ["N 10"]}
    assert tensor_core_dims(helper.make_node("Relu", ["a"], ["y"]), shape) is None
    assert tensor_core_dims(*_conv(3, 3)[:1], lambda name: None) is None  # unknown shapes: no claim


def test_node_facts_on_a_model(conv_model):
    import onnx

    facts = node_facts(onnx.load(str(conv_model)), {"input": (2, 3, 16, 16)})
    assert facts["conv0"]["tensor_core"]["reasons"] == ["input channels 3"]  # 3 → 8 channels
    assert facts["conv1"]["tensor_core"]["eligible"] is True  # 8 → 16
    assert facts["conv0"]["flops"] == 2 * (2 * 8 * 8 * 8) * (3 * 9)
    assert facts["relu0"]["tensor_core"] is None


# ---------------------------------------------------------------------------- table and rules
def _profile(precision: str, times: dict[str, float], *, backend="torch", tc=None, total=None) -> PrecisionProfile:
    kinds = {"cast_in": "cast"}
    layers = tuple(LayerTiming(name, "Cast" if name == "cast_in" else "Conv", kinds.get(name, "compute"), ms,
                               (KernelTime(f"k_{name}", ms, 1, (tc or {}).get(name)),)) for name, ms in times.items())
    return PrecisionProfile(precision, backend, "fake", 8, 10, layers, iteration_total_ms=total)


def _table(graph=None) -> LayerTable:
    fp32 = _profile("fp32", {"conv0": 6.0, "conv1": 3.0, "conv2": 1.0}, total=10.0)
    fp16 = _profile("fp16", {"cast_in": 1.0, "conv0": 7.0, "conv1": 1.0, "conv2": 1.0},
                    tc={"conv0": False, "conv1": True}, total=10.0)
    return LayerTable(8, ("fp32", "fp16"), {"fp32": fp32, "fp16": fp16}, graph=graph or {})


def test_table_joins_precisions_and_marks_slower_layers():
    table = _table()
    data = table.to_json()
    rows = {r["name"]: r for r in data["rows"]}
    assert rows["conv0"]["ratio_vs_baseline"]["fp16"] == pytest.approx(7 / 6)
    assert rows["conv0"]["share"]["fp16"] == pytest.approx(0.7) and rows["conv0"]["share"]["fp32"] == pytest.approx(0.6)
    assert rows["cast_in"]["time_ms"]["fp32"] is None and rows["cast_in"]["kind"] == "cast"
    assert rows["conv1"]["tensor_core"]["fp16"] is True and rows["conv0"]["tensor_core"]["fp16"] is False
    from trtprof.layers.table import LayerRow

    unknown = LayerRow("c", "Conv", "compute", {}, {}, {"fp16": (KernelTime("nvjet_sm90_hsh", 1.0, 1, None),
                                                                KernelTime("elementwise_kernel", 0.1, 1, False))})
    assert unknown.tensor_core("fp16") is None  # a GEMM whose name does not tell: no claim either way
    text = format_table(data)
    assert "1.17!" in text and "separate profiled run" in text
    assert text.splitlines()[2].startswith("conv0")  # rows by their largest time


def test_layer_rules_fire_on_their_evidence_only():
    graph = {"conv0": {"op_type": "Conv", "flops": 900, "tensor_core": {"eligible": False, "reasons": ["input channels 3"]}},
             "conv1": {"op_type": "Conv", "flops": 100, "tensor_core": {"eligible": True, "reasons": []}}}
    table = _table(graph)
    slower = rules.fp16_slower_layers(table, "fp16")
    assert slower.evidence["layers"][0]["name"] == "conv0" and slower.evidence["extra_ms"] == pytest.approx(1.0)
    cast = rules.cast_reformat_share(table, "fp16")
    assert cast.evidence["share"] == pytest.approx(0.1)
    tc = rules.tensor_core_ineligible(graph, "fp16", table)
    assert tc.evidence["share"] == pytest.approx(0.7) and tc.evidence["basis"] == "profiled time"
    assert tc.evidence["layers"][0]["tensor_core_kernels"] is False
    flops_only = rules.tensor_core_ineligible(graph, "fp16")
    assert flops_only.evidence["share"] == pytest.approx(0.9) and "FLOPs" in flops_only.evidence["basis"]
    assert rules.tensor_core_ineligible(graph, "fp32") is None  # FP32 on CUDA cores: not a tensor-core question
    eligible = {"conv1": graph["conv1"]}
    assert rules.tensor_core_ineligible(eligible, "fp16", table) is None
    # GPU idle gaps: 10 ms of kernels in a 25 ms compute time → host-bound; in 11 ms → not
    gaps = rules.gpu_idle_gaps(table, "fp16", 25.0)
    assert gaps.rule == "host_bound" and gaps.evidence["busy_share"] == pytest.approx(0.4)
    assert rules.gpu_idle_gaps(table, "fp16", 11.0) is None
    found = {f.rule for f in rules.layer_findings(table, graph, "fp16", {"fp16": 25.0})}
    assert found == {"fp16_slower_layers", "cast_reformat", "tensor_core_ineligible", "host_bound"}
    # the same table from the CPU: no tensor-core claim
    cpu = LayerTable(8, ("fp32", "fp16"), {p: _profile(p, {"conv0": 1.0}, backend="onnxruntime") for p in ("fp32", "fp16")},
                     graph=graph)
    assert "tensor_core_ineligible" not in {f.rule for f in rules.layer_findings(cpu, graph, "fp16")}


def fake_tensorrt_profile():
    """A TensorRT per-layer profile and inspection of a fused conv and its input reformat: fake values in
    the real classes of ``backends.tensorrt.inspect`` (also used by tests/layers/test_timeline.py)."""
    from trtprof.backends.tensorrt.inspect import EngineInspection, LayerInfo, LayerProfile, LayerTime

    inspection = EngineInspection(layers=(
        LayerInfo("conv1 + relu1", "CaskConvolution", "fp16", "sm90_xmma_fprop_implicit_gemm_f16f16_f16f32"),
        LayerInfo("Reformatting CopyNode for Input Tensor 0 to conv1", "Reformat", "fp16", "copy"),
    ), io_tensors=("input", "output"))
    prof = LayerProfile(batch_size=8, iterations=10, layers=(
        LayerTime("Reformatting CopyNode for Input Tensor 0 to conv1", 0.05, 0.05, 10),
        LayerTime("conv1 + relu1", 0.5, 0.52, 10)))
    return prof, inspection


def test_tensorrt_profile_maps_to_the_table_fake_engine():
    """Contract with TensorRT's per-layer profile and inspector types (fake values, real classes)."""
    from trtprof.layers.tensorrt import from_tensorrt

    prof, inspection = fake_tensorrt_profile()
    out = from_tensorrt(prof, inspection, "fp16", backend="tensorrt")
    by = {layer.name: layer for layer in out.layers}
    assert by["conv1 + relu1"].kernels[0].tensor_core is True and by["conv1 + relu1"].kind == "compute"
    assert by["Reformatting CopyNode for Input Tensor 0 to conv1"].kind == "reformat"
    assert out.total_ms == pytest.approx(0.55) and out.backend == "tensorrt"


# ------------------------------------------------------------------------- autotune switching
def test_cudnn_mode_sets_and_restores_the_flag():
    torch = pytest.importorskip("torch")
    from trtprof.backends.base import set_autotune
    from trtprof.backends.torch import cudnn_mode

    before = torch.backends.cudnn.benchmark
    with cudnn_mode(torch, tf32=False, autotune=not before):
        assert torch.backends.cudnn.benchmark is (not before)
    assert torch.backends.cudnn.benchmark is before
    runner = SimpleNamespace(autotune=True)
    assert set_autotune(runner, False) is False and runner.autotune is False
    assert set_autotune(SimpleNamespace(), False) is None  # backends without the setting


# ----------------------------------------------------------------------------- CLI end to end
pytest.importorskip("onnxruntime")


def test_profile_cli_on_onnxruntime(conv_model, tmp_path, capsys):
    out = tmp_path / "layers.json"
    assert main(["profile", str(conv_model), "--backend", "onnxruntime", "--batch-size", "2", "--iterations", "5",
                 "--engines", str(tmp_path / "engines"), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    # ONNX Runtime's CPU "fp16" is FP32 behind casts: the table and the diagnosis say so, and make no
    # per-layer FP16 claim (no "slower in fp16" rule, no '!' mark, no tensor-core columns on a CPU)
    assert "fp16 (fp32+casts)/fp32" in printed and "separate profiled run" in printed
    assert printed.startswith("NOTE: fp16 is FP32+CASTS: the fp16 engine (onnxruntime) ran every compute node in FP32")
    assert "TC kernels" not in printed and "!" not in printed.split("sum of layer medians")[0]
    data = json.loads(out.read_text())
    assert data["effective_precision"] == {"fp16": "fp32+casts"}
    rules = [f["rule"] for f in data["diagnosis"]]
    assert rules[0] == "fp16_not_fp16" and "fp16_slower_layers" not in rules
    assert data["schema"] == "trtprof.layers/1" and data["backend"] == "onnxruntime"
    table = data["table"]
    assert table["precisions"] == ["fp32", "fp16"] and table["batch_size"] == 2
    names = {r["name"] for r in table["rows"]}
    assert {"fc"} <= names and any(n.startswith("r0") or n == "conv0" for n in names)
    for p in ("fp32", "fp16"):
        assert table["totals_ms"][p] > 0 and table["profiles"][p]["iterations"] == 5
        shares = [r["share"][p] for r in table["rows"] if r["share"].get(p) is not None]
        assert sum(shares) == pytest.approx(1.0)
    assert any(r["kind"] == "cast" for r in table["rows"])  # the FP16 graph's output cast is a row of its own
    assert any(r["graph"] for r in table["rows"])  # graph facts joined by node name where ORT kept it
    # the engines dir works in place of the model (same engines, no rebuild)
    again = tmp_path / "again.json"
    assert main(["profile", str(tmp_path / "engines"), "--backend", "onnxruntime", "--batch-size", "2",
                 "--iterations", "3", "--out", str(again)]) == 0
    assert json.loads(again.read_text())["table"]["profiles"]["fp16"]["iterations"] == 3


def test_profile_of_a_mixed_fp16_names_no_layer_that_ran_fp32_in_both(mixed_fp16_model, tmp_path, capsys):
    """Issue 44: an ORT CPU "fp16" whose Concat has an FP16 kernel and whose Conv, pools and Gemm run FP32
    (effective mixed). Those layers ran the FP32 baseline's kernels: their kernels say so, the table marks
    them '=' (never '!'), and ``fp16_slower_layers`` never names one of them, whatever the profiled times."""
    out = tmp_path / "layers.json"
    assert main(["profile", str(mixed_fp16_model), "--backend", "onnxruntime", "--iterations", "5",
                 "--engines", str(tmp_path / "engines"), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    data = json.loads(out.read_text())
    rows = {r["name"]: r for r in data["table"]["rows"]}
    heavy = ("conv", "concat", "pool", "gap", "gemm")
    for name in heavy:  # the FP32 nodes of the fp16 engine, each marked as such
        assert any(m in k["name"] for k in rows[name]["kernels"]["fp16"] for m in ("FP32 behind inserted casts",
                                                                                   "runs FP32")), name
    assert not any("runs FP32" in k["name"] or "behind" in k["name"] for k in rows["concat0"]["kernels"]["fp16"])
    table = printed.split("sum of layer medians")[0]
    for line in table.splitlines():
        if line.split() and line.split()[0] in heavy:
            assert line.rstrip().endswith("=") and "!" not in line, line
    assert "'=' = ran the same FP32 kernels as fp32" in printed
    for f in data["diagnosis"]:
        if f["rule"] == "fp16_slower_layers":
            assert not {x["name"] for x in f["evidence"]["layers"]} & set(heavy)


def test_compare_layers_adds_tables_and_a_report_section(conv_model, tmp_path, capsys):
    out = tmp_path / "compare.json"
    assert main(["compare", str(conv_model), "--backend", "onnxruntime", "--batch-sizes", "1,2", "--layers",
                 "--time-budget-s", "0.3", "--round-iterations", "10", "--engines", str(tmp_path / "e"),
                 "--out", str(out)]) == 0
    data = json.loads(out.read_text())
    assert set(data["layers"]) == {"1", "2"} and data["settings"]["autotune"] is True
    assert all(r["config"]["autotune"] is None for r in data["results"])  # ORT has no autotune switch
    html_path = tmp_path / "r.html"
    assert main(["report", str(out), "-o", str(html_path)]) == 0
    assert "Layers: where the time goes" in html_path.read_text()


def test_profile_bad_input_is_one_line(conv_model, tmp_path):
    proc = subprocess.run([sys.executable, "-m", "trtprof", "profile", str(conv_model), "--batch-size", "0"],
                          capture_output=True, text=True, cwd=tmp_path,
                          env={"PYTHONPATH": str(Path(__file__).resolve().parents[2]), "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 2 and "--batch-size" in proc.stderr and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and not (tmp_path / "engines").exists()
