"""convert.fp16range under compare's budget (issue 44 #2): keep-lists the build checked are not built again,
the build's own analysis is reused where it is the same one, and a ``Deadline`` (a fake clock here) bounds
the runs and the checks, each part said as it begins."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from trtprof.convert import fp16range as fr  # noqa: E402

from .test_edges_fp16 import _negs  # noqa: E402  (one chain of Neg nodes for both files)


class TickClock:
    """Fake (named so): every read returns the next tick (1, 2, 3, …)."""

    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        self.t += 1.0
        return self.t


def _analysis(n: int) -> fr.RangeAnalysis:
    over = [fr.RangeFinding(fr.OVERFLOW, f"t{i}", f"n{i}", "Neg", 1e6, (f"n{i}",)) for i in range(n)]
    return fr.RangeAnalysis(findings=tuple(over), float_tensors=n + 1, analysed=n + 1)


@pytest.mark.parametrize("at, runs", [(2.0, 3), (1.99, 2)])
def test_no_run_after_the_first_starts_past_the_deadline(at, runs):
    """Four runs (one tensor each); the clock reads 1, 2, 3 before runs 2, 3, 4. A deadline at 2.0 (just
    inside: 2 is not past it) lets runs 2 and 3 start and stops run 4; at 1.99 (just outside) run 3 is stopped."""
    said: list[str] = []
    deadline = fr.Deadline(at=at, clock=TickClock(), say=said.append)
    analysis = fr.analyze(_negs(4), {"x": np.ones(2, np.float32)}, max_run_elements=2, max_runs=8, deadline=deadline)
    assert analysis.runs == 4 and analysis.analysed == runs
    assert analysis.stopped == f"{runs} of 4 runs, {runs} of 4 float tensors analysed"
    assert "cut short by the time budget" in analysis.summary() and analysis.to_json()["stopped"]
    assert said and said[0].startswith("FP16 range analysis of the FP32 model: 4 float tensors in 4 runs")


def test_without_a_deadline_every_run_happens():
    analysis = fr.analyze(_negs(4), {"x": np.ones(2, np.float32)}, max_run_elements=2, max_runs=8)
    assert analysis.analysed == 4 and analysis.stopped == "" and analysis.to_json()["stopped"] is None


def test_keep_lists_the_build_checked_are_not_built_again(monkeypatch):
    """The checks one analysis made (its JSON, as a build records it) are handed to the next: it builds none."""
    model = _negs(4)
    first = fr.check_suggestions(model, _analysis(3), None)
    assert [f.built for f in first.findings] == [True, True, True]
    known = fr.recorded_checks(first.to_json(), None)
    assert len(known) == 4  # the combined keep-list and the three findings'
    built: list = []
    monkeypatch.setattr(fr, "build_error", lambda *a, **k: built.append(a) or "")
    again = fr.check_suggestions(model, _analysis(3), None, known=known)
    assert built == [] and [f.built for f in again.findings] == [True, True, True]
    assert again.suggested_option == first.suggested_option
    fr.check_suggestions(model, _analysis(4), None, known=known)  # one the build did not check: built
    assert len(built) == 2  # the new combined keep-list and n3's


def test_a_failed_check_is_remembered_as_failed(monkeypatch):
    model = _negs(3)
    monkeypatch.setattr(fr, "build_error", lambda m, nodes, ops=(): "refused" if "n1" in nodes else "")
    first = fr.check_suggestions(model, _analysis(2), None)
    known = fr.recorded_checks(first.to_json(), None)
    monkeypatch.setattr(fr, "build_error", lambda *a, **k: pytest.fail("built again"))
    again = fr.check_suggestions(model, _analysis(2), None, known=known)
    assert [f.built for f in again.findings] == [True, False] and again.suggestion_error == "refused"


@pytest.mark.parametrize("at, checked", [(1.0, 1), (0.99, 0)])
def test_no_keep_list_check_starts_past_the_deadline(at, checked, monkeypatch):
    """The clock reads 1, 2, … before each check: a deadline at 1.0 lets the first (the combined keep-list)
    be built and no other; at 0.99 none. What was left is said, and an unchecked combined keep-list is not
    suggested."""
    monkeypatch.setattr(fr, "build_error", lambda *a, **k: "")
    said: list[str] = []
    out = fr.check_suggestions(_negs(4), _analysis(3), None,
                               deadline=fr.Deadline(at=at, clock=TickClock(), say=said.append))
    assert [f.built for f in out.findings] == [None, None, None]
    assert out.stopped == f"{4 - checked} keep-lists not checked"
    assert (out.suggested_option != "") is bool(checked)
    assert said == ["checking that up to 4 keep-lists build (0 already checked by the build)"]


def _record(meta: dict, inputs) -> object:
    """A fake engine record (named so): what fp16range reads of an fp16 engine."""
    return SimpleNamespace(precision="fp16", inputs=inputs, spec=None, backend="onnxruntime", backend_metadata=meta)


def test_compare_reuses_the_build_s_analysis_only_where_it_is_the_same_one(tmp_path):
    from trtprof.spec import TensorSpec

    path = tmp_path / "negs.onnx"
    onnx.save(_negs(3), str(path))
    inputs = [TensorSpec("x", "float32", (2,))]
    feeds = {"x": np.ones(2, np.float32)}
    recorded = fr.analyze_safely(path, feeds).to_json()
    meta = {"fp16_range": recorded, "fp16_range_inputs": "random"}
    said: list[str] = []
    reused = fr.for_compare(path, {"b": _record(meta, inputs)}, feeds, seeded_as_build=True,
                            deadline=fr.Deadline(at=1e9, say=said.append))
    assert isinstance(reused, fr.RecordedAnalysis) and reused.to_json() == recorded
    assert said == ["FP16 range analysis: the one the fp16 engine's build recorded (same model, keep-list and inputs)"]
    # another seed, other inputs, other shapes: run here
    assert isinstance(fr.for_compare(path, {"b": _record(meta, inputs)}, feeds), fr.RangeAnalysis)
    other = {**meta, "fp16_range_inputs": "sha256:00"}
    assert isinstance(fr.for_compare(path, {"b": _record(other, inputs)}, feeds, seeded_as_build=True),
                      fr.RangeAnalysis)
    wider = {"x": np.ones(3, np.float32)}
    assert fr.reusable(_record(meta, inputs), wider, True) is None
