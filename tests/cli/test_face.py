"""Issue 26, "the face": plots whose axes come from the bulk of the data (outliers counted and marked),
log axes over a decade, legends outside the data, series told apart; an HTML page in plain words with
the environment as a table and the effective precision beside "fp16"; tails said as "p99 = N× the
median"; CLI wording (plurals, 95 %, cache ls, build columns, precision order, profile's option); ORT
layer rows matched across precisions by their ONNX node; shortened layer names kept distinct."""
from __future__ import annotations

import json

import numpy as np
import pytest

from trtprof.report import plots
from trtprof.cli import main
from trtprof.util.labels import engine_labels
from trtprof.layers.table import NAME_WIDTH, short_names
from trtprof.measure.results import BenchResult
from trtprof.stats.speedup import LatencyShape, distribution_shape
from trtprof.util.wording import plural, times

pytest.importorskip("matplotlib")


def result(precision: str, samples, batch: int = 1, key: str | None = None) -> BenchResult:
    """A result made from given samples (no backend involved), for plot and page checks."""
    samples = np.asarray(samples, dtype=np.float64)
    return BenchResult.from_samples(
        stages={"latency_ms": samples}, span_s=float(samples.sum()) / 1e3, batch_size=batch, model="m",
        precision=precision, backend="onnxruntime",
        engine={"key": key or precision, "spec": {"batch_sizes": [batch], "options": {}, "shapes": {}}}, config={})


def close(fig) -> None:
    from matplotlib import pyplot as plt

    plt.close(fig)


# ------------------------------------------------------------------------------------ words
def test_plural_and_times():
    assert plural(1, "layer") == "1 layer" and plural(0, "layer") == "0 layers" and plural(2, "layer") == "2 layers"
    assert plural(1, "more round") == "1 more round" and plural(3, "more round") == "3 more rounds"
    assert plural(2, "batch", "batches") == "2 batches"
    assert times(60.4) == "60×" and times(10.0) == "10×"  # 10 and above: whole numbers
    assert times(9.87) == "9.87×" and times(1.354) == "1.35×"


def test_tail_is_said_relative_to_the_median():
    rng = np.random.default_rng(0)
    x = np.concatenate([rng.normal(0.04, 0.0004, 980), np.full(20, 2.4)])  # 2 % of the calls at 60× the median
    shape = distribution_shape(x)
    assert shape.heavy_tail and shape.p99_over_median == pytest.approx(2.4 / np.median(x), rel=1e-6)
    text = shape.describe()
    assert "p99 = 60× the median" in text and "σ" not in text
    assert shape.to_json()["p99_over_median"] == pytest.approx(shape.p99_over_median)
    assert "heavy tail" in LatencyShape(1, (1.0,), 50.0).describe()  # an old JSON without the ratio still reads


# ------------------------------------------------------------------------------------ plots: ranges
def test_bulk_range_ignores_rare_spikes_but_keeps_a_second_mode():
    rng = np.random.default_rng(1)
    body = rng.normal(0.04, 0.0005, 995)
    spikes = np.full(5, 12.0)  # the batch-1 ECDF: data near 0.04 ms, a few calls at 12 ms
    low, high = plots.bulk_range([np.concatenate([body, spikes])])
    assert low == pytest.approx(body.min()) and high < 0.05
    # a second mode just above BULK_PERCENTILE's share (6 % > 5 %) is bulk: on the axis ...
    tight = rng.normal(1.0, 0.001, 940)
    assert plots.bulk_range([np.concatenate([tight, np.full(60, 2.0)])])[1] == pytest.approx(2.0)
    # ... one just below it (4 %), beyond the Q3 + 3 IQR fence, is not: counted beyond the axis
    assert plots.bulk_range([np.concatenate([tight, np.full(40, 2.0)])])[1] < 1.1


def test_log_axis_from_one_decade():
    assert plots.spans_decades(0.1, 1.0) and plots.spans_decades(1.0, plots.LOG_AXIS_RATIO)
    assert not plots.spans_decades(1.0, 0.99 * plots.LOG_AXIS_RATIO)
    assert not plots.spans_decades(0.0, 5.0)  # a log axis needs a positive bottom


