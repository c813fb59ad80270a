"""Issue 12: tables with enough digits, labels that tell engines apart, plots that read well (colour
per precision, robust histogram axis with a counted overflow bin, numeric batch ticks, no one-point
lines), CPU noise recorded and warned about, --threads applied and recorded."""
from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest

from trtprof.cli import main
from trtprof.util.labels import engine_labels, fmt_ms
from trtprof.system.noise import CPU_CV_WARN, cpu_noise_warning, cpu_state
from trtprof.measure.results import BenchResult


def fake_result(precision="fp16", batch=1, key="k1", samples=None, batch_sizes=(1,), options=None,
                model="m") -> BenchResult:
    """A result made from given samples (no backend involved), for label and plot checks."""
    samples = np.asarray(samples if samples is not None else np.linspace(1.0, 1.2, 50))
    return BenchResult.from_samples(
        stages={"latency_ms": samples}, span_s=float(samples.sum()) / 1e3, batch_size=batch, model=model,
        precision=precision, backend="onnxruntime",
        engine={"key": key, "spec": {"batch_sizes": list(batch_sizes), "options": options or {}, "shapes": {}}},
        config={})


@pytest.mark.parametrize("value,text", [(0.012345, "0.01235"), (1.23456, "1.235"), (12.3456, "12.35"),
                                        (12345.6, "12346"), (0.0, "0")])
def test_fmt_ms_keeps_four_significant_digits(value, text):
    assert fmt_ms(value) == text


def test_labels_distinguish_engines_only_when_needed():
    a = fake_result(key="aaaa1111", batch_sizes=(1,))
    b = fake_result(key="bbbb2222", batch_sizes=(1, 32))
    c = fake_result(precision="fp32", key="cccc3333")
    la, lb, lc = engine_labels([a, b, c])
    assert la != lb and "b1" in la and "b1–32" in lb
    assert lc == "m fp32 [onnxruntime]"  # alone: no detail added
    same = [fake_result(key="k1"), fake_result(key="k1", batch=4)]
    assert len(set(engine_labels(same))) == 1  # one engine, one label, across batch sizes
    opts = engine_labels([fake_result(key="x1", options={"workspace_mb": 64}), fake_result(key="x2")])
    assert "workspace_mb=64" in opts[0] and opts[0] != opts[1]
    twins = engine_labels([fake_result(key="twin0001"), fake_result(key="twin0002")])
    assert twins[0] != twins[1] and "#twin0001" in twins[0]


def test_two_engines_of_one_precision_are_told_apart_in_table_and_csv(conv_model, tmp_path, capsys):
    """TensorRT-style: two fp32 engines of one model built for different profiles (here two engines
    dirs merged into one, since ORT reuses one engine for every batch set)."""
    engines = tmp_path / "engines"
    assert main(["build", str(conv_model), "--fp32", "--batch-sizes", "1", "--engines", str(engines),
                 "--backend", "onnxruntime"]) == 0
    (meta,) = engines.glob("*.json")
    data = json.loads(meta.read_text())
    data["spec"]["batch_sizes"] = [1, 8]
    data["key"] = "f" * 64
    twin = engines / meta.name.replace(meta.name.split(".")[3], "ffffffffffff")
    # the twin's own artifact (an entry whose metadata names another entry's file is corrupt, issue 45)
    artifact = engines / Path(data["artifact"]).name
    twin_artifact = artifact.with_name(artifact.name.replace(meta.name.split(".")[3], "ffffffffffff"))
    twin_artifact.write_bytes(artifact.read_bytes())
    data["artifact"] = str(Path(data["artifact"]).with_name(twin_artifact.name))
    twin.write_text(json.dumps(data))
    capsys.readouterr()
    out, table = tmp_path / "r.json", tmp_path / "r.csv"
    assert main(["bench", str(engines), "--batch-sizes", "1", "--warmup", "1", "--iterations", "3",
                 "--out", str(out), "--csv", str(table)]) == 0
    printed = capsys.readouterr().out.splitlines()
    rows = [l for l in printed[:printed.index("")] if l.startswith("convnet fp32")]  # the latency table
    assert len(rows) == 2 and rows[0].split("  ")[0] != rows[1].split("  ")[0]
    labels = [r["engine_label"] for r in csv.DictReader(table.open())]
    assert len(set(labels)) == 2 and any("b1–8" in l for l in labels)


def test_histogram_axis_is_robust_and_overflow_is_counted(tmp_path):
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    from trtprof.report import plots

    rng = np.random.default_rng(0)
    body = rng.normal(0.5, 0.01, 195)
    spikes = np.array([8.0, 9.5, 10.0, 11.0, 12.0])  # the case: 5 spikes of 8-12 ms in 200
    low, high = plots.bulk_range([np.concatenate([body, spikes])])
    assert high < 1.0 and low == pytest.approx(body.min())
    captured = {}
    real_savefig = plt.Figure.savefig

    def spy(fig, path, *a, **kw):
        captured["fig"] = fig
        return real_savefig(fig, path, *a, **kw)

    plt.Figure.savefig = spy
    try:
        (path,) = plots.histograms([fake_result(samples=np.concatenate([body, spikes]))], tmp_path)
    finally:
        plt.Figure.savefig = real_savefig
    ax = captured["fig"].axes[0]
    legend = captured["fig"].legends[0].get_texts()[0].get_text()  # below the axes since issue 26
    assert "5 above" in legend and "hatched bar" in legend
    assert any(t.get_text() == "5" for t in ax.texts)
    assert ax.get_xlim()[1] < 1.0
    assert path.is_file()


