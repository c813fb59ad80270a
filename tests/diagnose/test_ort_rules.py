"""The why rules for ONNX Runtime on a GPU on SYNTHETIC results and profiles (no GPU here): nodes on the
CPU EP with their Memcpy nodes (a crafted ORT trace through layers.ort.parse_profile, as `compare --layers`
reads one), NCHW fp16 convolutions, the CUDA graph ORT refused, the cuDNN search mode — each fires on its
evidence just inside its threshold, stays silent just outside it, and stays silent on backends whose
capabilities do not say it applies (the CPU onnxruntime backend, torch)."""
from __future__ import annotations

import pytest

from trtprof.diagnose import ort_rules as ort
from trtprof.diagnose import rules as dg
from trtprof.layers.ort import kernel_provider, parse_profile
from trtprof.layers.table import LayerTable, PrecisionProfile
from tests.diagnose.test_diagnose import crafted

CUDA_EP, CPU_EP = "CUDAExecutionProvider", "CPUExecutionProvider"
OPTIONS = {"cudnn_conv_algo_search": "EXHAUSTIVE", "prefer_nhwc": "0", "use_tf32": "0", "device_id": "0"}
GRAPH = {"conv0": {"op_type": "Conv"}, "relu0": {"op_type": "Relu"}, "conv1": {"op_type": "Conv"}}


def trace(nodes: dict[str, tuple[str, str, float]], runs: int = 3) -> list[dict]:
    """A crafted ORT profile: node → (op, provider, µs) in every model_run, fences around."""
    events, ts = [], 0.0
    for _ in range(runs):
        start = ts
        ts += 1
        for node, (op, provider, us) in nodes.items():
            events.append({"cat": "Node", "name": f"{node}_fence_before", "ts": ts, "dur": 0, "args": {}})
            events.append({"cat": "Node", "name": f"{node}_kernel_time", "ts": ts, "dur": us,
                           "args": {"op_name": op, "provider": provider}})
            ts += us + 1
        events.append({"cat": "Session", "name": "model_run", "ts": start, "dur": ts - start})
        ts += 10
    return events


def table(nodes: dict[str, tuple[str, str, float]], backend: str = "onnxruntime-cuda") -> LayerTable:
    layers, total = parse_profile(trace(nodes), iterations=3)
    profiles = {p: PrecisionProfile(p, backend, "onnxruntime session profiling", 8, 3, layers, total,
                                    {"provider": CUDA_EP}) for p in ("fp32", "fp16")}
    return LayerTable(8, ("fp32", "fp16"), profiles)


GPU_ONLY = {"conv0": ("Conv", CUDA_EP, 80.0), "relu0": ("Relu", CUDA_EP, 10.0), "conv1": ("Conv", CUDA_EP, 90.0)}


def with_shape_nodes(cpu: int, memcpy: int) -> dict[str, tuple[str, str, float]]:
    nodes = dict(GPU_ONLY)
    for k in range(cpu):
        nodes[f"shape{k}"] = ("Shape", CPU_EP, 5.0)
    for k in range(memcpy):
        nodes[f"copy{k}"] = ("MemcpyToHost" if k % 2 == 0 else "MemcpyFromHost", CUDA_EP, 10.0)
    return nodes


def launched(options=None, **launch) -> dict:
    record = {"mode": launch.pop("mode", "cuda_graph"), "graph_by": "onnxruntime",
              "provider_options": dict(OPTIONS if options is None else options), **launch}
    return {"first_round": {"launch": record}, "last_round": {"launch": record}}


def result(precision="fp16", backend="onnxruntime-cuda", options=None, **launch):
    return crafted(precision, 8, backend=backend, device=launched(options, **launch), compute_ms=1.0, enqueue_ms=0.1,
                   metadata={"node_precision": {"fp16": {"Conv": 2}, "fp32": {}}})


def test_the_kernel_names_of_the_ort_profile_carry_the_provider():
    layers, _ = parse_profile(trace(with_shape_nodes(1, 0)), iterations=3)
    assert {layer.name: kernel_provider(layer.kernels[0].name) for layer in layers} == {
        "conv0": CUDA_EP, "relu0": CUDA_EP, "conv1": CUDA_EP, "shape0": CPU_EP}
    assert kernel_provider("Conv (CPUExecutionProvider, FP32 behind inserted casts)") == CPU_EP
    assert kernel_provider("sm90_xmma_fprop") is None