# ------------------------------------------------------------------------------------ plots: figures
def _legend_outside(fig) -> bool:
    """The figure's legend does not overlap the axes (drawn, in display coordinates)."""
    fig.canvas.draw()
    (legend,) = fig.legends
    box, axes = legend.get_window_extent(), fig.axes[0].get_window_extent()
    return box.y1 <= axes.y0 and fig.axes[0].get_legend() is None


def test_histogram_outlines_each_series_in_its_colour_and_counts_each_overflow():
    import matplotlib

    rng = np.random.default_rng(2)
    fp32 = np.concatenate([rng.normal(1.0, 0.02, 195), np.full(5, 30.0)])
    fp16 = np.concatenate([rng.normal(1.01, 0.02, 193), np.full(7, 40.0)])
    group = [result("fp32", fp32), result("fp16", fp16)]
    fig = plots.histogram_figure(group, 1, engine_labels(group))
    ax = fig.axes[0]
    assert ax.get_xscale() == "linear" and ax.get_xlim()[1] < 2.0
    outlines = [p for p in ax.patches if not p.get_fill()]  # histtype="step": one outline per series
    assert [matplotlib.colors.to_hex(p.get_edgecolor()) for p in outlines] == [
        plots.PRECISION_COLOURS["fp32"], plots.PRECISION_COLOURS["fp16"]]
    assert all(p.get_edgecolor()[3] == 1.0 for p in outlines)  # opaque outline: overlaps stay two series
    fills = [p for p in ax.patches if p.get_fill() and p.get_hatch() is None]
    assert fills and all(p.get_alpha() == plots.FILL_ALPHA for p in fills)
    bars = [p for p in ax.patches if p.get_hatch() == "//"]
    assert sorted(round(p.get_height()) for p in bars) == [5, 7]
    assert len({round(p.get_x(), 9) for p in bars}) == 2  # side by side, not on top of each other
    assert {t.get_text() for t in ax.texts} == {"5", "7"}
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert "5 above" in labels[0] and "max 30.00 ms" in labels[0] and "7 above" in labels[1]
    assert _legend_outside(fig)
    close(fig)


def test_histogram_goes_logarithmic_when_the_bulk_spans_a_decade():
    rng = np.random.default_rng(3)
    wide = np.concatenate([rng.normal(0.5, 0.01, 150), rng.uniform(5, 13, 50)])  # a quarter of the calls at 5-13 ms
    group = [result("fp32", wide), result("fp16", rng.normal(0.5, 0.01, 200))]
    fig = plots.histogram_figure(group, 8, engine_labels(group))
    assert fig.axes[0].get_xscale() == "log"
    close(fig)


def test_ecdf_axis_from_the_bulk_with_the_rest_marked():
    rng = np.random.default_rng(4)
    x = np.concatenate([rng.normal(0.04, 0.0005, 996), [11.0, 11.5, 12.0, 12.2]])
    group = [result("fp32", x), result("fp16", rng.normal(0.041, 0.0005, 1000))]
    fig = plots.ecdf_figure(group, 1, engine_labels(group))
    ax = fig.axes[0]
    assert ax.get_xlim()[1] < 0.05  # not 12 ms
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert "4 above" in labels[0] and "max 12.20 ms" in labels[0] and "above" not in labels[1]
    markers = [line for line in ax.lines if line.get_marker() == ">"]
    assert len(markers) == 1 and markers[0].get_ydata()[0] == pytest.approx(0.996)
    assert _legend_outside(fig)
    close(fig)


