"""The page kit's pieces that keep a page readable (issue 44 item 5): long tokens break only at commas,
commands to copy sit in blocks of their own, a caveat's explanation is written once, and the serving plot
never draws two arms in one colour. Fast: no model is run (the pages of real runs: test_cli_pages.py)."""
from __future__ import annotations

import re
import shlex

import pytest

from trtprof.report import intro, kit
from trtprof.report.compare_page import CAVEAT_HEAD_CHARS, load, render_html, split_caveat
from trtprof.report.serving_page import energy_note
from trtprof.report.serving_plots import arm_colours
from trtprof.report.plots import OTHER_COLOUR, PRECISION_COLOURS
from trtprof.sweep.matrix import executor_html

from .long_tokens import NODES, OPTION, long_keep_list_fix

pytest.importorskip("matplotlib")


def unbroken(html: str) -> str:
    return html.replace("<wbr>", "")


def test_a_long_list_breaks_after_its_commas_and_never_inside_a_word():
    value = ",".join(f"{n}:fp32" for n in NODES)
    assert len(value) > 1100
    out = kit.breakable(value)
    assert unbroken(out) == kit.esc(value)  # nothing added but break opportunities
    parts = out.split("<wbr>")
    assert all(p.endswith(("/", ",")) for p in parts[:-1])  # after a comma or a path's slash
    assert sum(p.endswith(",") for p in parts) == len(NODES) - 1  # after every comma
    assert all(re.fullmatch(r"[\w.:/,-]+", p) for p in parts) and max(map(len, parts)) < kit.LONG_TOKEN


def test_a_kernel_name_breaks_between_its_names():
    kernel = "void at::native::elementwise_kernel<128, 4, at::native::gpu_kernel_impl_nocast<at::native::Add<c10::Half>>"
    out = kit.breakable(kernel)
    assert unbroken(out) == kit.esc(kernel)
    assert "<wbr>" in out and max(len(p) for chunk in out.split() for p in chunk.split("<wbr>")) <= kit.LONG_TOKEN + 3
    cudnn = "sm90_xmma_wgrad_indexed_implicit_gemm_f32f32_tf32f32_f32_nhwckrsc_nhwc_tilesize128x128x32_warpgroupsize1x1x1"
    assert unbroken(kit.breakable(cudnn)) == cudnn and all(p.endswith("_") for p in kit.breakable(cudnn).split("<wbr>")[:-1])
    # a keep-list's pieces are short: it breaks at its commas and slashes, never after an underscore
    assert "_<wbr>" not in kit.breakable(",".join(f"{n}:fp32" for n in NODES))


@pytest.mark.parametrize("length, breaks", [(kit.LONG_TOKEN, False), (kit.LONG_TOKEN + 1, True)])
def test_a_token_breaks_only_when_longer_than_the_limit(length, breaks):
    token = ("a," * length)[:length]
    assert ("<wbr>" in kit.breakable(token)) is breaks
    assert kit.breakable("speedup 1.033× [0.711, 1.502]") == kit.esc("speedup 1.033× [0.711, 1.502]")


@pytest.mark.parametrize("extra, block", [(0, False), (1, True)])
def test_a_command_tail_longer_than_the_limit_is_a_block_of_its_own(extra, block):
    tail = "--layer-precisions " + "x" * (kit.LONG_TOKEN - len("--layer-precisions ") + extra)
    out = kit.line_html(f"to keep all of them FP32: {tail}")
    assert ('<pre class="cmd"><code>' in out) is block
    if block:  # the prose before it stays prose; the command is whole, on one line
        assert out.startswith("to keep all of them FP32:") and f"<code>{tail}</code>" in out


def test_the_command_block_scrolls_on_its_own_and_keeps_the_option_whole():
    assert re.search(r"pre\.cmd\{[^}]*white-space:pre[^}]*overflow-x:auto", kit.CSS)
    out = kit.command(f"trtprof build m.onnx --fp16 {OPTION}")
    code = out.split("<code>")[1].split("</code>")[0]
    assert "<wbr>" not in code and "\n" not in code and "--layer-precisions " in code


def test_a_fix_fp16_page_opens_with_the_keep_list_and_the_reuse_command(tmp_path):
    page = render_html(load(long_keep_list_fix(tmp_path)))
    intro_box = page.split('<div class="intro">')[1].split("</div>")[0]
    assert page.index('<div class="intro">') < page.index("<h2>Verdict</h2>")  # before any number
    assert "fix-fp16" in intro_box and f"Found: {len(NODES)} node(s) kept in FP32" in intro_box
    assert all(kit.esc(n) in unbroken(intro_box) for n in NODES)
    [reuse] = re.findall(r'<pre class="cmd"><code>(reuse: trtprof build [^<]*)</code></pre>', intro_box)
    argv = shlex.split(reuse.removeprefix("reuse: trtprof "))
    assert argv == ["build", "models/bert-base-uncased.onnx", "--fp16", *OPTION.split(" ")]
    # the range analysis' suggestion, in the accuracy section: a block of its own, the option unbroken
    accuracy = page.split("<h2>Accuracy: verdict, predicted vs observed</h2>")[1]
    assert f"<code>{kit.esc(OPTION)}</code>" in accuracy


