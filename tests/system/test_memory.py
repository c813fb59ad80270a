"""Memory and size per engine (issue 24): artifact bytes and memory in use during inference, in the
results JSON; torch's allocator figures on a GPU."""
from __future__ import annotations

from pathlib import Path

import pytest

from trtprof.system import cuda, memory
from trtprof.measure.bench import bench_records
from trtprof.builder.pipeline import BuildSettings, build_engines
from trtprof.measure.results import ResultSet
from trtprof.spec import Precision
from trtprof.measure.timing import TimingConfig

CONFIG = TimingConfig(warmup=2, iterations=10)


def _engines(tmp_path: Path, precisions=(Precision.FP32, Precision.FP16)):
    from trtprof.model.demo import make_demo_model

    model = make_demo_model(tmp_path / "net.onnx", channels=16, image=32, classes=10)
    outcomes = build_engines(model, list(precisions), (1, 4),
                             settings=BuildSettings(engines_dir=tmp_path / "engines", backend="onnxruntime"))
    return [o.record for o in outcomes]


def test_artifact_bytes_and_rss_memory_in_the_results_json(tmp_path):
    records = _engines(tmp_path)
    results = bench_records(records, CONFIG)
    path = tmp_path / "results.json"
    results.write_json(path)
    back = ResultSet.read(path)
    assert len(back.results) == 4
    for r in back.results:
        artifact = Path(r.engine["artifact"])
        assert r.engine["artifact_bytes"] == artifact.stat().st_size > 0
        assert r.memory["kind"] == "host_rss" and "statm" in r.memory["method"]
        assert isinstance(r.memory["rss_bytes"], int) and r.memory["rss_bytes"] > 0
        assert r.energy["status"] == "n/a" and "CPU backend" in r.energy["reason"]
        assert r.memory["in_use_bytes"] == (r.memory["load_delta_bytes"] or 0) + (r.memory["inference_delta_bytes"] or 0)
    sizes = {r.precision: r.engine["artifact_bytes"] for r in back.results}
    assert sizes["fp16"] < sizes["fp32"]  # FP16 weights: half the bytes of the bulk of the file


def test_rss_reads_this_process():
    before = memory.rss_bytes()
    blob = bytearray(64 << 20)  # touch 64 MiB
    for i in range(0, len(blob), 4096):
        blob[i] = 1
    after = memory.rss_bytes()
    assert before is not None and after is not None and after - before >= 60 << 20
    del blob


def test_inference_memory_prefers_the_runner_report_and_says_when_rss_is_unknown():
    class WithReport:
        def memory_report(self):
            return {"kind": "fake", "in_use_bytes": 7}

    assert memory.inference_memory(WithReport(), rss_before_load=None, rss_after_load=None, rss_before_run=None,
                                   rss_after_run=None) == {"kind": "fake", "in_use_bytes": 7}
    none = memory.inference_memory(object(), rss_before_load=None, rss_after_load=None, rss_before_run=None,
                                   rss_after_run=None)
    assert none["kind"] == "n/a" and "RSS unknown" in none["reason"]
    assert memory.in_use_bytes({"allocated_peak_bytes": 5}) == 5 and memory.in_use_bytes({}) is None
    assert memory.fmt_bytes(None) == "n/a" and memory.fmt_bytes(3 << 20) == "3 MiB"


MIB, GIB = 1 << 20, 1 << 30


@pytest.mark.parametrize("value, text", [
    (None, "n/a"),
    (5000, "5000 B"),                      # under 0.01 MiB: bytes
    (3 * MIB, "3 MiB"),
    (512 * MIB, "512 MiB"),                # not "0.5 GiB"
    (int(99.5 * MIB), "99.5 MiB"),           # under 100: 3 significant digits
    (int(100.4 * MIB), "100 MiB"),           # from 100: whole, with separators
    (999 * MIB, "999 MiB"),
    (1000 * MIB, "1,000 MiB"),             # ":.3g" printed 1e+03 from 999.5 up
    (GIB - 1, "1,024 MiB"),                # just under 1 GiB: still MiB
    (GIB, "1 GiB"),                        # from 1 GiB: GiB
    (int(1.5 * GIB), "1.5 GiB"),
    (99 * GIB, "99 GiB"),
    (1100 * GIB, "1,100 GiB"),             # was 1.1e+03 GiB
    (-2 * GIB, "-2 GiB"),                  # a delta
])
def test_fmt_size_switches_to_gib_at_one_gib_and_never_prints_exponents(value, text):
    assert memory.fmt_size(value) == text


def test_fmt_bytes_stays_in_mib_for_a_table_column():
    assert memory.fmt_bytes(GIB) == "1,024 MiB" and memory.fmt_bytes(1000 * MIB) == "1,000 MiB"
    assert memory.fmt_bytes(999 * MIB) == "999 MiB"


