"""GPU kernel times per ORT node (layers.ort_kernels): CUPTI's records attributed to the nodes of ORT's session
profile. Synthetic profiles and logs of known truth (every kernel's node is known), and a RECORDING FAKE of
the cupti module for the capture's contract; the real capture runs on the GPU (tests/layers/test_layers_gpu.py)."""
from __future__ import annotations

import dataclasses
import sys
import types

import pytest

from trtprof.diagnose import layer_rules as rules
from trtprof.layers import ort, ort_kernels
from trtprof.layers.ort_kernels import ActivityLog, GpuWork, NodeSpan
from trtprof.layers.table import LayerTable

ORT_START = 1_796_000_000_000_000_000  # ORT's profiling start, real-time ns
CUPTI_OFFSET = -1_796_000_123_456_789_000  # CUPTI's clock less the real-time clock
NODES = [("conv1", "Conv", 10), ("relu1", "Relu", 4), ("shape", "Shape", 2), ("conv2", "Conv", 12)]
GAP_US = 100  # host time between two nodes' compute functions (wide: a shifted launch lands in a gap)


def synthetic(runs: int = 3, warmup: int = 1, gap_us: int = GAP_US):
    """(ORT profile events, CUPTI log) of ``warmup + runs`` runs: each node's launches 2 µs into its compute
    function (the Shape node, on the CPU EP, launches nothing), its kernels 3 µs a launch on the GPU."""
    events, log, t = [], ActivityLog(), 50
    corr = 0
    for r in range(warmup + runs):
        run_start = t
        for name, op, dur in NODES:
            provider = "CPUExecutionProvider" if op == "Shape" else "CUDAExecutionProvider"
            events.append({"cat": "Node", "name": f"{name}_kernel_time", "ts": t, "dur": dur,
                           "args": {"op_name": op, "provider": provider}})
            kernels = {"Conv": ["sm90_xmma_fprop_implicit_gemm_f16f16", "nchwToNhwcKernel"], "Relu": ["elementwise"]}
            for i, kernel in enumerate(kernels.get(op, [])):
                corr += 1
                host = ORT_START + (t + 2 + i) * 1000
                log.launches[corr] = host + CUPTI_OFFSET
                gpu = 10**9 + corr * 10_000
                log.work.append(GpuWork(kernel, gpu, gpu + 3000 * (1 + (op == "Conv")), corr))
            t += dur + gap_us
        events.append({"cat": "Session", "name": "model_run", "ts": run_start, "dur": t - run_start})
        t += 500
    return events, log


def spans(events):
    return ort.node_spans(ort.profiled_node_events(events, 0)[0], ORT_START)


def runs(events):
    """The runs' windows as node spans (what profile_onnxruntime hands attribute())."""
    return [NodeSpan(("model_run", a), ORT_START + int(a * 1000), ORT_START + int(b * 1000))
            for a, b in ort.profiled_node_events(events, 0)[1]]


@pytest.mark.parametrize("error_ns", [0, 700, -19_000, 300_000, ort_kernels.SEARCH_NS - 250])
def test_attribution_recovers_every_kernels_node_within_the_search(error_ns):
    """A read offset off by up to SEARCH_NS (just inside): every kernel lands on its own node, the right clock
    is chosen over a wrong one, and the correction found undoes the error to ORT's microsecond rounding."""
    events, log = synthetic()
    got = ort_kernels.attribute(spans(events), log, {"realtime": CUPTI_OFFSET + error_ns,
                                                     "monotonic": CUPTI_OFFSET + 10**15}, runs(events))
    assert got.clock == "realtime" and got.attributed_share == 1.0 and not got.unattributed
    # the fit stops at the edge of the offsets that hold every launch nearest the read one: the launches sit
    # 2-3 µs into their nodes here, so within 5 µs of the truth
    assert abs(got.correction_ns + error_ns) <= 5_000
    by_node = {k[0]: {w.name for w in v} for k, v in got.per_node.items() if v}
    assert by_node == {"conv1_kernel_time": {"sm90_xmma_fprop_implicit_gemm_f16f16", "nchwToNhwcKernel"},
                       "relu1_kernel_time": {"elementwise"},
                       "conv2_kernel_time": {"sm90_xmma_fprop_implicit_gemm_f16f16", "nchwToNhwcKernel"}}


