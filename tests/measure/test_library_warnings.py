"""ONNX Runtime's warnings at load and while timing are kept in the results, counted, not silenced (issue 34).

The model that makes ORT warn at both moments (``warning_model``): an initializer no node uses, which
ORT's session creation reports ("Removing initializer 'unused_weight' …"), and an output declared 3
wide that the graph makes 4 wide through a Slice whose end ORT cannot infer, which ORT reports at every
``run`` ("VerifyOutputSizes: Expected shape from model of {-1,3} does not match actual shape of {1,4}").
ORT writes both from C++ to fd 2, so the terminal is read with ``capfd``. Everything runs through the
real CLI on the CPU.
"""
from __future__ import annotations

import json
import os
import warnings
from pathlib import Path

import numpy as np
import pytest

from trtprof.cli import main
from trtprof.util import thirdparty
from trtprof.util.thirdparty import AT_LOAD, AT_RUN, CUT_SHORT, Tally, tally_json, terminal_line, \
    third_party_warnings, warning_lines

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

UNUSED = "Removing initializer 'unused_weight'"
SHAPE = "VerifyOutputSizes): Expected shape from model of {-1,3} does not match actual shape of {1,4} for output y"
FAST = ["--time-budget-s", "1", "--round-iterations", "20", "--batch-sizes", "1", "--backend", "onnxruntime"]


def warning_model(path: Path) -> Path:
    """x [N,4] → MatMul(eye) → Slice(0 : width) → y, declared [N,3]; plus an unused initializer."""
    from onnx import TensorProto, helper, numpy_helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 3])
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"], name="mm"),
             helper.make_node("Shape", ["h"], ["s"], name="shape"),
             helper.make_node("Gather", ["s", "one"], ["d"], axis=0, name="width"),
             helper.make_node("Unsqueeze", ["d", "zero"], ["end"], name="end"),
             helper.make_node("Slice", ["h", "zero", "end", "axis1"], ["y"], name="slice")]
    inits = [numpy_helper.from_array(np.eye(4, dtype=np.float32), "w"),
             numpy_helper.from_array(np.array(1, np.int64), "one"),
             numpy_helper.from_array(np.array([0], np.int64), "zero"),
             numpy_helper.from_array(np.array([1], np.int64), "axis1"),
             numpy_helper.from_array(np.ones(3, np.float32), "unused_weight")]
    model = helper.make_model(helper.make_graph(nodes, "warns", [x], [y], inits),
                              opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(path))
    return path


def clean_terminal(captured) -> None:
    text = captured.out + captured.err
    assert "W:onnxruntime" not in text and "\x1b[" not in text and "VerifyOutputSizes" not in text


def entry(entries, when: str, text: str) -> dict:
    found = [e for e in entries if e["during"] == when and text in e["message"]]
    assert len(found) == 1, entries
    return found[0]


# ---------------------------------------------------------------------------------------------
# The tally and its words
# ---------------------------------------------------------------------------------------------


def test_tally_counts_each_line_once_per_load_or_block():
    tally = Tally()
    tally.add(AT_LOAD, ["a"])
    tally.add(AT_LOAD, [])
    tally.add(AT_RUN, ["b", "b"])  # de-duplicated within one block
    tally.add(AT_RUN, ["b", "c"])
    tally.add(AT_RUN, [])
    assert tally.to_json() == [{"message": "a", "during": "load", "count": 1, "of": 2},
                               {"message": "b", "during": "timing", "count": 2, "of": 3},
                               {"message": "c", "during": "timing", "count": 1, "of": 3}]
    assert Tally().to_json() == [] and tally_json([], []) == []


