"""compare --timeline (issue 35): one batch size's timelines after the timing, through the real CLI on
a model-zoo graph (ONNX Runtime, CPU), into the JSON, the diagnosis, the report page, a PNG and trace
files; the batch-size choice, the refusals before any work, and the trace files against a JSON Schema of
the Chrome trace-event format written here from the format's document (not from trtprof's own check)."""
from __future__ import annotations

import json
from pathlib import Path

import onnx
import pytest

from trtprof.cli import main
from trtprof.compare.timeline import CHOSEN_BY_USER, CHOSEN_SMALLEST, TimelineRequest, point_findings
from trtprof.diagnose.findings import Finding
from trtprof.errors import BadInput
from trtprof.layers.timeline import PNG_PRODUCER, Timeline, check_trace

from ..conftest import tree_snapshot

ZOO = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light" / "light_squeezenet.onnx"
FAST = ["--time-budget-s", "4", "--min-loads", "2", "--round-iterations", "2", "--backend", "onnxruntime"]

# The Trace Event Format (Google's "Trace Event Format" document, the JSON Object Format): an object
# with a traceEvents array; every event has name, ph, ts (µs), pid and tid; a complete event ("X") a
# duration >= 0; a metadata event ("M") named process_name/thread_name/… with args.name.
TRACE_EVENT_SCHEMA = {
    "type": "object",
    "required": ["traceEvents"],
    "properties": {
        "traceEvents": {"type": "array", "minItems": 1, "items": {"$ref": "#/$defs/event"}},
        "displayTimeUnit": {"enum": ["ms", "ns"]},
        "otherData": {"type": "object"},
    },
    "$defs": {
        "event": {
            "type": "object",
            "required": ["name", "ph", "ts", "pid", "tid"],
            "properties": {"name": {"type": "string"}, "ph": {"type": "string", "minLength": 1},
                           "ts": {"type": "number", "minimum": 0}, "pid": {"type": "integer"},
                           "tid": {"type": "integer"}, "cat": {"type": "string"}, "args": {"type": "object"}},
            "allOf": [
                {"if": {"properties": {"ph": {"const": "X"}}},
                 "then": {"required": ["dur"], "properties": {"dur": {"type": "number", "minimum": 0}}}},
                {"if": {"properties": {"ph": {"const": "M"}}},
                 "then": {"required": ["args"],
                          "properties": {"name": {"enum": ["process_name", "process_labels", "process_sort_index",
                                                           "thread_name", "thread_sort_index"]},
                                         "args": {"type": "object", "required": ["name"]}}}},
            ],
        },
    },
}


def validate_trace_file(path: Path) -> dict:
    """The file against the schema, and what the schema cannot say: spans of one thread never overlap
    partly (a viewer stacks them as nested), and each thread named by a metadata event is used."""
    jsonschema = pytest.importorskip("jsonschema")
    doc = json.loads(path.read_text())
    jsonschema.validate(doc, TRACE_EVENT_SCHEMA)
    xs = [e for e in doc["traceEvents"] if e["ph"] == "X"]
    named = {e["tid"] for e in doc["traceEvents"] if e["ph"] == "M" and e["name"] == "thread_name"}
    assert xs and named == {e["tid"] for e in xs}
    return doc


def test_the_schema_refuses_what_the_format_forbids():
    jsonschema = pytest.importorskip("jsonschema")
    good = {"name": "k", "ph": "X", "ts": 0, "dur": 1, "pid": 1, "tid": 1}
    jsonschema.validate({"traceEvents": [good]}, TRACE_EVENT_SCHEMA)
    for broken in ([good], {"traceEvents": [{**good, "dur": -0.001}]}, {"traceEvents": [{k: v for k, v in good.items() if k != "ts"}]},
                   {"traceEvents": [{**good, "pid": "1"}]}, {"traceEvents": [{k: v for k, v in good.items() if k != "dur"}]},
                   {"traceEvents": [{"name": "thread_name", "ph": "M", "ts": 0, "pid": 1, "tid": 1}]},
                   {"traceEvents": [good], "displayTimeUnit": "s"}):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(broken, TRACE_EVENT_SCHEMA)