def test_a_read_offset_off_by_more_than_the_search_is_refused():
    """Just outside the search (SEARCH_NS + 30 µs): the truth is out of reach; what the search can reach
    drops the calls of at least one run outside every run, so less than ATTRIBUTED_MIN of the work is tied
    to a node and the profile falls back to host times."""
    events, log = synthetic()
    got = ort_kernels.attribute(spans(events), log, {"realtime": CUPTI_OFFSET + ort_kernels.SEARCH_NS + 30_000},
                                runs(events))
    assert got.attributed_share < ort_kernels.ATTRIBUTED_MIN


def test_nodes_a_microsecond_apart_take_the_read_offset_and_a_far_read_stays_within_its_run():
    """Launch-bound: nodes 1 µs apart, so a shift by part of a node holds every launch too. With the read
    offset right, each kernel lands on its own node. With it 300 µs off, the run windows still bring the fit
    back into the right run (a shift by a run loses the edge run's calls), every kernel is tied to a node
    of its run, and the error left is under one node's length: at node boundaries such a profile may
    give a launch to its neighbour, which is why the correction is recorded with every profile."""
    events, log = synthetic(runs=5, gap_us=1)
    exact = ort_kernels.attribute(spans(events), log, {"realtime": CUPTI_OFFSET}, runs(events))
    by_node = {k[0]: sorted(w.name for w in v) for k, v in exact.per_node.items() if v}
    assert exact.correction_ns == 0 and by_node["relu1_kernel_time"] == ["elementwise"]
    assert "shape_kernel_time" not in by_node
    far = ort_kernels.attribute(spans(events), log, {"realtime": CUPTI_OFFSET + 300_000}, runs(events))
    assert far.attributed_share == 1.0 and abs(far.correction_ns + 300_000) <= 10_000


def test_the_sessions_own_copies_are_kept_apart_not_counted_unattributed():
    events, log = synthetic()
    log.work.append(GpuWork("memcpy HtoD", 5, 9_000_005, 10_000))  # launched where no node runs
    log.launches[10_000] = ORT_START + 100 * 1000 + CUPTI_OFFSET  # inside the first run, between two nodes
    got = ort_kernels.attribute(spans(events), log, {"realtime": CUPTI_OFFSET}, runs(events))
    assert got.attributed_share == 1.0 and [w.name for w in got.session_copies] == ["memcpy HtoD"]


def test_parse_profile_with_gpu_work_gives_kernel_times_per_node_and_leaves_warmup_out():
    events, log = synthetic(runs=3, warmup=1)
    gpu = ort_kernels.attribute(spans(events), log, {"realtime": CUPTI_OFFSET}, runs(events))
    layers, total = ort.parse_profile(events, 3, gpu=gpu)
    rows = {layer.name: layer for layer in layers}
    assert rows["conv1"].median_ms == pytest.approx(0.006 + 0.006)  # two 6-µs kernels
    assert rows["relu1"].median_ms == pytest.approx(0.003)
    assert rows["shape"].median_ms == 0.0  # the CPU node launched nothing: no GPU time
    assert total == pytest.approx(0.012 * 2 + 0.003)
    conv = {k.name.split(" (")[0]: k for k in rows["conv1"].kernels}
    assert conv["sm90_xmma_fprop_implicit_gemm_f16f16"].tensor_core is True
    assert conv["nchwToNhwcKernel"].tensor_core is False and conv["nchwToNhwcKernel"].calls == 1
    # the same profile without CUPTI: host launch times (the node's dur), one pseudo-kernel named by the op
    host, _ = ort.parse_profile(events, 3)
    assert {layer.name: layer.median_ms for layer in host}["conv1"] == pytest.approx(0.010)


def test_the_warmup_runs_work_is_outside_every_profiled_node():
    events, log = synthetic(runs=2, warmup=1)
    gpu = ort_kernels.attribute(spans(events), log, {"realtime": CUPTI_OFFSET}, runs(events))
    profiled = {k for k in gpu.per_node}
    kept = {(str(e["name"]), float(e["ts"])) for e in ort.profiled_node_events(events, 2)[0]}
    assert kept < profiled  # node_spans of profiled_node_events(…, 0) hold the warm-up run's nodes too
    layers, _ = ort.parse_profile(events, 2, gpu=gpu)
    assert {k.calls for layer in layers for k in layer.kernels} == {1}


