"""Every command that takes a model (or an engine, or a result file) refuses an empty, a truncated and a
non-ONNX file the same way: exit 2, one stderr line naming the file and the cause, no traceback, nothing
written (issue 34: ``compare --what-if`` on a truncated file died with a traceback, exit 1; on an empty
one it blamed "opset 0"; an A/B with an empty file said "inputs differ"; a sweep ran a failing cell)."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from trtprof.cli import main
from trtprof.model.demo import make_demo_model

pytest.importorskip("onnx")

MODEL_CAUSE = {"empty": "file is empty", "truncated": "not a readable ONNX model", "text": "not a readable ONNX model"}
ENGINE_CAUSE = dict.fromkeys(MODEL_CAUSE, "not a trtprof engine")
RESULT_CAUSE = {"empty": "not valid JSON", "truncated": "not UTF-8", "text": "not valid JSON"}
ORT = ["--backend", "onnxruntime"]

# command → (argv with {bad}, {good}, {tmp} placeholders, the causes by kind of file)
COMMANDS = {
    "build": (["build", "{bad}", "--engines", "{tmp}/e", *ORT], MODEL_CAUSE),
    "compare": (["compare", "{bad}", "--engines", "{tmp}/e", "--out", "{tmp}/o.json", *ORT], MODEL_CAUSE),
    "compare --what-if pad-channels": (["compare", "{bad}", "--what-if", "pad-channels", "--engines", "{tmp}/e",
                                        "--out", "{tmp}/o.json", *ORT], MODEL_CAUSE),
    "compare --what-if channels-last": (["compare", "{bad}", "--what-if", "channels-last", "--engines", "{tmp}/e",
                                         "--out", "{tmp}/o.json", "--backend", "torch"], MODEL_CAUSE),
    "compare A/B, bad first": (["compare", "{bad}", "{good}", "--engines", "{tmp}/e", "--out", "{tmp}/o.json", *ORT],
                               MODEL_CAUSE),
    "compare A/B, bad second": (["compare", "{good}", "{bad}", "--engines", "{tmp}/e", "--out", "{tmp}/o.json",
                                 *ORT], MODEL_CAUSE),
    "profile": (["profile", "{bad}", "--engines", "{tmp}/e", "--out", "{tmp}/o.json", *ORT], MODEL_CAUSE),
    "fix-fp16": (["fix-fp16", "{bad}", "--engines", "{tmp}/e", "--out", "{tmp}/o.json", *ORT], MODEL_CAUSE),
    "train-compare": (["train-compare", "{bad}", "--device", "cpu", "--out", "{tmp}/o.json"], MODEL_CAUSE),
    "sweep": (["sweep", "--models", "{bad}", "--out", "{tmp}/sw", "--engines", "{tmp}/e", *ORT], MODEL_CAUSE),
    "bench": (["bench", "{bad}", "--out", "{tmp}/o.json"], ENGINE_CAUSE),
    "bench --concurrency (serving)": (["bench", "{bad}", "--concurrency", "1,2", "--out", "{tmp}/o.json"],
                                      ENGINE_CAUSE),
    "inspect": (["inspect", "{bad}"], ENGINE_CAUSE),
    "report": (["report", "{bad}", "--out", "{tmp}/o.html"], RESULT_CAUSE),
}


# commands that need an optional library before they read the model: without it they say so instead
# (train-compare of an ONNX file: "torch is not installed", the trainer is torch's), so those cases skip
NEEDS = {"train-compare": "torch"}


def command_param(command: str):
    library = NEEDS.get(command)
    if library is None:
        return command
    return pytest.param(command, marks=pytest.mark.skipif(
        importlib.util.find_spec(library) is None,
        reason=f"{library} missing: {command} says '{library} is not installed' before it reads the model"))


def bad_file(kind: str, tmp: Path, good: Path) -> Path:
    path = tmp / "in" / f"{kind}.onnx"
    path.parent.mkdir(exist_ok=True)
    if kind == "empty":
        path.write_bytes(b"")
    elif kind == "truncated":  # a download cut in half
        data = good.read_bytes()
        path.write_bytes(data[: len(data) // 2])
    else:
        path.write_text("hello, this is a text file, not a model\n")
    return path


@pytest.mark.parametrize("kind", sorted(MODEL_CAUSE))
@pytest.mark.parametrize("command", [command_param(c) for c in sorted(COMMANDS)])
def test_a_bad_file_is_one_line_naming_it_and_the_cause(tmp_path, capsys, command, kind):
    good = make_demo_model(tmp_path / "good" / "net.onnx", channels=4, image=8, classes=3)
    bad = bad_file(kind, tmp_path, good)
    argv, causes = COMMANDS[command]
    args = [a.format(bad=bad, good=good, tmp=tmp_path) for a in argv]
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    assert main(args) == 2
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert bad.name in lines[0] and causes[kind] in lines[0], lines[0]
    assert "Traceback" not in err and "opset" not in lines[0] and "inputs differ" not in lines[0]
    after = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    assert after == before  # nothing written: no result, no engines dir, no empty dirs