@pytest.mark.parametrize("top_ms,log", [(10.0, True), (9.0, False)])
def test_latency_vs_batch_is_logarithmic_from_one_decade(tmp_path, top_ms, log, monkeypatch):
    from matplotlib import pyplot as plt

    kept = []
    monkeypatch.setattr(plt, "close", lambda fig=None: kept.append(fig))
    results = [result("fp32", np.full(20, 1.0), batch=1), result("fp32", np.full(20, top_ms), batch=64)]
    plots.latency_vs_batch(results, tmp_path)
    (fig,) = kept
    assert (fig.axes[0].get_yscale() == "log") is log
    assert "log scale" in fig.axes[0].get_ylabel() if log else "log" not in fig.axes[0].get_ylabel()
    assert [t.get_text() for t in fig.axes[0].get_xticklabels()] == ["1", "64"]
    assert _legend_outside(fig)


def test_plot_writes_every_kind(tmp_path):
    rng = np.random.default_rng(5)
    rs = [result(p, rng.normal(m * b, 0.01 * b, 100), batch=b) for p, m in (("fp32", 1.0), ("fp16", 0.7)) for b in (1, 8)]
    made = sorted(p.name for p in plots.plot_all(rs, tmp_path))
    assert made == ["ecdf_batch1.png", "ecdf_batch8.png", "hist_batch1.png", "hist_batch8.png",
                    "latency_vs_batch.png", "throughput_vs_batch.png"]


# ------------------------------------------------------------------------------------ the HTML page
def _compare_page(tmp_path, **changes):
    from tests.report.test_report import synthetic_compare_json
    from trtprof.report.compare_page import load, render_html

    path = synthetic_compare_json(tmp_path)
    raw = json.loads(path.read_text())
    raw["environment"] = {"host": {"cpu": "Xeon", "cpu_count": 32}, "packages": {"numpy": "2.5.2"},
                          "gpus": [{"index": 0, "name": "NVIDIA H200", "driver": "580.159.04"}]}
    for c in raw["comparisons"]:
        c["latency"]["candidate"].update(changes)
    path.write_text(json.dumps(raw))
    return render_html(load(path))


def test_page_says_the_method_in_plain_words_and_the_environment_as_a_table(tmp_path):
    import re

    page = _compare_page(tmp_path)
    method = re.search(r"<p>trtprof ran.*?</p>", page).group(0)
    for jargon in ("Student", "sign-flip", "bootstrap", "df", "hull"):
        assert jargon not in method
    assert method.count(". ") + method.count(".</p>") == 2  # two sentences
    assert '<a href="docs/method.md">' in method and "95%" in method and "±1%" in method
    assert "<pre>" not in page
    assert "<td>GPU 0</td><td>name</td><td>NVIDIA H200</td>" in page
    assert "<td></td><td>cpu_count</td><td>32</td>" in page and "<td>host</td><td>cpu</td><td>Xeon</td>" in page
    assert "<td>method.speedup</td>" in page  # the exact method: in the table, not the prose


def test_verdict_table_says_the_effective_precision(tmp_path):
    page = _compare_page(tmp_path, effective_precision="fp32+casts")
    assert "<td>fp16 (effective fp32+casts) vs fp32</td>" in page
    plain = _compare_page(tmp_path / "plain")
    assert "<td>fp16 vs fp32</td>" in plain and "effective" not in plain.split("<h2>Environment")[0]


# ------------------------------------------------------------------------------------ CLI wording
def test_compare_help_prints_one_percent_sign(capsys):
    assert main(["compare", "--help"]) == 0  # main turns argparse's exit into a return code
    out = capsys.readouterr().out
    assert "95%%" not in out and "95% CI" in " ".join(out.split())


def test_cache_ls_keeps_the_status_one_word_and_problems_below(conv_model, tmp_path, capsys):
    engines = tmp_path / "engines"
    assert main(["build", str(conv_model), "--fp32", "--fp16", "--engines", str(engines), "--backend", "onnxruntime"]) == 0
    meta = sorted(engines.glob("*.fp16.*.json"))[0]
    meta.write_text('{"schema": 99}')
    capsys.readouterr()
    assert main(["cache", "ls", str(engines)]) == 0
    lines = capsys.readouterr().out.splitlines()
    header, rows = lines[0], lines[2:4]
    status_at = header.index("status")
    assert {row[status_at:].split()[0] for row in rows} == {"ok", "corrupt"}
    assert len({len(row.rstrip()) for row in rows}) == 1  # aligned rows: a problem does not widen one
    assert any(line.startswith(f"corrupt: {meta.name}: ") for line in lines[4:])
    assert lines[-1].startswith("2 items")