def test_clock_offsets_takes_the_tightest_bracket():
    """Three (clock, CUPTI, clock) readings: the 20-ns bracket is kept, against its middle."""
    clock = iter([0, 10_000, 5_000, 5_020, 9_000, 9_900])
    cupti = iter([7_000, 12_000, 15_000])
    assert ort_kernels.clock_offsets(lambda: next(cupti), {"c": lambda: next(clock)}, reads=3) == {"c": 12_000 - 5_010}


class RecordingCupti:
    """A RECORDING FAKE of ``cupti.cupti``: what capture() asks of it, and records it hands back at flush."""

    class ActivityKind:
        CONCURRENT_KERNEL, MEMCPY, MEMSET, RUNTIME, DRIVER = "kernel", "memcpy", "memset", "runtime", "driver"

    def __init__(self, records):
        self.calls, self.records, self.callbacks = [], records, None

    def activity_register_callbacks(self, requested, completed):
        self.calls.append("register")
        self.callbacks = (requested, completed)

    def activity_enable(self, kind):
        self.calls.append(f"enable {kind}")

    def activity_disable(self, kind):
        self.calls.append(f"disable {kind}")

    def activity_flush_all(self, flag):
        self.calls.append(f"flush {flag}")
        self.callbacks[1](self.records)

    def get_timestamp(self):
        return 42


def test_capture_registers_once_enables_the_five_kinds_and_flushes_into_the_open_log(monkeypatch):
    monkeypatch.setattr(ort_kernels._Recorder, "registered", False)
    kernel = types.SimpleNamespace(start=10, end=20, correlation_id=7, name="gemm")
    copy = types.SimpleNamespace(start=30, end=35, correlation_id=8, copy_kind=1)
    api = types.SimpleNamespace(start=5, end=6, correlation_id=7, cbid=211)
    fake = RecordingCupti([kernel, copy, api])
    with ort_kernels.capture(fake) as log:
        pass
    kinds = ["kernel", "memcpy", "memset", "runtime", "driver"]
    assert fake.calls == ["register", *[f"enable {k}" for k in kinds], "flush 1", *[f"disable {k}" for k in kinds]]
    assert log.work == [GpuWork("gemm", 10, 20, 7), GpuWork("memcpy HtoD", 30, 35, 8)] and log.launches == {7: 5}
    assert set(log.clock_offsets) == {"realtime", "monotonic"} and set(log.clock_drift_ns) == {"realtime", "monotonic"}
    with ort_kernels.capture(fake) as second:
        pass
    assert fake.calls.count("register") == 1 and second is not log and len(second.work) == 2
    fake.callbacks[1]([kernel])  # records delivered with no capture open go nowhere
    assert len(second.work) == 2


def test_without_cupti_python_the_profile_says_which_extra_gives_gpu_times(monkeypatch):
    monkeypatch.setitem(sys.modules, "cupti", None)
    module, why = ort.kernel_capture("cuda")
    assert module is None and "trtprof[cupti]" in why and "host launch times" in why
    assert ort.kernel_capture("cpu") == (None, None)


def _profile(precision, times, kernel_times):
    from trtprof.layers.table import COMPUTE, KernelTime, LayerTiming, PrecisionProfile

    layers = tuple(LayerTiming(n, "Conv", COMPUTE, ms, (KernelTime("k", ms, 1, True),)) for n, ms in times.items())
    return PrecisionProfile(precision, "onnxruntime-cuda", "src", 8, 20, layers, sum(times.values()),
                            kernel_times=kernel_times)