@pytest.mark.parametrize("cpu, memcpy", [(1, 0), (0, 1), (3, 2)])
def test_cpu_ep_nodes_fire_from_one_node_off_the_cuda_ep(cpu, memcpy):
    f = ort.cpu_ep_nodes(table(with_shape_nodes(cpu, memcpy)), "fp16")
    assert cpu + memcpy >= ort.MIN_OFF_GPU_NODES  # just inside (1), and above
    assert f is not None and f.rule == "ort_cpu_nodes"
    ev = f.evidence
    assert ev["cpu_nodes"] == cpu and ev["memcpy_nodes"] == memcpy
    assert ev["cpu_ms"] == pytest.approx(0.005 * cpu) and ev["memcpy_ms"] == pytest.approx(0.010 * memcpy)
    assert ev["share"] == pytest.approx((0.005 * cpu + 0.010 * memcpy) / (0.180 + 0.005 * cpu + 0.010 * memcpy))
    assert "onnxsim" in f.message and "static shapes" in f.message and "CUDA graph" in f.message
    assert f"{cpu} node" in f.message and f"{memcpy} Memcpy node" in f.message


def test_cpu_ep_nodes_silent_with_every_node_on_the_cuda_ep():
    assert ort.cpu_ep_nodes(table(with_shape_nodes(0, 0)), "fp16") is None  # just outside: 0 nodes off it


def test_cpu_ep_nodes_name_the_counts_and_share_in_words():
    f = ort.cpu_ep_nodes(table(with_shape_nodes(3, 2)), "fp16")
    assert f is not None
    assert "3 nodes run on ONNX Runtime's CPU EP (Shape×3) and 2 Memcpy nodes (MemcpyFromHost×1, MemcpyToHost×1)" \
        in f.message
    assert "0.035 ms, 16% of the profiled time" in f.message


@pytest.mark.parametrize("backend", ["onnxruntime", "torch"])
def test_cpu_ep_nodes_silent_where_the_capabilities_say_no_ort_gpu_profile(backend):
    """The CPU onnxruntime backend runs every node on the CPU EP by design; torch's profile is not ORT's."""
    assert ort.cpu_ep_nodes(table(with_shape_nodes(3, 2), backend=backend), "fp16") is None


def test_nchw_fires_for_fp16_convs_with_the_layout_option_at_0():
    f = ort.nchw_convs(result(), GRAPH, speedup=1.2)
    assert f is not None and f.rule == "ort_nchw"
    assert f.evidence["prefer_nhwc"] == "0" and f.evidence["convs"] == 2 and f.evidence["convs_from"] == "graph"
    assert "cuDNN's FP16 tensor-core convolutions want NHWC" in f.message and "`--what-if nhwc`" in f.message
    assert "measured here fp16 1.20×" in f.message
    # without the graph's facts the census of the executed graph counts the Convs
    assert ort.nchw_convs(result(), None).evidence["convs_from"] == "node_precision"


def test_nchw_conv_threshold_just_inside_and_just_outside():
    one = {"conv0": {"op_type": "Conv"}, "relu0": {"op_type": "Relu"}}
    none = {"relu0": {"op_type": "Relu"}, "gemm": {"op_type": "Gemm"}}
    assert ort.nchw_convs(result(), one).evidence["convs"] == ort.MIN_CONVS
    assert ort.nchw_convs(result(), none) is None


@pytest.mark.parametrize("change", [
    {"options": {**OPTIONS, "prefer_nhwc": "1"}},  # the what-if's arm: NHWC already
    {"options": {}},  # the option not recorded
    {"precision": "fp32"},
    {"backend": "onnxruntime"},  # capabilities: no layout option, a CPU device
    {"backend": "torch"},
])
def test_nchw_silent_without_its_evidence(change):
    assert ort.nchw_convs(result(**change), GRAPH) is None


