"""--what-if keep-fp32 on the embedded backend (ONNX Runtime, CPU): the layers the tensor_core_ineligible finding
names are kept FP32 in a second fp16 engine (the layer_precisions build option), measured against the original's
fp16, both against its fp32. No timing assertions: the targets, the refusals (exit 2, one line), the arms, the
engine's keep-list and census, and that a keep-list's FP32 nodes are not judged an FP32 fallback."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from trtprof.cli import main
from trtprof.compare import whatif
from trtprof.errors import BadInput
from trtprof.model.demo import make_demo_model
from trtprof.model.onnx_model import OnnxModel
from trtprof.system.validity import HeavyCensus, check_heavy_fp32

pytest.importorskip("onnxruntime")

FAST = ["--backend", "onnxruntime", "--time-budget-s", "0.5", "--round-iterations", "20"]


def gemm_model(path: Path, n: int, *, name: str = "fc") -> Path:
    """x [batch, 16] → Gemm(W [16, n]) → y: eligible for tensor cores when n is a multiple of 8."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    w = numpy_helper.from_array(np.random.default_rng(0).standard_normal((16, n)).astype(np.float32), "W")
    node = helper.make_node("Gemm", ["x", "W"], ["y"], name=name)
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 16])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", n])], [w])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.save(model, str(path))
    return path


def test_the_targets_are_the_layers_that_cannot_fill_tensor_cores(tmp_path):
    src = OnnxModel.load(make_demo_model(tmp_path / "m.onnx", channels=12, image=16, classes=10))
    targets = whatif.keep_fp32_targets(src, {"input": (1, 3, 16, 16)})
    assert targets == {"conv0": ["input channels 3", "output channels 12"], "conv1": ["input channels 12"], "fc": ["N 10"]}
    # just inside and just outside the multiple of 8: N 8 has nothing to keep, N 9 keeps fc
    assert whatif.keep_fp32_targets(OnnxModel.load(gemm_model(tmp_path / "n9.onnx", 9)), {"x": (1, 16)}) == {"fc": ["N 9"]}
    with pytest.raises(BadInput, match="nothing to keep in FP32") as err:
        whatif.keep_fp32_targets(OnnxModel.load(gemm_model(tmp_path / "n8.onnx", 8)), {"x": (1, 16)})
    assert "n8.onnx" in str(err.value)
    with pytest.raises(BadInput, match="have no node name"):
        whatif.keep_fp32_targets(OnnxModel.load(gemm_model(tmp_path / "anon.onnx", 9, name="")), {"x": (1, 16)})


@pytest.mark.parametrize("args, needle", [(["--precision", "fp32"], "changes an fp16 engine"),
                                          ([], "nothing to keep in FP32")])
def test_a_keep_fp32_that_cannot_run_is_one_line_before_any_build(tmp_path, capsys, args, needle):
    src = gemm_model(tmp_path / "n8.onnx", 8)
    engines = tmp_path / "e"
    assert main(["compare", str(src), "--what-if", "keep-fp32", "--engines", str(engines), *args, *FAST]) == 2
    err = capsys.readouterr().err.strip()
    assert needle in err and "\n" not in err and "Traceback" not in err
    assert not engines.exists() or not any(p.suffix == ".onnx" for p in engines.rglob("*"))


def test_what_if_keep_fp32_builds_the_keep_list_and_measures_it_against_the_original(tmp_path, capsys):
    src = make_demo_model(tmp_path / "net.onnx", channels=12, image=16, classes=10)
    out = tmp_path / "wi.json"
    assert main(["compare", str(src), "--what-if", "keep-fp32", "--engines", str(tmp_path / "e"),
                 "--out", str(out), *FAST]) == 0
    printed = capsys.readouterr().out
    assert "what-if: batch 1: tensor_core_ineligible" in printed and "keep-fp32 measured: fp16 vs fp32" in printed
    data = json.loads(out.read_text())
    w = data["ab"]["what_if"]
    assert w["experiment"] == "keep-fp32" and w["suggested_by"] == "tensor_core_ineligible"
    assert set(w["change"]["kept_fp32"]) == {"conv0", "conv1", "fc"} and w["changed_model"] is None
    assert w["option"] == {"layer_precisions": "conv0:fp32,conv1:fp32,fc:fp32"}
    assert [arm["label"] for arm in data["ab"]["arms"]] == ["fp32", "fp16", "fp16+keep-fp32"]
    assert [c["candidate"] for c in data["comparisons"]] == ["fp16", "fp16+keep-fp32"]
    from trtprof.engines.cache import list_engines

    area = whatif.whatif_dir(tmp_path / "e")
    assert {r.precision for r in list_engines(tmp_path / "e")} == {"fp32", "fp16"}  # the user's engines: untouched
    [kept] = list_engines(area)
    assert kept.spec.option("layer_precisions") == "conv0:fp32,conv1:fp32,fc:fp32"
    assert kept.backend_metadata["kept_fp32"] == {"Conv": 2, "Gemm": 1}


def test_fp32_nodes_a_keep_list_asked_for_are_not_an_fp32_fallback():
    """The report net's what-if arm on the H200 read 'NOT VALID: ran 4 of its 4 heavy nodes in FP32' although its
    keep-list asked for those 4: FP32 by request. One FP32 Conv beyond the keep-list is still a fallback."""
    census = {"fp16": {"Elu": 4, "Transpose": 2}, "fp32": {"Conv": 4}}
    asked_all = HeavyCensus.of("fp16+keep-fp32", "fp16", "mixed", census, {"Conv": 4})
    assert asked_all is None or check_heavy_fp32([asked_all]) is None
    one_more = HeavyCensus.of("fp16+keep-fp32", "fp16", "mixed", census, {"Conv": 3})
    reason = check_heavy_fp32([one_more])
    assert one_more.fp32 == {"Conv": 1} and reason is not None and "fp16+keep-fp32" in reason.text
    unasked = HeavyCensus.of("fp16", "fp16", "mixed", census)
    assert unasked.fp32 == {"Conv": 4} and check_heavy_fp32([unasked]) is not None


def test_a_kept_node_that_ort_fused_still_counts_as_kept():
    """ORT's executed graph may name a kept Conv by its fusion (FusedConv, a Conv with its activation): it counts
    against the Conv's keep; one FusedConv beyond the keep-list is a fallback."""
    from trtprof.system.validity import unasked_fp32

    assert unasked_fp32({"FusedConv": 3, "Conv": 1}, {"Conv": 4}) == {}
    assert unasked_fp32({"FusedConv": 3, "Conv": 2}, {"Conv": 4}) == {"Conv": 1}
    assert unasked_fp32({"FusedConv": 2}, None) == {"FusedConv": 2}
    assert unasked_fp32({"MatMul": 2}, {"Conv": 2}) == {"MatMul": 2}