def test_onnxruntime_cuda_profiles_with_kernel_times_get_the_time_share_rules():
    """A profile that says its times are GPU kernels (CUPTI captured them) is read as such: the slower-layer
    and idle-gap rules run, no host-clock finding; one that does not say so keeps the host-clock finding."""
    def findings(kernel_times):
        t = LayerTable(8, ("fp32", "fp16"), {"fp32": _profile("fp32", {"a": 1.0, "b": 1.0}, kernel_times),
                                             "fp16": _profile("fp16", {"a": 2.0, "b": 0.5}, kernel_times)})
        return [f.rule for f in rules.layer_findings(t, {}, "fp16", {"fp16": 25.0})]

    assert findings(None) == ["layer_times_host_clock"]
    assert "fp16_slower_layers" in findings(True) and "host_bound" in findings(True)
    assert "layer_times_host_clock" not in findings(True)
    assert dataclasses.replace(_profile("fp16", {"a": 1.0}, True)).to_json()["kernel_times"] is True


def test_a_table_never_divides_a_gpu_time_by_a_host_time():
    """On the H200 the report net's fp16 profile got GPU kernel times and its fp32 profile fell back to host
    times (72 % tied): the table read 'conv3 494.60× slower'. one_clock shows both on the host clock then,
    with a note; two GPU profiles, or two host ones, stay as they are."""
    from trtprof.layers.profile import one_clock

    gpu16 = dataclasses.replace(_profile("fp16", {"a": 20.0}, True), host_fallback=_profile("fp16", {"a": 0.03}, None))
    host32 = _profile("fp32", {"a": 0.04}, None)
    mixed = one_clock({"fp32": host32, "fp16": gpu16})
    assert mixed["fp16"].kernel_times is None and mixed["fp16"].layers[0].median_ms == 0.03
    assert "set aside" in mixed["fp16"].notes[-1] and mixed["fp32"] is host32
    gpu32 = dataclasses.replace(_profile("fp32", {"a": 9.0}, True), host_fallback=host32)
    assert one_clock({"fp32": gpu32, "fp16": gpu16})["fp16"] is gpu16


def test_kernel_names_are_shown_demangled_as_nsight_shows_them():
    """CUPTI records mangled names (the H200's report-net profile showed `_ZN11onnxruntime4cuda17Transpose…`);
    the table shows them as Nsight and Kineto do; a plain or unparsable name stays as recorded."""
    pytest.importorskip("cxxfilt")  # the test extra installs it
    assert (ort_kernels.demangle("_ZN11onnxruntime4cuda17Transpose3DKernelIsLj32EEEvlllPKT_PS2_")
            == "void onnxruntime::cuda::Transpose3DKernel<short, 32u>(long, long, long, short const*, short*)")
    assert ort_kernels.demangle("sm90_xmma_fprop_implicit_gemm_f16f16") == "sm90_xmma_fprop_implicit_gemm_f16f16"
    assert ort_kernels.demangle("_Z23implicit_convolve_sgemmI6__halfS0_") == "_Z23implicit_convolve_sgemmI6__halfS0_"
    events, log = synthetic()
    mangled = "_ZN11onnxruntime4cuda17Transpose3DKernelIsLj32EEEvlllPKT_PS2_"
    log.work = [dataclasses.replace(w, name=mangled) if w.name == "elementwise" else w for w in log.work]
    gpu = ort_kernels.attribute(spans(events), log, {"realtime": CUPTI_OFFSET}, runs(events))
    layers, _ = ort.parse_profile(events, 3, gpu=gpu)
    names = [k.name for layer in layers for k in layer.kernels]
    assert "void onnxruntime::cuda::Transpose3DKernel<short, 32u>(long, long, long, short const*, short*) " \
        "(CUDAExecutionProvider)" in names and not any(n.startswith("_Z") for n in names)


def test_the_gpu_timeline_of_one_run_is_its_kernels_labelled_by_node():
    """--timeline on onnxruntime-cuda with CUPTI: the last run's GPU work on the GPU's clock, each kernel
    with the node that launched it; the host-clock finding is gone; a run that cannot be tied gives None
    (the caller falls back to the host-clock timeline)."""
    from trtprof.layers import timeline as tl

    events, log = synthetic(runs=1, warmup=0)  # the capture holds the last run only
    log.clock_offsets = {"realtime": CUPTI_OFFSET}
    t = tl.from_ort_kernels(events, log, ORT_START, "fp16", 8, "onnxruntime-cuda", {"provider": "CUDAExecutionProvider"})
    assert t is not None and t.settings["kernel_times"] is True and {s.lane for s in t.spans} == {"GPU"}
    assert [(s.node, s.name) for s in t.spans] == [
        ("conv1", "sm90_xmma_fprop_implicit_gemm_f16f16"), ("conv1", "nchwToNhwcKernel"), ("relu1", "elementwise"),
        ("conv2", "sm90_xmma_fprop_implicit_gemm_f16f16"), ("conv2", "nchwToNhwcKernel")]
    assert not tl.host_clock(t)
    assert "timeline_host_clock" not in {f.rule for f in tl.finding_items([t])}
    log.clock_offsets = {"realtime": CUPTI_OFFSET + ort_kernels.SEARCH_NS + 400_000}
    assert tl.from_ort_kernels(events, log, ORT_START, "fp16", 8, "onnxruntime-cuda", {}) is None