def test_build_lines_align_after_an_effective_precision(conv_model, tmp_path, capsys):
    engines = tmp_path / "engines"
    assert main(["build", str(conv_model), "--fp32", "--fp16", "--engines", str(engines), "--backend", "onnxruntime"]) == 0
    lines = [l for l in capsys.readouterr().out.splitlines() if l.startswith("fp")]
    assert len(lines) == 2 and "fp16 (effective fp32+casts)" in lines[1]
    assert lines[0].index(str(engines)) == lines[1].index(str(engines))


def test_bench_lists_fp32_before_fp16(conv_model, tmp_path, capsys):
    from trtprof.engines.cache import list_engines
    from trtprof.spec import Precision

    engines = tmp_path / "engines"
    assert main(["build", str(conv_model), "--fp16", "--fp32", "--engines", str(engines), "--backend", "onnxruntime"]) == 0
    # the files sort fp16 first by name; the listing goes by precision
    assert sorted(p.name.split(".")[1] for p in engines.glob("*.json")) == ["fp16", "fp32"]
    assert [r.precision for r in list_engines(engines)] == ["fp32", "fp16"]
    assert [Precision.rank(p) for p in ("fp32", "tf32", "fp16", "bf16", "int8", "fp8", "fp4")] == [0, 1, 2, 3, 4, 5, 6]


def test_profile_on_a_static_model_names_its_own_option(tmp_path, capsys):
    import onnx

    from trtprof.model.demo import make_demo_model

    path = make_demo_model(tmp_path / "m.onnx", channels=8, image=16, classes=10)
    model = onnx.load(str(path))
    for value in (*model.graph.input, *model.graph.output):
        dim = value.type.tensor_type.shape.dim[0]
        dim.ClearField("dim_param")
        dim.dim_value = 4
    onnx.save(model, str(path))
    # without --batch-size profile takes the fixed 4 (issue 44 #6); a batch the model cannot run names profile's option
    code = main(["profile", str(path), "--engines", str(tmp_path / "e"), "--backend", "onnxruntime", "--batch-size", "2",
                 "--out", str(tmp_path / "l.json")])
    err = capsys.readouterr().err
    assert code == 2 and "(use --batch-size 4)" in err and "--batch-sizes" not in err
    assert main(["build", str(path), "--batch-sizes", "2", "--engines", str(tmp_path / "e"),
                 "--backend", "onnxruntime"]) == 2
    assert "(use --batch-sizes 4)" in capsys.readouterr().err  # build's option is --batch-sizes


