"""Timelines (issue 35): the arithmetic of idle gaps and casts, the trace-event files, the ORT and torch
trace parsers, and `profile --timeline --trace-dir` through the real CLI on a model-zoo graph (ONNX Runtime)."""
from __future__ import annotations

import json
from pathlib import Path

import onnx
import pytest

from trtprof.cli import main
from trtprof.layers.timeline import (
    HOST_BOUND_IDLE_SHARE, Span, Timeline, added_casts, check_trace, finding_items, findings, from_layer_times, from_ort_events,
    from_torch_trace, kernel_kind, timeline_svg, trace_document,
)

from ..conftest import tree_snapshot

ZOO = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light" / "light_squeezenet.onnx"


def timeline(spans, window_us, precision="fp32", backend="torch"):
    return Timeline(precision, 1, backend, "test", tuple(Span(*s) for s in spans), window_us)


def test_busy_idle_and_gaps_count_overlaps_once():
    # two lanes: [0, 40) and [30, 50) overlap; [70, 80); window 100 -> busy 60, gaps [50,70) and [80,100)
    t = timeline([("a", "conv", "s1", 0, 40), ("b", "gemm", "s2", 30, 20), ("c", "cast", "s1", 70, 10)], 100)
    assert t.busy_us() == pytest.approx(60)
    assert t.kernel_us == pytest.approx(70)  # concurrent spans each count in the sum
    assert t.gaps() == [(50, 70), (80, 100)]
    assert t.idle_share == pytest.approx(0.40)
    assert t.lanes == ("s1", "s2")
    assert t.top(1) == [("a", "conv", 40, 1)]


def test_host_bound_finding_just_inside_and_outside_its_threshold():
    idle = lambda share: timeline([("k", "conv", "s", 0, 100 * (1 - share))], 100)  # noqa: E731
    assert any("launch- or host-bound" in line for line in findings([idle(HOST_BOUND_IDLE_SHARE + 0.001)]))
    assert any("launch- or host-bound" in line for line in findings([idle(HOST_BOUND_IDLE_SHARE)]))
    assert not any("host-bound" in line for line in findings([idle(HOST_BOUND_IDLE_SHARE - 0.001)]))


def test_idle_in_a_graph_replay_is_kernel_gaps_not_host_bound_just_inside_and_outside_the_threshold():
    def idle(share, graph):
        t = timeline([("k", "conv", "s", 0, 100 * (1 - share))], 100)
        return Timeline(t.precision, 1, "torch", "test", t.spans, t.window_us, {"cuda_graph": graph})

    inside = finding_items([idle(HOST_BOUND_IDLE_SHARE, True)])
    assert [f.rule for f in inside][:1] == ["timeline_kernel_gaps"]
    assert "not host launches" in inside[0].message and "host-bound" not in inside[0].message
    assert not [f for f in finding_items([idle(HOST_BOUND_IDLE_SHARE - 0.001, True)]) if f.rule == "timeline_kernel_gaps"]
    # the same idle share timed eagerly is host-bound
    assert [f.rule for f in finding_items([idle(HOST_BOUND_IDLE_SHARE, False)])][:1] == ["timeline_host_bound"]


def test_fp16_casts_beyond_the_baseline_are_counted_and_timed():
    base = timeline([("k", "conv", "s", 0, 50), ("c0", "cast", "s", 50, 5)], 100)
    cand = timeline([("k", "conv", "s", 0, 20), ("c0", "cast", "s", 20, 5), ("c1", "cast", "s", 25, 8),
                     ("c2", "cast", "s", 33, 2)], 40, precision="fp16")
    assert added_casts(base, cand) == (2, pytest.approx(13))  # the two longest of fp16's three casts
    assert added_casts(cand, base) == (0, 0.0)
    assert any(line.startswith("fp16 added 2 casts over fp32, taking 32.5% of its iteration") for line in findings([base, cand]))
    # layout changes are counted the same way, and the words follow the count
    one_more = timeline([("k", "conv", "s", 0, 20), ("r", "reformat", "s", 20, 4)], 40, precision="fp16")
    assert "fp16 added 1 layout change (reformat) over fp32, taking 10.0% of its iteration (4.0 µs)" in findings([base, one_more])
    assert not any("layout change" in line for line in findings([base, cand]))