def test_the_text_table_says_which_clock_and_each_profiles_notes():
    """The H200 run printed nothing of the fp32 profile's fallback note: the text table now shows each
    profile's notes and, where a profile has GPU kernel times, that it has."""
    from trtprof.layers.table import format_table

    gpu16 = dataclasses.replace(_profile("fp16", {"a": 2.0}, True), source="CUPTI …")
    host32 = dataclasses.replace(_profile("fp32", {"a": 1.0}, None), notes=("per-node times are host launch times: x",))
    text = format_table(LayerTable(8, ("fp32", "fp16"), {"fp32": host32, "fp16": gpu16}).to_json())
    assert "note: fp16: GPU kernel time per layer (CUPTI …)" in text
    assert "note (fp32): per-node times are host launch times: x" in text
    plain = format_table(LayerTable(8, ("fp32",), {"fp32": _profile("fp32", {"a": 1.0}, None)}).to_json())
    assert "GPU kernel time" not in plain and "note (" not in plain


def test_the_profiling_session_fixes_the_dims_the_timed_session_fixed(tmp_path):
    """On ONNX Runtime's CPU provider, for real: the dims TimedSession names are fixed on the profiling
    session (ORT folds the shape arithmetic then) and recorded in the profile's config."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [helper.make_node("Shape", ["x"], ["s"]), helper.make_node("Reshape", ["x", "s"], ["r"]),
         helper.make_node("Relu", ["r"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4])])
    path = tmp_path / "m.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    rec = types.SimpleNamespace(artifact_path=str(path), precision="fp32", backend="onnxruntime")
    feeds = {"x": np.ones((3, 4), np.float32)}
    fixed = ort.profile_onnxruntime(rec, feeds, iterations=2, warmup=1, batch_size=3,
                                    timed=ort.TimedSession(free_dims={"N": 3}))
    free = ort.profile_onnxruntime(rec, feeds, iterations=2, warmup=1, batch_size=3)
    assert fixed.config["free_dimension_overrides"] == {"N": 3} and "free_dimension_overrides" not in free.config
    # with N fixed ORT folds Shape → Reshape away: the profiled nodes are fewer
    assert len(fixed.layers) < len(free.layers)


def _with_unattributed(share_of_work: float):
    """The synthetic profile with one kernel launched between two nodes of the last run, sized to be
    ``share_of_work`` of all the GPU's work (its launch is inside the run, outside every node)."""
    events, log = synthetic(runs=3, warmup=0)
    log.clock_offsets = {"realtime": CUPTI_OFFSET}
    tied = sum(w.duration_ns for w in log.work)
    extra = round(tied * share_of_work / (1 - share_of_work))
    last_run = max(float(e["ts"]) for e in events if e.get("name") == "model_run")
    log.work.append(GpuWork("stray_kernel", 0, extra, 99_999))
    log.launches[99_999] = ORT_START + int((last_run + 60) * 1000) + CUPTI_OFFSET  # in the gap after conv1
    return events, log


@pytest.mark.parametrize("stray, kept", [(0.049, True), (0.051, False)])
def test_kernel_times_are_kept_from_95_percent_tied_just_inside_and_refused_just_outside(stray, kept):
    events, log = _with_unattributed(stray)
    config, notes = {}, []
    gpu = ort._attribution(events, 3, ORT_START, log, config, notes)
    assert (gpu is not None) is kept
    assert config["attributed_share"] == pytest.approx(1 - stray, abs=1e-3)
    assert bool(notes) is not kept and (kept or "under 95%" in notes[0])