@pytest.mark.gpu
@pytest.mark.skipif(cuda.device_count() == 0, reason="no CUDA device")
def test_torch_allocator_peak_is_recorded_per_precision(tmp_path):
    pytest.importorskip("onnx2torch")
    from trtprof.model.demo import make_demo_model

    model = make_demo_model(tmp_path / "net.onnx", channels=64, image=128, classes=10)
    outcomes = build_engines(model, [Precision.FP32, Precision.FP16], (32,),
                             settings=BuildSettings(engines_dir=tmp_path / "engines", backend="torch"))
    results = bench_records([o.record for o in outcomes], CONFIG)
    mem = {r.precision: r.memory for r in results.results}
    for m in mem.values():
        assert m["kind"] == "torch_allocator" and m["allocated_peak_bytes"] > 0
        assert m["reserved_bytes"] >= m["allocated_bytes"]
    # No "fp16 needs less" here: on an H200 (2026-12-01) this net's fp16 engine peaked at 167.5 MB against
    # fp32's 146.4 MB (half weights, but the cast input copy and cuDNN's autotuned workspaces): what the
    # allocator reports is a measurement, and the tool must show it as it is.
    assert mem["fp16"]["allocated_peak_bytes"] != mem["fp32"]["allocated_peak_bytes"]  # two measurements, not one copied


def test_bench_cli_prints_and_report_shows_memory_and_size(tmp_path, capsys):
    from trtprof.cli import main
    from trtprof.report.compare_page import write_report

    records = _engines(tmp_path, (Precision.FP32,))
    out = tmp_path / "r.json"
    assert main(["bench", str(records[0].meta_path), "--iterations", "5", "--warmup", "1", "--out", str(out),
                 "--csv", str(tmp_path / "r.csv")]) == 0
    text = capsys.readouterr().out
    assert "memory in use" in text and "host_rss" in text
    size = memory.fmt_bytes(records[0].artifact_path.stat().st_size)
    assert size in text
    header = (tmp_path / "r.csv").read_text().splitlines()[0].split(",")
    assert "artifact_bytes" in header and "memory_in_use_bytes" in header
    page, _ = write_report(out, tmp_path / "r.html")
    body = page.read_text()
    assert "<h2>Memory and size</h2>" in body and size in body


def test_settled_rss_hands_freed_heap_pages_back():
    """Freed small blocks stay resident (a later engine reuses them, so its delta shrank); the settled read
    trims them first. Real glibc behaviour, no fake: 40,000 1-KiB numpy blocks, one kept at the heap's top."""
    import numpy as np

    if not memory._malloc_trim():
        pytest.skip("no glibc malloc_trim here: settled_rss_bytes is the plain RSS")
    baseline = memory.settled_rss_bytes()
    blocks = [np.ones(128) for _ in range(40_000)]  # 1 KiB each: malloc'd on the heap, below mmap's threshold
    keep = blocks[-1]
    del blocks
    loose, settled = memory.rss_bytes(), memory.settled_rss_bytes()
    assert baseline is not None and loose is not None and settled is not None and keep is not None
    assert loose - settled > 16 << 20  # about 40 MiB was freed; the plain read still counts most of it
    assert settled - baseline < 16 << 20


_BENCH_IN_ORDER = """
import json, sys
from trtprof.engines.cache import list_engines
from trtprof.measure.bench import bench_records
from trtprof.measure.timing import TimingConfig
from trtprof.system import memory
records = {r.precision: r for r in list_engines(sys.argv[1])}
results = bench_records([records[p] for p in sys.argv[2].split(",")], TimingConfig(warmup=2, iterations=10)).results
print(json.dumps({r.precision: memory.in_use_bytes(r.memory) for r in results}))
"""


@pytest.mark.slow
def test_an_engines_memory_does_not_depend_on_the_load_order(tmp_path):
    """Issue 44: an int8 engine benched after fp32 measured below its own artifact (0.09-0.45 MiB for a
    0.39 MiB file) and 2.0-2.4 MiB when loaded first. Both orders now, each in a fresh process as `trtprof
    bench` runs (RSS is process-wide: a test process's leftovers would move it): at least the artifact,
    within 2x of each other."""
    import json
    import subprocess
    import sys

    from trtprof.model.demo import DEMO_CHANNELS, DEMO_IMAGE, make_demo_model

    model = make_demo_model(tmp_path / "net.onnx", channels=DEMO_CHANNELS, image=DEMO_IMAGE)
    engines = tmp_path / "engines"
    outcomes = build_engines(model, [Precision.FP32, Precision.INT8], [1],
                             settings=BuildSettings(engines_dir=engines, backend="onnxruntime"))
    records = {o.record.precision: o.record for o in outcomes}
    seen: dict[str, list[int]] = {"fp32": [], "int8": []}
    for order in ("fp32,int8", "int8,fp32"):
        proc = subprocess.run([sys.executable, "-c", _BENCH_IN_ORDER, str(engines), order], capture_output=True,
                              text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr
        for precision, used in json.loads(proc.stdout.strip().splitlines()[-1]).items():
            seen[precision].append(int(used or 0))
    for precision, (first, second) in seen.items():
        artifact = memory.artifact_bytes(Path(records[precision].meta_path).parent / records[precision].artifact)
        assert artifact and min(first, second) >= artifact, (precision, first, second, artifact)
        assert max(first, second) <= 2 * min(first, second), (precision, first, second)
