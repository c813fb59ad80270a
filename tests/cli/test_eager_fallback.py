"""compare prints one line per arm whose CUDA graph capture failed (issue 33, deliverable 3): the run does
not fail, but eager times must not pass for graph replays. The launch record is the timing loop's, as the
H200's ViT-B/16 run wrote it (onnx2torch's host-side shape ops)."""
from __future__ import annotations

from trtprof.cli.compare import eager_fallback_lines
from trtprof.measure.timing import launch_notes

REASON = "RuntimeError: Cannot copy between CPU and CUDA tensors during CUDA graph capture"


def result(precision, batch, captured):
    """A result as a compare JSON holds it: the launch record per round, and the warning made from it."""
    info = {"mode": "cuda_graph"} if captured else {"mode": "eager", "capture_failed": REASON}
    return {"precision": precision, "batch_size": batch, "warnings": launch_notes(info),
            "device": {"first_round": {"launch": info}, "last_round": {"launch": info}}}


def test_one_line_per_arm_that_fell_back_naming_its_batch_sizes_and_the_reason():
    lines = eager_fallback_lines([result("fp32", 1, False), result("fp16", 1, True), result("fp32", 64, False)])
    assert lines == [f"fp32: ran eager at batch 1, 64: CUDA graph capture failed ({REASON})"]


def test_nothing_is_printed_when_every_arm_replayed_its_graph():
    assert eager_fallback_lines([result("fp32", 1, True), result("fp16", 1, True)]) == []