@pytest.mark.parametrize("strays, found", [(15, True), (16, False)])
def test_a_clock_that_puts_half_the_api_calls_in_the_runs_is_tried_and_under_half_is_not(strays, found):
    """15 launching calls inside the runs; launching strays a second before them (no search reaches them; their
    work takes no GPU time): 15 strays leave exactly half the launching calls inside (RUNS_MIN, tried), 16 leave
    less (the clock is skipped: nothing tied)."""
    events, log = synthetic(runs=3, warmup=0)
    for i in range(strays):
        log.launches[50_000 + i] = ORT_START - 10**9 + i * 1000 + CUPTI_OFFSET
        log.work.append(GpuWork("stray", 5, 5, 50_000 + i))
    got = ort_kernels.attribute(spans(events), log, {"realtime": CUPTI_OFFSET}, runs(events))
    assert (got.attributed_share == 1.0) is found and (got.clock == "realtime") is found


def test_where_cupti_refuses_to_record_the_work_runs_uncaptured_and_the_profile_says_why(monkeypatch):
    """Another profiler holding CUPTI (torch.profiler in the same process) or a platform without it: the
    enabling fails, what was enabled is disabled again, the profiled runs still run (once), and the reason
    becomes the profile's note instead of a traceback."""
    monkeypatch.setattr(ort_kernels._Recorder, "registered", False)

    class Refusing(RecordingCupti):
        def activity_enable(self, kind):
            if kind == "memset":
                raise RuntimeError("CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED")
            super().activity_enable(kind)

    fake, ran = Refusing([]), []
    log, why = ort_kernels.run_captured(fake, lambda: ran.append(1))
    assert log is None and ran == [1] and "MULTIPLE_SUBSCRIBERS" in why and "host launch times" in why
    assert fake.calls[-2:] == ["disable kernel", "disable memcpy"]
    assert ort_kernels.run_captured(None, lambda: ran.append(2)) == (None, None) and ran == [1, 2]


def test_a_cupti_python_whose_library_will_not_load_gives_host_times_and_the_reason(monkeypatch):
    def broken():
        raise RuntimeError("libcupti.so.13: cannot open shared object file")

    monkeypatch.setattr(ort_kernels, "import_cupti", broken)
    module, why = ort.kernel_capture("cuda")
    assert module is None and "cannot load CUPTI" in why and "libcupti.so.13" in why


def _kernel_profile(precision, kernels, kernel_times):
    """FAKE profile (named so): per layer its kernels, (name, GPU ms, tensor cores) — the shapes CUPTI gave on the
    H200 for the report net (fp16 convs on implicit_convolve_sgemm<__half>, a bias kernel whose name does not tell)."""
    from trtprof.layers.table import COMPUTE, KernelTime, LayerTiming, PrecisionProfile

    layers = tuple(LayerTiming(n, "Conv", COMPUTE, sum(ms for _, ms, _ in ks),
                               tuple(KernelTime(k, ms, 1, tc) for k, ms, tc in ks)) for n, ks in kernels.items())
    return PrecisionProfile(precision, "onnxruntime-cuda", "src", 10, 20, layers, None, kernel_times=kernel_times)


REPORT_GRAPH = {f"conv{i}": {"op_type": "Conv", "flops": 100,
                             "tensor_core": {"eligible": False, "reasons": ["input channels 3", "output channels 3"]}}
                for i in range(2)}
SGEMM = "void implicit_convolve_sgemm<__half, __half, 128, 6, 7, 3, 3, 5, 1, false, false, true>(int, int) (CUDAExecutionProvider)"
BIAS = "void op_generic_tensor_kernel<4, __half, float, __half, 256> (CUDAExecutionProvider)"