# ------------------------------------------------------------------------------------ layer names
def _unnamed_model(path):
    """Conv → fmap (a graph output also read inside) → Relu → Conv → Relu → out, no node named:
    ORT names the FP32 engine's fused nodes after their output tensors, the FP16 engine's after the
    tensors trtprof's conversion renamed (fmap__trtprof_fp16, Relu_3_cast_to_out)."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(rng.standard_normal((16, 3, 3, 3)).astype(np.float32), "w1"),
             numpy_helper.from_array(rng.standard_normal((16, 16, 3, 3)).astype(np.float32), "w2"),
             numpy_helper.from_array(rng.standard_normal(16).astype(np.float32), "b2")]
    nodes = [helper.make_node("Conv", ["x", "w1"], ["fmap"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["fmap"], ["r"]),
             helper.make_node("Conv", ["r", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c2"], ["out"])]
    vi = helper.make_tensor_value_info
    graph = helper.make_graph(nodes, "g", [vi("x", TensorProto.FLOAT, ["N", 3, 32, 32])],
                              [vi("fmap", TensorProto.FLOAT, ["N", 16, 32, 32]), vi("out", TensorProto.FLOAT, ["N", 16, 32, 32])],
                              inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(path))
    return path


def test_ort_rows_meet_across_precisions_by_their_onnx_node(tmp_path, capsys):
    model = _unnamed_model(tmp_path / "unnamed.onnx")
    out = tmp_path / "layers.json"
    assert main(["profile", str(model), "--engines", str(tmp_path / "e"), "--backend", "onnxruntime",
                 "--batch-size", "2", "--iterations", "3", "--warmup", "1", "--out", str(out)]) == 0
    rows = {r["name"]: r for r in json.loads(out.read_text())["table"]["rows"]}
    for conv in ("Conv_0", "Conv_2"):  # the two largest rows: a time on both sides and a ratio
        assert rows[conv]["op_type"] == "Conv"
        assert rows[conv]["time_ms"]["fp32"] and rows[conv]["time_ms"]["fp16"]
        assert rows[conv]["ratio_vs_baseline"]["fp16"] is not None
        assert rows[conv]["graph"] is not None  # graph facts found under the same key
    assert not any(name.endswith("_nchwc") for name in rows)
    # ORT's own name stays visible in the kernel column
    assert any("ORT node" in k["name"] for k in rows["Conv_0"]["kernels"]["fp16"])


def test_short_names_stay_distinct():
    stem = "StatefulPartitionedCall/model/residual_block_number_seven/"
    names = [stem + "conv2d_3/Conv2D", stem + "conv2d_4/Conv2D",
             "model/" + "a" * 30 + "/left/" + "b" * 30, "model/" + "a" * 30 + "/rite/" + "b" * 30, "short"]
    assert len({n[:NAME_WIDTH] for n in names[:2]}) == 1  # the old cut read the same
    shown = short_names(names)
    assert len(set(shown)) == len(names)
    assert all(len(s) <= NAME_WIDTH for s in shown) and shown[-1] == "short"
    assert shown[0].endswith("conv2d_3/Conv2D") and shown[0].startswith("Stateful")
    assert "left" in shown[2] and "rite" in shown[3]  # same start and end: the middle is shown
    assert short_names(["x" * NAME_WIDTH]) == ["x" * NAME_WIDTH]  # exactly the width: untouched
    assert len(short_names(["x" * (NAME_WIDTH + 1)])[0]) == NAME_WIDTH


def _chain(ops):
    """An ONNX graph x → Conv → ops… → out (unnamed nodes), for SourceGraph's fused-chain walk."""
    from onnx import TensorProto, helper

    nodes, prev = [helper.make_node("Conv", ["x", "w"], ["t0"])], "t0"
    for i, op in enumerate(ops, 1):
        out = "out" if i == len(ops) else f"t{i}"
        nodes.append(helper.make_node(op, [prev, "b"] if op in ("Add", "Mul") else [prev], [out]))
        prev = out
    vi = helper.make_tensor_value_info
    return helper.make_model(helper.make_graph(nodes, "g", [vi("x", TensorProto.FLOAT, None)],
                                               [vi("out", TensorProto.FLOAT, None)]))


def test_fused_node_found_up_to_its_chain_limit():
    from trtprof.layers.ort import FUSED_CHAIN, SourceGraph

    assert FUSED_CHAIN == 3  # the node itself and two above it (Conv + Add + Relu fused into one)
    inside = SourceGraph.of(_chain(["Add", "Relu"]))  # Conv two steps above the Relu ORT names it after
    assert inside.origin("out_nchwc", "Conv") == "Conv_0"
    outside = SourceGraph.of(_chain(["Add", "Mul", "Relu"]))  # three steps: beyond the walk
    assert outside.origin("out_nchwc", "Conv") == "Relu_3"
    assert inside.origin("out_token_7", "Relu") == "Relu_2"  # the node itself: no walk
    assert inside.origin("ReorderOutput_token_4", "ReorderOutput") is None  # nothing to go on without ORT's graph