def test_warning_lines_and_the_terminal_line():
    lines = warning_lines(tally_json(["x"], ["y"]))
    assert lines == ["x (while loading, in 1 of 1 load)", "y (while running, in 1 of 1 block)"]
    assert warning_lines([{"message": "z", "during": "timing", "count": 2, "of": 6}]) == \
        ["z (while running, in 2 of 6 blocks)"]
    assert terminal_line([[], []], "f.json") is None
    one = terminal_line([tally_json(["x"], []), tally_json(["x"], [])], "f.json: k")  # the same line in two results
    assert one is not None and "1 distinct warning while loading the engines" in one and "f.json: k" in one
    two = terminal_line([tally_json(["x"], ["y"])], "f.json")
    assert two is not None and "2 distinct warnings while loading and while running" in two


def test_a_python_warning_raised_at_every_call_of_a_block_is_recorded_once_not_every_time():
    def call():
        warnings.warn("slow path taken", UserWarning)

    with third_party_warnings(repeat=False) as caught, warnings.catch_warnings(record=True) as inner:
        pass  # (a nested catch only to show the block's own filter state is left alone)
    assert caught == [] and inner == []
    with third_party_warnings(repeat=False) as caught:
        for _ in range(1000):
            call()
    assert caught == ["UserWarning: slow path taken"]
    with third_party_warnings(repeat=False) as again:  # the next block records it again: once
        for _ in range(10):
            call()
    assert again == ["UserWarning: slow path taken"]


def test_a_block_that_writes_more_than_the_cap_is_cut_at_a_line_and_says_so(monkeypatch):
    monkeypatch.setattr(thirdparty, "MAX_READ_BYTES", 100)
    with third_party_warnings() as caught:
        for i in range(30):
            os.write(2, f"line {i:03d} of the flood\n".encode())
    assert caught[-1] == CUT_SHORT
    assert all(line.endswith("of the flood") for line in caught[:-1])  # no half line kept
    assert len(caught) - 1 == 100 // len("line 000 of the flood\n")
    with third_party_warnings() as short:
        os.write(2, b"line 000 of the flood\n")
    assert short == ["line 000 of the flood"]  # under the cap: nothing said about cutting


# ---------------------------------------------------------------------------------------------
# Load and run: the runner keeps its load's lines; its runs log only when the caller captures them
# ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def warning_engines(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("warns")
    model = warning_model(tmp / "warns.onnx")
    assert main(["build", str(model), "--engines", str(tmp / "e"), "--backend", "onnxruntime", "--batch-sizes", "1",
                 "--fp32", "--fp16"]) == 0
    return model, tmp / "e"


def test_load_runner_keeps_the_load_lines_and_logs_runs_only_when_asked(warning_engines, capfd):
    from trtprof.engines.cache import list_engines
    from trtprof.measure.bench import load_runner

    _, engines = warning_engines
    record = next(r for r in list_engines(engines) if r.precision == "fp32")
    capfd.readouterr()
    feeds = {"x": np.ones((1, 4), np.float32)}
    quiet = load_runner(record)  # a command that does not capture its runs (serving, profile): ORT logs nothing
    assert quiet.infer(feeds)["y"].shape == (1, 4)
    assert not getattr(quiet, "load_warnings", ()) and capfd.readouterr().err == ""
    logged = load_runner(record, log_warnings=True)
    assert any(UNUSED in w for w in logged.load_warnings)
    with third_party_warnings(repeat=False) as caught:
        logged.infer(feeds)
    assert any(SHAPE in w for w in caught)
    assert capfd.readouterr().err == ""
    quiet.close()
    logged.close()


def test_a_model_without_warnings_keeps_none(tmp_path, capfd):
    from trtprof.model.demo import make_demo_model

    model = make_demo_model(tmp_path / "net.onnx", channels=4, image=8, classes=5)
    assert main(["build", str(model), "--engines", str(tmp_path / "e"), "--backend", "onnxruntime",
                 "--batch-sizes", "1", "--fp32"]) == 0
    out = tmp_path / "b.json"
    assert main(["bench", str(tmp_path / "e"), "--out", str(out), "--iterations", "20", "--warmup", "2"]) == 0
    assert "runtime library wrote" not in capfd.readouterr().out
    assert json.loads(out.read_text())["results"][0]["third_party_warnings"] == []