def test_a_graph_ort_refused_is_named_with_its_reason():
    why = ("This session cannot use the graph capture feature as requested by the user as all compute graph nodes "
           "have not been partitioned to the CUDAExecutionProvider")
    base = result("fp32", mode="eager", capture_failed=why)
    cand = result("fp16", mode="eager", capture_failed=why)
    f = ort.graph_refused(base, cand)
    assert f is not None and f.rule == "ort_graph_refused"
    assert f.evidence["refused"] == {"fp32": why, "fp16": why} and f.evidence["graph_by"] == "onnxruntime"
    assert "fp32 and fp16 at batch 8 ran eager: onnxruntime refused its CUDA graph (" + why + ")" in f.message
    assert "onnxsim" in f.message and "static shapes" in f.message
    only = ort.graph_refused(result("fp32"), cand)  # one arm replayed its graph, the other could not
    assert only is not None and only.evidence["refused"] == {"fp16": why}


def test_graph_refused_silent_when_it_replayed_or_another_runtime_captures():
    assert ort.graph_refused(result("fp32"), result("fp16")) is None
    torch_eager = crafted("fp16", 8, backend="torch", compute_ms=1.0,
                          device={"last_round": {"launch": {"mode": "eager", "capture_failed": "a CPU copy"}}})
    assert ort.graph_refused(torch_eager, torch_eager) is None  # the loop's own capture: enqueue_bound says it


@pytest.mark.parametrize("mode, fires", [("DEFAULT", True), ("default", True), ("HEURISTIC", False),
                                         ("EXHAUSTIVE", False)])
def test_the_unsearched_cudnn_mode(mode, fires):
    f = ort.unsearched_convs(result(options={**OPTIONS, "cudnn_conv_algo_search": mode}), GRAPH)
    assert (f is not None) is fires
    if fires:
        assert f.rule == "ort_cudnn_search" and "IMPLICIT_PRECOMP_GEMM" in f.message and f.evidence["convs"] == 2
    no_convs = {"gemm": {"op_type": "Gemm"}}
    assert ort.unsearched_convs(result(options={**OPTIONS, "cudnn_conv_algo_search": mode}), no_convs) is None


def test_every_finding_names_the_recorded_search_mode_and_diagnose_assembles_them():
    why = "all compute graph nodes have not been partitioned to the CUDAExecutionProvider"
    base, cand = result("fp32", mode="eager", capture_failed=why), result("fp16", mode="eager", capture_failed=why)
    found = dg.diagnose(base, cand, dg.PairEvidence(layers=table(with_shape_nodes(2, 2)), graph=GRAPH, device_kind="cuda",
                                                      speedup=1.1))
    by_rule = {f.rule: f for f in found}
    assert {"ort_cpu_nodes", "ort_nchw", "ort_graph_refused"} <= set(by_rule)
    assert all(by_rule[r].evidence["cudnn_conv_algo_search"] == "EXHAUSTIVE"
               for r in ("ort_cpu_nodes", "ort_nchw", "ort_graph_refused"))
    # the same results on the CPU onnxruntime backend: none of these rules speak
    cpu = [result(p, backend="onnxruntime", mode="eager", capture_failed=why) for p in ("fp32", "fp16")]
    found = dg.diagnose(*cpu, dg.PairEvidence(layers=table(with_shape_nodes(2, 2), backend="onnxruntime"), graph=GRAPH))
    assert not {f.rule for f in found} & {"ort_cpu_nodes", "ort_nchw", "ort_graph_refused", "ort_cudnn_search"}


def test_provider_options_are_read_from_the_launch_record_or_a_bench_results_runtime():
    assert ort.provider_options(result()) == OPTIONS
    bench = crafted("fp16", backend="onnxruntime-cuda", compute_ms=1.0,
                    config={"runtime": {"provider_options": {"prefer_nhwc": "0", "cudnn_conv_algo_search": "DEFAULT"}}})
    assert ort.search_mode(bench) == "DEFAULT"
    assert ort.provider_options(crafted("fp16", compute_ms=1.0)) is None


def test_the_nhwc_what_if_says_which_finding_suggested_it():
    from trtprof.compare import whatif

    assert whatif.SUGGESTED_BY[whatif.NHWC] == "ort_nchw"