@pytest.mark.parametrize("name, op, kind", [
    ("sm90_xmma_fprop_implicit_gemm_f16f16", "", "conv"), ("ampere_sgemm_128x64_nn", "", "gemm"),
    ("Memcpy HtoD (Pageable -> Device)", "", "copy"), ("n3", "Cast", "cast"), ("ReorderOutput", "ReorderOutput", "reformat"),
    ("vectorized_elementwise_kernel", "", "elementwise"), ("mystery", "", "other"), ("x", "Conv", "conv"),
    # kernel names seen on the H200 (benchmarks/results/gpu_timeline-H200-2026-12-02): ATen's "nocast" and a
    # "broadcast" are no casts; cuDNN's layout kernels are reformats, its NHWC convolutions convolutions
    ("void at::native::elementwise_kernel<128, 2, at::native::gpu_kernel_impl_nocast<at::native::CUDAFunctor_add<float>",
     "", "elementwise"), ("broadcast_kernel", "", "other"),
    ("void at::native::vectorized_elementwise_kernel<8, at::native::float16_copy_kernel_cuda(at::", "", "cast"),
    ("void cudnn::engines_precompiled::nchwToNhwcKernel<__half, __half, float, false, true>", "", "reformat"),
    ("void convolve_common_engine_float_NHWC<float, float, 1024, 5, 5, 3, 3, 3, true>", "", "conv"),
    ("nvjet_sm90_hsh_64x128_64x8_4x2_h_bz_NNN", "", "gemm"), ("convert_layout_kernel", "", "reformat"),
])
def test_kernel_kinds(name, op, kind):
    assert kernel_kind(name, op) == kind


def test_trace_document_passes_the_format_check_and_bad_ones_do_not():
    t = timeline([("a", "conv", "stream 7", 0.5, 40.25), ("b", "copy", "stream 9", 41, 3)], 50)
    doc = json.loads(json.dumps(trace_document(t, "m")))
    check_trace(doc)
    xs = [e for e in doc["traceEvents"] if e["ph"] == "X"]
    assert [(e["name"], e["ts"], e["dur"]) for e in xs] == [("a", 0.5, 40.25), ("b", 41, 3)]
    assert {e["args"]["name"] for e in doc["traceEvents"] if e["name"] == "thread_name"} == {"stream 7", "stream 9"}
    for broken in ({"traceEvents": "x"}, {"traceEvents": [{"name": 1, "ph": "X", "pid": 1, "tid": 1, "ts": 0, "dur": 0}]},
                   {"traceEvents": [{"name": "a", "ph": "Q", "pid": 1, "tid": 1}]},
                   {"traceEvents": [{"name": "a", "ph": "X", "pid": "1", "tid": 1, "ts": 0, "dur": 1}]},
                   {"traceEvents": [{"name": "a", "ph": "X", "pid": 1, "tid": 1, "ts": 0, "dur": -1}]},
                   {"traceEvents": [{"name": "a", "ph": "X", "pid": 1, "tid": 1, "ts": float("nan"), "dur": 1}]},
                   {"traceEvents": [], "displayTimeUnit": "s"}):
        with pytest.raises(ValueError):
            check_trace(broken)


def test_ort_events_keep_only_the_last_run():
    events = [{"cat": "Session", "name": "model_run", "ts": 0, "dur": 100},
              {"cat": "Node", "name": "old_kernel_time", "ts": 10, "dur": 5, "tid": 1, "args": {"op_name": "Conv"}},
              {"cat": "Session", "name": "model_run", "ts": 200, "dur": 50},
              {"cat": "Node", "name": "conv1_kernel_time", "ts": 205, "dur": 20, "tid": 1, "args": {"op_name": "Conv"}},
              {"cat": "Node", "name": "InsertedPrecisionFreeCast_c_kernel_time", "ts": 230, "dur": 4, "tid": 2,
               "args": {"op_name": "Cast"}},
              {"cat": "Node", "name": "conv1_fence_before", "ts": 204, "dur": 0, "tid": 1}]
    t = from_ort_events(events, "fp16", 1, "onnxruntime")
    assert [(s.name, s.kind, s.lane, s.start_us, s.dur_us) for s in t.spans] == [
        ("conv1", "conv", "thread 1", 5, 20), ("c", "cast", "thread 2", 30, 4)]
    assert t.window_us == 50 and t.idle_share == pytest.approx(1 - 24 / 50)