def test_compare_timeline_through_the_cli(tmp_path, capsys):
    out, traces = tmp_path / "compare.json", tmp_path / "traces"
    rc = main(["compare", str(ZOO), "--engines", str(tmp_path / "engines"), "--out", str(out), "--timeline",
               "--trace-dir", str(traces), *FAST])
    printed = capsys.readouterr().out
    assert rc == 0
    data = json.loads(out.read_text())
    block = data["timeline"]
    assert block["batch_size"] == 1 and block["chosen_by"] == CHOSEN_SMALLEST
    assert [t["precision"] for t in block["timelines"]] == ["fp32", "fp16"]
    for t in block["timelines"]:
        parsed = Timeline.from_json(t)
        assert parsed.spans and 0 <= parsed.idle_share < 1 and parsed.batch_size == 1
        assert t["summary"]["spans"] == len(parsed.spans)
        assert sum(k["count"] for k in t["summary"]["by_kind"].values()) == len(parsed.spans)
        assert t["settings"]["provider"] == "CPUExecutionProvider"
    assert set(block["recorded_s_per_arm"]) == {"fp32", "fp16"} and block["recorded_s"] > 0
    # the findings point to it, in the comparison's diagnosis (ORT's CPU fp16 inserts casts)
    rules = [f["rule"] for f in data["comparisons"][0]["diagnosis"]]
    assert "timeline_top_kernels" in rules and "timeline_added_cast" in rules
    assert "timeline: fp16 added" in printed and "top kernels by time" in printed
    png = (tmp_path / "compare.timeline.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and PNG_PRODUCER.encode() in png[:4096]
    assert sorted(p.name for p in traces.iterdir()) == ["light_squeezenet.fp16.b1.trace.json",
                                                        "light_squeezenet.fp32.b1.trace.json"]
    for path in traces.iterdir():
        doc = validate_trace_file(path)
        check_trace(doc)
        assert doc["otherData"]["producer"] == "trtprof"
    # the report page has the section, from the JSON
    assert main(["report", str(out), "-o", str(tmp_path / "page.html")]) == 0
    page = (tmp_path / "page.html").read_text()
    assert "<h2>Timeline: one steady-state iteration per precision (batch 1)</h2>" in page and "<svg" in page
    # a second run replaces trtprof's own PNG and traces
    assert main(["compare", str(ZOO), "--engines", str(tmp_path / "engines"), "--out", str(out),
                 "--trace-dir", str(traces), *FAST]) == 0


def test_compare_timeline_at_the_batch_size_asked_only(tmp_path, conv_model):
    out = tmp_path / "compare.json"
    assert main(["compare", str(conv_model), "--engines", str(tmp_path / "engines"), "--out", str(out),
                 "--batch-sizes", "1,2", "--timeline-batch", "2", *FAST]) == 0
    data = json.loads(out.read_text())
    block = data["timeline"]
    assert block["batch_size"] == 2 and block["chosen_by"] == CHOSEN_BY_USER
    assert {Timeline.from_json(t).batch_size for t in block["timelines"]} == {2}
    rules = {c["batch_size"]: [f["rule"] for f in c["diagnosis"]] for c in data["comparisons"]}
    assert "timeline_top_kernels" in rules[2] and not any(r.startswith("timeline") for r in rules[1])
    assert (tmp_path / "compare.timeline.png").exists()


def test_profile_traces_pass_the_schema_too(tmp_path):
    traces = tmp_path / "traces"
    assert main(["profile", str(ZOO), "--engines", str(tmp_path / "engines"), "--out", str(tmp_path / "l.json"),
                 "--trace-dir", str(traces), "--iterations", "1", "--warmup", "0"]) == 0
    for path in traces.iterdir():
        validate_trace_file(path)


@pytest.mark.parametrize("extra, victim", [
    (["--timeline-batch", "4", "--batch-sizes", "1,2"], None),
    (["--timeline"], "c.timeline.png"),
    (["--trace-dir", "traces"], "traces/someone_elses.fp16.b1.trace.json"),
    (["--timeline", "--precision", "fp32", "--backends", "onnxruntime,onnxruntime"], None),
])
def test_refused_before_any_work(tmp_path, capsys, extra, victim):
    if victim:
        (tmp_path / victim).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / victim).write_text("the user's own notes\n")
    before = tree_snapshot(tmp_path)
    argv = [a if a != "traces" else str(tmp_path / "traces") for a in extra]
    rc = main(["compare", str(ZOO), "--engines", str(tmp_path / "engines"), "--out", str(tmp_path / "c.json"),
               *argv, *[a for a in FAST if a not in ("--backend", "onnxruntime")]])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1, err
    assert tree_snapshot(tmp_path) == before  # nothing built, measured or written
    if victim:
        assert Path(victim).name in err[0] and (tmp_path / victim).read_text() == "the user's own notes\n"


def test_batch_choice_just_inside_and_outside_the_compared_sizes():
    assert TimelineRequest().pick((1, 8, 64)) == (1, CHOSEN_SMALLEST)
    assert TimelineRequest(64).pick((1, 8, 64)) == (64, CHOSEN_BY_USER)
    for outside in (0, 63, 65):
        with pytest.raises(BadInput, match="not one of the batch sizes compared"):
            TimelineRequest(outside).pick((1, 8, 64))


