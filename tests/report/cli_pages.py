"""Every page kind the CLI writes, made by the real commands on small generated models (ONNX Runtime, CPU,
fast budgets): compare, A/B, what-if, fix-fp16, bench, serving, sweep, timeline. Shared by the page tests
(``test_page_width.py`` measures them in Chromium, ``test_cli_pages.py`` reads their structure).

Not a test module (no ``test_`` prefix): ``make_pages`` returns {kind: page path}.
"""
from __future__ import annotations

from pathlib import Path

from trtprof.cli import main

FAST = ["--backend", "onnxruntime", "--time-budget-s", "0.3", "--round-iterations", "5", "--in-process"]
KINDS = ("compare", "ab", "what-if", "fix-fp16", "bench", "serving", "sweep", "timeline")


def _run(argv: list[str]) -> None:
    rc = main(argv)
    assert rc == 0, f"trtprof {' '.join(argv)}: exit {rc}"


def _report(result: Path, out: Path) -> Path:
    _run(["report", str(result), "--out", str(out)])
    return out


def make_pages(tmp: Path) -> dict[str, Path]:
    """Run each command once in ``tmp`` and write its page; {kind: the page}."""
    from trtprof.model.demo import make_demo_model

    from ..compare.test_fix_fp16 import cancellation_model

    tmp.mkdir(parents=True, exist_ok=True)
    engines = str(tmp / "engines")
    a = make_demo_model(tmp / "a.onnx", channels=12, image=16, classes=10)
    b = make_demo_model(tmp / "b.onnx", channels=8, image=16, classes=10)
    pages: dict[str, Path] = {}
    _run(["compare", str(a), "--engines", engines, "--batch-sizes", "1,2", "--out", str(tmp / "c.json"), *FAST])
    pages["compare"] = _report(tmp / "c.json", tmp / "compare.html")
    _run(["compare", str(a), str(b), "--engines", engines, "--batch-sizes", "1", "--out", str(tmp / "ab.json"), *FAST])
    pages["ab"] = _report(tmp / "ab.json", tmp / "ab.html")
    _run(["compare", str(a), "--what-if", "pad-channels", "--precision", "fp32", "--engines", engines,
          "--batch-sizes", "1", "--out", str(tmp / "wi.json"), *FAST])
    pages["what-if"] = _report(tmp / "wi.json", tmp / "what-if.html")
    fix_model = cancellation_model(tmp / "cancel.onnx")
    _run(["fix-fp16", str(fix_model), "--engines", engines, "--batch-size", "4", "--accuracy", "cosine>=0.9999",
          "--out", str(tmp / "fix.json"), *FAST])
    pages["fix-fp16"] = _report(tmp / "fix.json", tmp / "fix-fp16.html")
    _run(["build", str(a), "--fp32", "--fp16", "--batch-sizes", "1,2", "--engines", str(tmp / "bench-engines"),
          "--backend", "onnxruntime"])
    _run(["bench", str(tmp / "bench-engines"), "--iterations", "5", "--warmup", "1", "--out", str(tmp / "r.json")])
    pages["bench"] = _report(tmp / "r.json", tmp / "bench.html")
    _run(["bench", str(tmp / "bench-engines"), "--iterations", "5", "--warmup", "1", "--concurrency", "1,2",
          "--slo-ms", "1000", "--window-s", "0.05", "--serving-rounds", "3", "--out", str(tmp / "s.json")])
    pages["serving"] = _report(tmp / "s.json", tmp / "serving.html")
    _run(["sweep", "--models", f"{a},{b}", "--batch-sizes", "1", "--gpus", "none", "--workers", "1",
          "--engines", engines, "--out", str(tmp / "sweep"), "--backend", "onnxruntime", "--time-budget-s", "0.3",
          "--round-iterations", "5"])
    pages["sweep"] = _report(tmp / "sweep" / "sweep.json", tmp / "sweep.html")
    _run(["profile", str(a), "--engines", engines, "--out", str(tmp / "layers.json"), "--timeline",
          "--iterations", "2", "--warmup", "1", "--top", "3", "--backend", "onnxruntime"])
    pages["timeline"] = tmp / "layers.timeline.html"
    return pages
