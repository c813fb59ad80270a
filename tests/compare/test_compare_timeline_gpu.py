"""compare --timeline on the torch backend (torch.profiler/CUPTI) on a real GPU, through the real CLI.

Structure only (no timing thresholds): each arm's timeline holds CUDA kernels on a stream, recorded as
the comparison timed it (CUDA-graph replay by default, eager with --eager: then the kernels carry their
ONNX node), with the event-timed compute of the profiled and an unprofiled iteration beside it; the
trace files pass the trace-event schema of test_compare_timeline."""
from __future__ import annotations

import importlib.util
import json

import pytest

from trtprof.cli import main
from trtprof.layers.timeline import Timeline, check_trace

from ..conftest import report_model, torch_gpu_marks
from .test_compare_timeline import validate_trace_file

pytestmark = torch_gpu_marks()


@pytest.mark.parametrize("launch", ["--cuda-graph", "--eager"])
def test_torch_compare_timeline(tmp_path, capsys, launch):
    out, traces = tmp_path / "compare.json", tmp_path / "traces"
    rc = main(["compare", str(report_model(tmp_path)), "--backend", "torch", "--precisions", "fp32,fp16",
               "--batch-sizes", "2", "--engines", str(tmp_path / "e"), "--out", str(out), "--time-budget-s", "20",
               "--min-loads", "2", "--timeline", "--trace-dir", str(traces), launch])
    printed = capsys.readouterr().out
    assert rc == 0
    block = json.loads(out.read_text())["timeline"]
    assert block["batch_size"] == 2 and [t["precision"] for t in block["timelines"]] == ["fp32", "fp16"]
    graph = launch == "--cuda-graph"
    for t in block["timelines"]:
        parsed = Timeline.from_json(t)
        assert parsed.backend == "torch" and parsed.of_kind("conv") and all(s.lane.startswith("stream ") for s in parsed.spans)
        assert t["settings"]["cuda_graph"] is graph and t["settings"]["copies"] is True
        assert t["settings"]["event_compute_ms_profiled"] > 0 and t["settings"]["event_compute_ms_unprofiled"] > 0
        labelled = [s for s in parsed.spans if s.node]
        if graph:  # a graph replay runs no Python: no ONNX node known
            assert not labelled
        elif t["settings"]["module"] == "onnx2torch":  # one submodule per ONNX node: the labels move over
            assert labelled and t["settings"]["onnx_node_labels"].startswith("from a second")
        else:  # torch.export's flat program: the labelled pass runs the conversion, whose kernels may differ
            assert labelled or t["settings"]["onnx_node_labels"].startswith("none: the labelled iteration ran other")
    assert "timeline: fp32: top kernels by time" in printed
    for path in sorted(traces.iterdir()):  # trtprof's own check always; the independent schema where installed
        # (the device machine has no jsonschema: skipping there would hide every assertion above)
        check_trace(validate_trace_file(path) if importlib.util.find_spec("jsonschema") else json.loads(path.read_text()))
    assert (tmp_path / "compare.timeline.png").read_bytes()[:4] == b"\x89PNG"