class _Pair:
    def __init__(self, batch, baseline, candidate):
        self.batch_size, self.baseline, self.candidate, self.diagnosis = batch, baseline, candidate, []


def test_findings_go_to_the_comparisons_of_their_arms_at_that_batch_only():
    block = {"batch_size": 8, "findings": [
        {"rule": "timeline_host_bound", "precision": "fp32", "message": "fp32: idle", "evidence": {"idle_share": 0.5}},
        {"rule": "timeline_added_cast", "precision": "fp16", "message": "fp16 added 2 casts", "evidence": {}},
        {"rule": "timeline_top_kernels", "precision": "int8", "message": "int8: top", "evidence": {}}]}
    fp16, int8, other_batch = _Pair(8, "fp32", "fp16"), _Pair(8, "fp32", "int8"), _Pair(1, "fp32", "fp16")
    point_findings([fp16, int8, other_batch], block)
    assert [f.rule for f in fp16.diagnosis] == ["timeline_host_bound", "timeline_added_cast"]
    assert [f.rule for f in int8.diagnosis] == ["timeline_host_bound", "timeline_top_kernels"]
    assert other_batch.diagnosis == []
    assert isinstance(fp16.diagnosis[0], Finding) and fp16.diagnosis[0].message.startswith("timeline at batch 8: fp32")
    assert fp16.diagnosis[0].evidence == {"precision": "fp32", "idle_share": 0.5}


def test_a_report_of_a_broken_timeline_block_is_one_line(tmp_path, capsys):
    out = tmp_path / "compare.json"
    assert main(["compare", str(ZOO), "--engines", str(tmp_path / "engines"), "--out", str(out), "--timeline",
                 *FAST]) == 0
    data = json.loads(out.read_text())
    for broken in ({**data["timeline"], "batch_size": "<script>"},
                   {**data["timeline"], "timelines": [{"precision": "fp32"}]}):
        out.write_text(json.dumps({**data, "timeline": broken}))
        capsys.readouterr()
        assert main(["report", str(out), "-o", str(tmp_path / "p.html")]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "timeline" in err[0] and str(out) in err[0]
        assert not (tmp_path / "p.html").exists()


def test_an_aa_run_keeps_its_two_arms_apart(tmp_path):
    out, traces = tmp_path / "compare.json", tmp_path / "traces"
    assert main(["compare", str(ZOO), "--engines", str(tmp_path / "engines"), "--out", str(out), "--precisions",
                 "fp32,fp32", "--trace-dir", str(traces), *FAST]) == 0
    block = json.loads(out.read_text())["timeline"]
    assert [t["precision"] for t in block["timelines"]] == ["fp32", "fp32#2"]
    assert sorted(p.name for p in traces.iterdir()) == ["light_squeezenet.fp32.b1.trace.json",
                                                        "light_squeezenet.fp32_2.b1.trace.json"]


def test_a_timeline_that_fails_costs_a_warning_not_the_verdicts(tmp_path, capsys, monkeypatch):
    from trtprof.compare import timeline as tl

    def broken(*_a, **_k):
        raise ValueError("no GPU activity launched inside 'trtprof.timeline.iteration'")

    monkeypatch.setattr(tl, "record_timeline", broken)
    out = tmp_path / "compare.json"
    assert main(["compare", str(ZOO), "--engines", str(tmp_path / "engines"), "--out", str(out), "--timeline",
                 *FAST]) == 0
    data = json.loads(out.read_text())
    assert "timeline" not in data and data["comparisons"]
    assert any(w.startswith("timeline not recorded: ValueError: no GPU activity") for w in data["warnings"])
    assert not (tmp_path / "compare.timeline.png").exists()
    assert "WARNING: timeline not recorded" in capsys.readouterr().out


def test_trace_names_checked_before_the_model_is_known(tmp_path):
    from trtprof.cli._timeline import check_trace_names

    (tmp_path / "mine.fp16.b7.trace.json").write_text("the user's own notes\n")
    (tmp_path / "mine.fp16.b7.trace.json.bak").write_text("not a name a trace gets\n")
    (tmp_path / "theirs.int8.b7.trace.json").write_text("another arm's name\n")
    (tmp_path / "ours.fp32.b7.trace.json").write_text(json.dumps({"traceEvents": [], "otherData": {"producer": "trtprof"}}))
    check_trace_names(tmp_path, ["fp32", "fp16"], [1, 8])  # batch 7 is not among those to be written
    check_trace_names(tmp_path, ["fp32"], None)  # trtprof's own trace may be replaced
    for batches in ([7], None):  # the batch size asked, or any (an engines dir's built sizes, not known yet)
        with pytest.raises(BadInput, match="not a trace trtprof wrote"):
            check_trace_names(tmp_path, ["fp32", "fp16"], batches)