# ---------------------------------------------------------------------------------------------
# Through the CLI: bench, compare (worker processes and in-process), the report page
# ---------------------------------------------------------------------------------------------


def test_bench_keeps_ort_warnings_of_load_and_timing_per_result(warning_engines, tmp_path, capfd):
    _, engines = warning_engines
    out = tmp_path / "b.json"
    capfd.readouterr()
    assert main(["bench", str(engines), "--out", str(out), "--iterations", "30", "--warmup", "3"]) == 0
    captured = capfd.readouterr()
    clean_terminal(captured)
    summary = [line for line in captured.out.splitlines() if "runtime library wrote" in line]
    assert summary == [f"note: the runtime library wrote 2 distinct warnings while loading and while running the "
                       f"engines (kept with their counts in {out}: results[].third_party_warnings; on the report "
                       "page beside each result)"]
    results = json.loads(out.read_text())["results"]
    assert {r["precision"] for r in results} == {"fp32", "fp16"}
    for r in results:
        assert entry(r["third_party_warnings"], "load", UNUSED)["count"] == 1
        assert entry(r["third_party_warnings"], "timing", SHAPE) == {**entry(r["third_party_warnings"], "timing", SHAPE),
                                                                     "count": 1, "of": 1}
    page = tmp_path / "b.html"
    assert main(["report", str(out), "-o", str(page)]) == 0
    html = page.read_text()
    # each warning written once in the page's numbered notes, and both results point at it (issue 44 #5)
    assert html.count("while running, in 1 of 1 block") == 1 and html.count("while loading, in 1 of 1 load") == 1
    assert html.count("onnxruntime (VerifyOutputSizes) (note") == 2
    assert html.count("onnxruntime (CleanUnusedInitializersAndNodeArgs) (note") == 2


@pytest.mark.parametrize("isolation", [[], ["--in-process"]], ids=["workers", "in-process"])
def test_compare_keeps_ort_warnings_per_arm_with_counts_and_the_page_shows_them(warning_engines, tmp_path, capfd,
                                                                               isolation):
    model, engines = warning_engines
    out = tmp_path / "c.json"
    capfd.readouterr()
    assert main(["compare", str(model), "--engines", str(engines), "--out", str(out), *FAST, *isolation]) == 0
    captured = capfd.readouterr()
    clean_terminal(captured)
    assert sum("runtime library wrote" in line for line in captured.out.splitlines()) == 1
    data = json.loads(out.read_text())
    for r in data["results"]:
        loads = r["config"]["loads"]
        load = entry(r["third_party_warnings"], "load", UNUSED)
        assert load["count"] == load["of"] == loads >= 1  # every load of the arm wrote it, once each
        run = entry(r["third_party_warnings"], "timing", SHAPE)
        assert run["count"] == run["of"] == loads + r["config"]["rounds"]  # each load's warm-up and every round
    page = tmp_path / "c.html"
    assert main(["report", str(out), "-o", str(page)]) == 0
    html = page.read_text()
    for arm in ("fp32", "fp16"):  # beside the arm it qualifies, under the verdict
        assert f"<li>{arm}: onnxruntime (CleanUnusedInitializersAndNodeArgs): Removing initializer" in html
        assert f"<li>{arm}: onnxruntime (VerifyOutputSizes)" in html


# ---------------------------------------------------------------------------------------------
# A damaged results file: one line, not a traceback on the page that joins or formats these fields
# ---------------------------------------------------------------------------------------------


def _entry() -> dict:
    from trtprof.measure.results import BenchResult

    lat = np.array([1.0, 2.0, 3.0, 4.0])
    return BenchResult.from_samples(stages={"latency_ms": lat}, span_s=0.01, batch_size=1, model="m", precision="fp32",
                                    backend="onnxruntime", engine={}, config={},
                                    third_party_warnings=tally_json(["x"], [])).to_json()