def _host_clock_table(fp16_kernels):
    """fp32 only on the host's clock (its GPU work under the tie bar), fp16 with GPU kernels: one_clock shows both on
    the host clock and keeps fp16's GPU profile as the twin."""
    from trtprof.layers.profile import one_clock

    host16 = _kernel_profile("fp16", {n: [("Conv (CUDAExecutionProvider)", 0.05, None)] for n in fp16_kernels}, None)
    gpu16 = dataclasses.replace(_kernel_profile("fp16", fp16_kernels, True), host_fallback=host16)
    host32 = _kernel_profile("fp32", {n: [("Conv (CUDAExecutionProvider)", 0.04, None)] for n in fp16_kernels}, None)
    return LayerTable(10, ("fp32", "fp16"), one_clock({"fp32": host32, "fp16": gpu16}), graph=REPORT_GRAPH), gpu16


def test_kernels_set_aside_by_one_clock_still_name_the_cuda_core_kernels():
    """The report net on the H200: fp32 tied 84-92 % (host times shown), fp16 tied 100 %. The table compares host
    times, but fp16's kernels (their names: CUDA-core implicit_convolve_sgemm) are still evidence for the
    tensor-core finding; the host-clock finding says the GPU times were captured and set aside."""
    table, gpu16 = _host_clock_table({"conv0": [(SGEMM, 14.0, False), (BIAS, 0.01, None)], "conv1": [(SGEMM, 14.8, False)]})
    assert table.profiles["fp16"].gpu_twin is gpu16 and table.profiles["fp16"].kernel_times is None
    assert table.gpu_kernels("fp16")["conv0"][0].name == SGEMM and table.gpu_total_ms("fp16") == pytest.approx(28.81)
    assert table.gpu_kernels("fp32")["conv0"][0].tensor_core is None  # no twin: the host profile's own rows
    found = {f.rule: f for f in rules.layer_findings(table, REPORT_GRAPH, "fp16")}
    tc = found["tensor_core_ineligible"]
    assert "their fp16 kernels use no tensor cores: 2 layers ran on CUDA-core kernels, none on a tensor-core one" in tc.message
    assert "implicit_convolve_sgemm<…>" in tc.message and "100% of fp16's kernel time" in tc.message
    assert tc.evidence["basis"].startswith("counted FLOPs")  # no host-time shares claimed
    assert set(tc.evidence["kernels"]["cuda_core_layers"]) == {"conv0", "conv1"}
    assert "`--what-if keep-fp32`" in tc.message and "`--what-if pad-channels`" in tc.message
    assert "captured but set aside" in found["layer_times_host_clock"].message


def test_a_tensor_core_kernel_or_an_unknown_main_kernel_gives_no_kernel_claim():
    """Just outside the claim: one flagged layer that ran a tensor-core kernel (then the dims did not decide its
    kernel), or whose main kernel's name does not tell (cuBLASLt's nvjet): the finding stands on the dims alone."""
    for kernels in ({"conv0": [(SGEMM, 14.0, False)], "conv1": [("sm90_xmma_fprop_implicit_gemm_f16f16", 1.0, True)]},
                    {"conv0": [("nvjet_sm90_hsh_256x128", 14.0, None), (SGEMM, 0.1, False)]}):
        table, _ = _host_clock_table(kernels)
        tc = rules.tensor_core_ineligible(REPORT_GRAPH, "fp16", None, kernels=table)
        assert "kernels" not in tc.evidence and "use no tensor cores" not in tc.message
    # just inside: the main kernel is CUDA-core, an unknown small one beside it does not decide
    table, _ = _host_clock_table({"conv0": [(SGEMM, 14.0, False), ("nvjet_small", 0.1, None)]})
    assert "use no tensor cores" in rules.tensor_core_ineligible(REPORT_GRAPH, "fp16", None, kernels=table).message


def test_short_kernel_names_drop_void_templates_parameters_and_the_provider():
    assert rules.short_kernel(SGEMM) == "implicit_convolve_sgemm<…>"
    assert rules.short_kernel("sm80_xmma_fprop_implicit_gemm_indexed_f32f32_f32f32_f32_nchwkcrs_nchw_tilesize32x32x8"
                              "_stage1_warpsize4x1x1_g1 (CUDAExecutionProvider)").endswith("…")
    assert rules.short_kernel("elu_kernel") == "elu_kernel"


