"""Issue 44 item 7: the demo asks a question the machine can answer. On a CPU runtime with integer kernels it
builds fp32, fp16 and int8, benches fp32 and int8 (its fp16 is FP32 behind casts, said in the build note) and
suggests `compare --precisions fp32,int8`; on a GPU backend, or a CPU one without INT8, fp32 vs fp16."""
from __future__ import annotations

import json
import shlex
from dataclasses import dataclass, field

import pytest

from trtprof.backends.base import Capabilities
from trtprof.cli import demo, main
from trtprof.errors import UnsupportedPrecision
from trtprof.spec import Precision


@dataclass
class FakeBackend:
    """A contract fake for ``demo_precisions``: its device and whether it takes INT8."""

    device: str
    int8: bool
    capabilities: Capabilities = field(init=False)

    def __post_init__(self) -> None:
        self.capabilities = Capabilities(device=self.device)  # type: ignore[arg-type]

    def check_precision(self, precision: Precision) -> None:
        if precision is Precision.INT8 and not self.int8:
            raise UnsupportedPrecision("no int8 here")


@pytest.mark.parametrize("device,int8,built,candidate", [
    ("cpu", True, ["fp32", "fp16", "int8"], "int8"),   # ONNX Runtime's CPU provider
    ("cpu", False, ["fp32", "fp16"], "fp16"),          # a CPU runtime without INT8
    ("cuda", True, ["fp32", "fp16"], "fp16"),          # a GPU backend: the FP16 question
])
def test_demo_precisions_by_backend(monkeypatch, device, int8, built, candidate):
    from trtprof import backends

    monkeypatch.setattr(backends, "resolve", lambda name: FakeBackend(device, int8))
    precisions, cand = demo.demo_precisions("auto")
    assert [p.value for p in precisions] == built and cand.value == candidate


@pytest.mark.slow
def test_demo_on_the_cpu_suggests_int8_and_the_suggestion_parses(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["demo", "--dir", "d", "--backend", "onnxruntime", "--iterations", "5", "--warmup", "1",
                 "--batch-sizes", "1,2"]) == 0
    out = capsys.readouterr().out
    assert "NOT an FP16 result" in out  # the fp16 build note: FP32 behind casts
    line = next(x for x in out.splitlines() if "? trtprof compare " in x)
    assert line.startswith("is int8 faster than fp32, and by how much?")
    argv = shlex.split(line.split("? trtprof ", 1)[1])
    assert argv[argv.index("--precisions") + 1] == "fp32,int8"
    from trtprof.cli import make_parser

    args = make_parser().parse_args(argv)  # the printed command is today's CLI
    assert args.precisions == "fp32,int8" and args.backend == "onnxruntime"
    benched = {(r["precision"], r["batch_size"]) for r in json.loads((tmp_path / "d" / "results.json").read_text())["results"]}
    assert benched == {(p, b) for p in ("fp32", "int8") for b in (1, 2)}  # fp16 built, not timed
    assert len(list((tmp_path / "d" / "engines").glob("demo_convnet.fp16.*.onnx"))) == 1