@pytest.mark.parametrize("change,complaint", [
    (lambda e: e.update(warnings=["ok", float("nan")]), "results[0].warnings: expected a list of strings"),
    (lambda e: e.update(third_party_warnings={"message": "x"}), "results[0].third_party_warnings: expected a list"),
    (lambda e: e["third_party_warnings"][0].update(count=1.5), "results[0].third_party_warnings[0]: expected an object"),
    (lambda e: e["third_party_warnings"][0].update(count=True), "results[0].third_party_warnings[0]: expected an object"),
    (lambda e: e["third_party_warnings"][0].pop("message"), "results[0].third_party_warnings[0]: expected an object"),
    (lambda e: e["stats"]["latency_ms"].update(p90=e["stats"]["latency_ms"]["p50"] - 1e-9),
     "results[0].stats.latency_ms: p90"),
    (lambda e: e["stats"]["latency_ms"].update(max=float("inf")), "results[0].stats.latency_ms.max"),
])
def test_damaged_warning_and_stat_fields_are_one_line(change, complaint, tmp_path):
    from trtprof.errors import BadInput
    from trtprof.measure.results import results_from_json

    good = _entry()
    assert len(results_from_json([good], tmp_path / "r.json")) == 1
    equal = _entry()
    equal["stats"]["latency_ms"]["p90"] = equal["stats"]["latency_ms"]["p50"]  # at the edge: equal is in order
    assert len(results_from_json([equal], tmp_path / "r.json")) == 1
    bad = _entry()
    change(bad)
    with pytest.raises(BadInput) as err:
        results_from_json([bad], tmp_path / "r.json")
    assert complaint in err.value.message


# ---------------------------------------------------------------------------------------------
# A worker that dies inside a capture block: its last words reach the parent's one line, not the void
# ---------------------------------------------------------------------------------------------


def test_a_named_sink_holds_an_open_blocks_words_and_is_emptied_after(tmp_path, monkeypatch):
    sink = tmp_path / "capture.log"
    monkeypatch.setenv(thirdparty.SINK_ENV, str(sink))
    with third_party_warnings() as outer:
        os.write(2, b"terminate called after throwing an instance of 'std::bad_alloc'\n")
        with third_party_warnings() as inner:  # nested: its own temp file, the outer's words stay
            os.write(2, b"inner line\n")
        assert inner == ["inner line"]
        # what a parent reads if the process dies now
        assert sink.read_bytes() == b"terminate called after throwing an instance of 'std::bad_alloc'\n"
    assert outer == ["terminate called after throwing an instance of 'std::bad_alloc'"]
    assert sink.read_bytes() == b""  # a finished block leaves nothing to be mistaken for last words


@pytest.mark.parametrize("sig,kept", [("SIGABRT", True), ("SIGSEGV", True), ("SIGKILL", False), ("SIGTERM", False)])
def test_a_worker_that_crashes_inside_a_block_is_reported_with_what_it_wrote_there(warning_engines, sig, kept):
    """A crash (abort, segfault) keeps the block's last words; a signal from outside (kill -9, the OOM
    killer) is named alone, as for any worker killed so (measure.workers.CRASH_SIGNALS)."""
    import signal

    from trtprof.engines.cache import list_engines
    from trtprof.measure import workers

    _, engines = warning_engines
    record = next(r for r in list_engines(engines) if r.precision == "fp32")
    worker = workers.Worker(0, {"fp32": record})
    try:
        worker.wait_ready()
        path = Path(worker.capture_path)
        assert path.exists() and path.read_bytes() == b""  # the load's block finished: emptied
        # as if the worker were inside a block when it died: what its libraries wrote there, then the signal
        path.write_bytes(b"\x1b[1;31m2026-12-02 01:59:16.866 [E:onnxruntime:, alloc.cc:12 Reserve] out of arena\x1b[m\n")
        worker.proc.send_signal(getattr(signal, sig))
        message = worker._died().message
        assert f"was killed by {sig}" in message
        assert ("inside a block it wrote: onnxruntime (Reserve): out of arena" in message) == kept
        if not kept:
            assert message.endswith(f"was killed by {sig}")
    finally:
        worker.close()
    assert not Path(worker.capture_path).exists()  # removed with the worker