def test_torch_trace_keeps_the_window_launches_and_labels_them_by_innermost_range():
    trace = {"traceEvents": [
        {"ph": "X", "name": "trtprof.timeline.iteration", "ts": 1000, "dur": 100, "cat": "user_annotation"},
        {"ph": "X", "name": "trtprof.layer/Conv_0", "ts": 1005, "dur": 20, "cat": "user_annotation"},
        {"ph": "X", "name": "cudaLaunchKernel", "ts": 1010, "dur": 2, "cat": "cuda_runtime", "args": {"correlation": 1}},
        {"ph": "X", "name": "cudaLaunchKernel", "ts": 900, "dur": 2, "cat": "cuda_runtime", "args": {"correlation": 2}},
        {"ph": "X", "name": "cudaMemcpyAsync", "ts": 1050, "dur": 2, "cat": "cuda_runtime", "args": {"correlation": 3}},
        {"ph": "X", "name": "implicit_gemm_fprop", "ts": 1020, "dur": 30, "cat": "kernel", "args": {"correlation": 1, "stream": 7}},
        {"ph": "X", "name": "earlier_kernel", "ts": 905, "dur": 30, "cat": "kernel", "args": {"correlation": 2, "stream": 7}},
        {"ph": "X", "name": "Memcpy DtoH", "ts": 1060, "dur": 10, "cat": "gpu_memcpy", "args": {"correlation": 3, "stream": 7}},
        # copies through a runtime the profiler does not hook (no known launch): kept by their own start
        {"ph": "X", "name": "Memcpy HtoD", "ts": 1001, "dur": 2, "cat": "gpu_memcpy", "args": {"stream": 7}},
        {"ph": "X", "name": "Memcpy late", "ts": 1300, "dur": 2, "cat": "gpu_memcpy", "args": {"stream": 7}},
    ]}
    t = from_torch_trace(trace, "fp16", 32, window="trtprof.timeline.iteration", backend="torch",
                         node_prefix="trtprof.layer/")
    assert [(s.name, s.kind, s.node, s.start_us, s.dur_us) for s in t.spans] == [
        ("Memcpy HtoD", "copy", None, 1, 2), ("implicit_gemm_fprop", "conv", "Conv_0", 20, 30),
        ("Memcpy DtoH", "copy", None, 60, 10)]
    assert t.window_us == 100 and t.busy_us() == 42 and t.backend == "torch"
    with pytest.raises(ValueError, match="no host range"):
        from_torch_trace(trace, "fp16", 32, window="other", backend="torch")


def test_layer_times_end_to_end_make_a_sequence_without_a_measured_idle():
    t = from_layer_times([("conv1", "Convolution", 0.5), ("cast", "Cast", 0.1)], "fp16", 8, "TensorRT IProfiler",
                         backend="tensorrt")
    assert [(s.start_us, s.dur_us) for s in t.spans] == [(0, 500), (500, 100)] and t.backend == "tensorrt"
    assert t.idle_share == 0 and t.settings == {"idle_measured": False}


def test_svg_puts_every_precision_on_one_scale():
    long = timeline([("k", "conv", "s", 0, 100)], 100)
    short = timeline([("k", "conv", "s", 0, 50)], 50, precision="fp16")
    svg = timeline_svg([long, short])
    assert svg.startswith("<svg") and svg.count("<title>k (conv)") == 2
    bars = [float(seg.split('width="')[1].split('"')[0]) for seg in svg.split("<rect")[1:] if "<title>k (conv)" in seg]
    assert bars[0] == pytest.approx(2 * bars[1])