@pytest.mark.parametrize("trailing", [0, 1, 5])
def test_calls_that_launch_nothing_just_after_a_run_do_not_move_the_fit(trailing):
    """ORT makes API calls that launch no work (device queries, its stream's synchronisation) just after its
    model_run window closes. On the H200 the report net's fp32 profile (few kernels a run) had the fit move
    24.25 µs to hold such calls in the windows and tie 91.9 % of the GPU's work. Counted by the calls that launched
    work, the read offset stays and every kernel is tied, however many such calls trail each run."""
    events, log = synthetic(runs=3, warmup=0)
    run_ends = [float(e["ts"]) + float(e["dur"]) for e in events if e.get("name") == "model_run"]
    corr = 70_000
    for end in run_ends:
        for k in range(trailing):
            corr += 1
            log.launches[corr] = ORT_START + int((end + 3 + k) * 1000) + CUPTI_OFFSET  # no work record: a sync
    got = ort_kernels.attribute(spans(events), log, {"realtime": CUPTI_OFFSET}, runs(events))
    assert got.attributed_share == 1.0 and got.correction_ns == 0, (got.attributed_share, got.correction_ns)


def test_a_dumped_attribution_replays_to_the_same_answer(tmp_path, monkeypatch):
    """TRTPROF_CUPTI_DUMP: what attribute() was given is written as JSON and read back to the same fit and split
    (a fit seen to fail on a GPU replayed on the CPU); without the variable nothing is written."""
    events, log = synthetic()
    nodes, windows = spans(events), runs(events)
    ort_kernels.dump_inputs(nodes, windows, log)
    assert not list(tmp_path.iterdir())
    monkeypatch.setenv(ort_kernels.DUMP_ENV, str(tmp_path / "d"))
    ort_kernels.dump_inputs(nodes, windows, log)
    (path,) = (tmp_path / "d").iterdir()
    nodes2, windows2, log2 = ort_kernels.load_inputs(str(path))
    assert nodes2 == nodes and windows2 == windows and log2 == log
    assert ort_kernels.attribute(nodes2, log2, runs=windows2) == ort_kernels.attribute(nodes, log, runs=windows)


def test_a_real_capture_whose_session_copies_pulled_the_fit_is_tied_at_the_read_offset():
    """A real capture (H200, 2026-12-03, TRTPROF_CUPTI_DUMP of `trtprof profile` on the report net, fp32 at batch 10,
    10 runs): 20 of its 160 pieces of GPU work are the session's own input/output copies, outside every node. Counted
    in the fit they moved it 15 µs off the read offset and 85.6 % of the work was tied; the fit on kernel launches
    keeps the read offset, every kernel lands in a node, and the copies stay the session's."""
    from pathlib import Path

    nodes, windows, log = ort_kernels.load_inputs(str(Path(__file__).parent / "cupti" / "report-net-fp32-b10-h200.json.gz"))
    got = ort_kernels.attribute(nodes, log, runs=windows)
    assert got.correction_ns == 0 and got.attributed_share == 1.0 and not got.unattributed
    assert len(got.session_copies) == 20 and all(ort_kernels.is_copy(w) for w in got.session_copies)
    convs = {k[0] for k, v in got.per_node.items() if any("fprop" in w.name or "gemm" in w.name for w in v)}
    assert {c.split("_kernel_time")[0] for c in convs} >= {"conv1", "conv2", "conv3"}, convs


def test_the_host_clock_finding_names_why_there_are_no_gpu_times():
    """Three reasons, each its own words: set aside for another precision (fp16 here, its twin kept), its own capture
    under the tie bar (fp32 with attributed_share 0.10, as a GPU run showed), no capture at all (install the extra)."""
    table, _ = _host_clock_table({"conv0": [(SGEMM, 14.0, False)]})
    assert "captured but set aside" in rules.host_clock(table, "fp16").message
    untied = dataclasses.replace(table.profiles["fp32"], config={"attributed_share": 0.1})
    table2 = LayerTable(10, ("fp32", "fp16"), {"fp32": untied, "fp16": table.profiles["fp16"]}, graph=REPORT_GRAPH)
    msg = rules.host_clock(table2, "fp32").message
    assert "captured (CUPTI) but only 10% of the GPU's work could be tied to a node" in msg and "pip install" not in msg
    msg = rules.host_clock(table, "fp32").message  # fp32's FAKE profile: no capture recorded
    assert "pip install 'trtprof[cupti]'" in msg and "captured" not in msg