def test_a_fix_fp16_that_found_nothing_says_so_and_offers_no_command():
    box = intro.fix_fp16_html({"found": False, "keep": [], "budget": "cosine>=0.999", "trials": [{}, {}]})
    assert "No keep-list met the budget" in box and "reuse:" not in box and "2 build(s)" in box


@pytest.mark.parametrize("ratio, said", [(1.0099, False), (1.0101, True)])
def test_the_headline_says_why_it_is_not_the_ratio_of_the_medians_beyond_one_percent(ratio, said):
    # baseline / candidate median = ratio × the speedup: just inside and just outside 1 %
    note = intro.ratio_note([("batch 1, b vs a", 2.0, 2.0 * ratio, 1.0)])
    assert bool(note) is said
    if said:
        assert "Why the speedup is not the ratio of the two medians shown" in note and "2.020×" in note


def test_ab_and_what_if_pages_say_what_they_are():
    arms = [{"label": "a", "model": "a.onnx", "backend": "onnxruntime", "precision": "fp32"},
            {"label": "b", "model": "b.onnx", "backend": "onnxruntime", "precision": "fp32"}]
    ab = intro.intro_html({"ab": {"arms": arms}})
    assert "<h2>A/B</h2>" in ab and "a: a.onnx on onnxruntime at fp32" in ab and "baseline is <b>a</b>" in ab
    change = {"padded": {"conv0": {"out_channels": [12, 16], "in_channels": [3, 8]}},
              "skipped": {"conv2": "channels already multiples of 8"}, "multiple": 8}
    wi = intro.intro_html({"ab": {"arms": arms, "what_if": {"experiment": "pad-channels", "change": change,
                                                             "suggested_by": "tensor_core_ineligible",
                                                             "outputs_max_rel_diff": 1.5e-7, "identical_rtol": 1e-5}}})
    assert "What-if: pad-channels" in wi and "what-if experiment" in wi
    assert "conv0: out_channels 12 → 16, in_channels 3 → 8" in wi and "conv2: left as it was" in wi
    assert "1.5e-07" in wi and "tensor_core_ineligible" in wi
    assert intro.intro_html({"comparisons": []}) == ""  # a plain compare: no intro
    # what a result file may hold is never markup
    assert "<script>" not in intro.intro_html({"ab": {"arms": [{"label": "<script>"}], "what_if": {"lines": "x"}}})


@pytest.mark.parametrize("extra, split", [(0, True), (1, False)])
def test_a_caveat_is_split_into_its_own_words_and_the_shared_explanation(extra, split):
    head = "h" * (CAVEAT_HEAD_CHARS + extra)
    assert split_caveat(f"{head}: why and what to do") == ((head, "why and what to do") if split else
                                                           ("", f"{head}: why and what to do"))


def test_energy_said_once_when_every_point_shares_the_reason():
    cpu = {"status": "n/a", "reason": "CPU backend: no energy counter"}
    points = [{"energy": cpu}, {"energy": cpu}]
    assert energy_note(points) == cpu["reason"]
    assert energy_note([*points, {"energy": {"joules_per_inference": 0.1}}]) == ""
    assert energy_note([*points, {"energy": {"reason": "another"}}]) == ""


def test_serving_series_never_share_a_colour():
    colours = arm_colours(["a", "b", "fp32", "fp16", "fp16#2", "fp32+pad-channels"])
    assert colours["fp32"] == PRECISION_COLOURS["fp32"] and colours["fp16"] == PRECISION_COLOURS["fp16"]
    assert colours["fp16#2"] == colours["fp16"]  # the second engine of one precision: dashed, same colour
    distinct = [colours[a] for a in ("a", "b", "fp32", "fp16", "fp32+pad-channels")]
    assert len(set(distinct)) == len(distinct) and OTHER_COLOUR not in distinct


def test_the_executor_is_tables_not_json():
    out = executor_html({"name": "local", "slots": [{"name": "cpu0", "gpu": None, "cpus": [0, 1]}],
                         "run_wall_s": 17.825, "interrupted": False})
    assert "{" not in out and "<pre" not in out
    assert "<th>setting</th>" in out and "<td>run_wall_s</td><td>17.82</td>" in out
    assert "<h3>slots</h3>" in out and "<td>cpu0</td><td>–</td><td>0, 1</td>" in out
    assert executor_html(None) == ""