def test_profile_timeline_through_the_cli(tmp_path, capsys):
    out = tmp_path / "layers.json"
    traces = tmp_path / "traces"
    rc = main(["profile", str(ZOO), "--engines", str(tmp_path / "engines"), "--out", str(out), "--timeline",
               "--trace-dir", str(traces), "--iterations", "2", "--warmup", "1", "--top", "3"])
    printed = capsys.readouterr().out
    assert rc == 0
    data = json.loads(out.read_text())
    assert [t["precision"] for t in data["timelines"]] == ["fp32", "fp16"]
    for t in data["timelines"]:
        parsed = Timeline.from_json(t)
        assert parsed.spans and 0 <= parsed.idle_share < 1 and parsed.busy_us() <= parsed.window_us + 1e-6
        assert t["settings"]["provider"] == "CPUExecutionProvider"
    assert "fp16 added" in printed and "top kernels by time" in printed
    files = sorted(p.name for p in traces.iterdir())
    assert files == ["light_squeezenet.fp16.b1.trace.json", "light_squeezenet.fp32.b1.trace.json"]
    for name in files:
        check_trace(json.loads((traces / name).read_text()))
    page = (tmp_path / "layers.timeline.html").read_text()
    assert "<svg" in page and "fp16" in page
    assert (tmp_path / "layers.timeline.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # a second run replaces trtprof's own files
    assert main(["profile", str(ZOO), "--engines", str(tmp_path / "engines"), "--out", str(out), "--timeline",
                 "--trace-dir", str(traces), "--iterations", "1", "--warmup", "0", "--top", "1"]) == 0


@pytest.mark.parametrize("victim", ["traces/light_squeezenet.fp16.b1.trace.json", "layers.timeline.png"])
def test_profile_timeline_never_overwrites_a_users_file(tmp_path, capsys, victim):
    path = tmp_path / victim
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("the user's own notes\n")
    before = tree_snapshot(tmp_path)
    rc = main(["profile", str(ZOO), "--engines", str(tmp_path / "engines"), "--out", str(tmp_path / "layers.json"),
               "--trace-dir", str(tmp_path / "traces"), "--iterations", "1", "--warmup", "0"])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and path.name in err[0]
    assert path.read_text() == "the user's own notes\n"
    assert not (tmp_path / "layers.json").exists()
    assert {k: v for k, v in tree_snapshot(tmp_path).items() if "engines" not in str(k)} == \
        {k: v for k, v in before.items() if "engines" not in str(k)}


def test_tensorrt_layer_profile_becomes_a_sequence_fake_engine():
    """Contract with TensorRT's per-layer profile and inspector types (fake values, real classes), as
    in test_layers: never run on TensorRT here. The layers lie end to end in the profiler's order."""
    from trtprof.layers.tensorrt import from_tensorrt
    from trtprof.layers.timeline import from_precision_profile

    from .test_layers import fake_tensorrt_profile

    prof, inspection = fake_tensorrt_profile()
    t = from_precision_profile(from_tensorrt(prof, inspection, "fp16", backend="tensorrt"))
    assert [(s.name, s.kind, s.start_us, s.dur_us) for s in t.spans] == [
        ("Reformatting CopyNode for Input Tensor 0 to conv1", "reformat", 0, 50), ("conv1 + relu1", "conv", 50, 500)]
    assert t.backend == "tensorrt" and t.batch_size == 8 and t.window_us == pytest.approx(550)


def test_a_gpu_timeline_of_host_launch_times_makes_no_idle_claim():
    """onnxruntime-cuda: ORT's session profiler times each node's launch on the host (no CUPTI in release
    builds), so 98 % "idle" there is not the GPU's; torch's CUPTI kernels keep the host-bound rule."""
    def idle(share, backend):
        t = timeline([("conv0", "conv", "s", 0, 100 * (1 - share))], 100)
        return Timeline(t.precision, 1, backend, "onnxruntime session profiling (host wall time per node)", t.spans,
                        t.window_us, {"cuda_graph": False})

    ort = finding_items([idle(0.98, "onnxruntime-cuda")])
    assert [f.rule for f in ort] == ["timeline_host_clock", "timeline_top_kernels"]
    assert "not its run on the GPU" in ort[0].message and "host launch time" in ort[1].message
    assert not any("host-bound" in f.message or "idle 98%" in f.message for f in ort)
    assert [f.rule for f in finding_items([idle(0.98, "torch")])][:1] == ["timeline_host_bound"]
    # the CPU backend's host times are its compute: the host-bound rule stays
    assert [f.rule for f in finding_items([idle(0.98, "onnxruntime")])][:1] == ["timeline_host_bound"]