def test_batch_plots_ticks_colours_and_no_one_point_lines(tmp_path):
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    from trtprof.report import plots

    results = [fake_result("fp32", b, key="a") for b in (1, 8, 32)] + [fake_result("fp16", 8, key="b")]
    figs = []
    real_close = plt.close
    plt.close = lambda fig=None: figs.append(fig)  # keep the figure for inspection
    try:
        plots.latency_vs_batch(results, tmp_path)
        plots.latency_vs_batch(list(reversed(results)), tmp_path)
    finally:
        plt.close = real_close
    for fig in figs:
        ax = fig.axes[0]
        assert [t.get_text() for t in ax.get_xticklabels()] == ["1", "8", "32"]
        lines = {c.get_label(): c.lines[0] for c in ax.containers}  # errorbar: (data line, caps, bars)
        by_prec = {("fp16" if "fp16" in k else "fp32"): l for k, l in lines.items()}
        assert matplotlib.colors.to_hex(by_prec["fp32"].get_color()) == plots.PRECISION_COLOURS["fp32"]
        assert matplotlib.colors.to_hex(by_prec["fp16"].get_color()) == plots.PRECISION_COLOURS["fp16"]
        assert by_prec["fp16"].get_linestyle() == "None"  # one batch size: a marker, no line
        assert by_prec["fp32"].get_linestyle() == "-"
        real_close(fig)


def test_cpu_noise_warning_names_threshold_and_fitting_advice():
    calm = {"usable_cores": 8, "load_average": [0.1, 0.1, 0.1], "governor": "performance"}
    assert cpu_noise_warning(CPU_CV_WARN / 2, threads=None, duration_s=None, state=calm) is None
    busy = {"usable_cores": 2, "load_average": [6.0, 5.0, 4.0], "governor": "powersave"}
    text = cpu_noise_warning(4.18, threads=None, duration_s=None, state=busy)
    assert "418.0%" in text and f"{CPU_CV_WARN:.0%}" in text
    assert "load average 6" in text and "--threads 1" in text and "--duration-s" in text and "powersave" in text
    text = cpu_noise_warning(0.5, threads=2, duration_s=30, state=calm)
    assert "--threads" not in text and "--duration-s" not in text


def test_cpu_state_is_recorded_and_threads_applied(conv_model, tmp_path, capsys):
    state = cpu_state()
    assert state["usable_cores"] >= 1 and len(state["load_average"]) == 3
    engines = tmp_path / "engines"
    assert main(["build", str(conv_model), "--engines", str(engines), "--backend", "onnxruntime"]) == 0
    out = tmp_path / "r.json"
    assert main(["bench", str(engines), "--warmup", "1", "--iterations", "3", "--threads", "1", "--out", str(out)]) == 0
    data = json.loads(out.read_text())
    assert data["environment"]["host"]["cpu_state"]["usable_cores"] >= 1
    assert data["environment"]["host"]["cpu"]
    assert data["results"][0]["config"]["threads"] == 1
    assert data["interrupted"] is False


def test_threads_is_passed_to_the_onnxruntime_session(conv_model, tmp_path):
    from trtprof.measure.bench import load_runner
    from trtprof.builder.pipeline import BuildSettings, build_engines
    from trtprof.spec import Precision

    (outcome,) = build_engines(conv_model, [Precision.FP32],
                               settings=BuildSettings(engines_dir=tmp_path / "e", backend="onnxruntime"))
    runner = load_runner(outcome.record, threads=1)
    opts = runner.session.get_session_options()
    assert opts.intra_op_num_threads == 1 and opts.inter_op_num_threads == 1


def test_report_of_a_bench_file_is_titled_by_its_models(conv_model, tmp_path, capsys):
    engines = tmp_path / "engines"
    assert main(["build", str(conv_model), "--engines", str(engines), "--backend", "onnxruntime"]) == 0
    out = tmp_path / "r.json"
    assert main(["bench", str(engines), "--warmup", "1", "--iterations", "3", "--out", str(out)]) == 0
    capsys.readouterr()
    assert main(["report", str(out), "-o", str(tmp_path / "rep.html")]) == 0
    summary = capsys.readouterr().out.splitlines()
    assert summary[0] == "# trtprof: convnet [onnxruntime]"
    assert any(line.startswith("| convnet fp32 [onnxruntime] | 1 | ") for line in summary)
    assert "<title>trtprof report: convnet [onnxruntime]</title>" in (tmp_path / "rep.html").read_text()
