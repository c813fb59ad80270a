"""--what-if nhwc on the CPU: the refusals (another backend, a model without Conv/pooling, no GPU), the
changed arm's runner option reaching ORT's provider options (a RECORDING FAKE session, as in
tests/backends/test_ort_cuda_contract.py), the cache keys of the two arms, and the NCHW/NHWC output check
with a FAKE session at its tolerance. The measured A/B runs on the H200 (benchmarks)."""
from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from trtprof import backends
from trtprof.backends import onnxruntime_cuda as oc
from trtprof.builder.pipeline import RUNNER_OPTIONS, key_spec
from trtprof.cli import main
from trtprof.compare import ab, whatif
from trtprof.errors import BadInput, TrtprofError
from trtprof.model.demo import make_demo_model
from trtprof.model.onnx_model import OnnxModel
from trtprof.spec import BuildSpec, CacheKey, Precision

from tests.compare.test_whatif_channels_last import _mlp  # a model with no Conv: nothing to change
from trtprof.system import cuda
from tests.backends.test_ort_cuda_contract import INPUTS, OUTPUTS, fake_ort  # noqa: F401 - the fixture

pytest.importorskip("onnxruntime")




def test_the_layout_option_is_a_capability_and_a_runner_option():
    assert backends.capabilities("onnxruntime-cuda").layout_option == oc.LAYOUT_OPTION == "prefer_nhwc"
    assert all(backends.capabilities(n).layout_option is None for n in ("onnxruntime", "torch", "tensorrt"))
    assert oc.LAYOUT_OPTION in RUNNER_OPTIONS
    assert ab.layout_backends() == {"onnxruntime-cuda": "prefer_nhwc"}


@pytest.mark.parametrize("backend", ["onnxruntime", "torch", "tensorrt"])
def test_nhwc_on_another_backend_is_one_line_before_any_build(tmp_path, capsys, backend):
    src = make_demo_model(tmp_path / "net.onnx", channels=8, image=16, classes=10)
    engines = tmp_path / "e"
    assert main(["compare", str(src), "--what-if", "nhwc", "--backend", backend, "--engines", str(engines)]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and not engines.exists()
    assert (f"--what-if nhwc runs on --backend onnxruntime-cuda only (it sets the runtime's NHWC layout option, "
            f"prefer_nhwc; --backend {backend} has none to set)") in err


def test_a_model_without_conv_or_pooling_is_refused_in_one_line(tmp_path, capsys):
    engines = tmp_path / "e"
    assert main(["compare", str(_mlp(tmp_path / "mlp.onnx")), "--what-if", "nhwc", "--backend", "onnxruntime-cuda",
                 "--engines", str(engines)]) == 2
    err = capsys.readouterr().err.strip()
    assert "--what-if nhwc: the model has no Conv/ConvTranspose/BatchNormalization or pooling node" in err
    assert "nothing to change" in err and "\n" not in err and not engines.exists()


def test_nhwc_targets_count_what_the_option_switches(tmp_path):
    src = make_demo_model(tmp_path / "net.onnx", channels=8, image=16, classes=10)
    targets = whatif.nhwc_targets(OnnxModel.load(src), "prefer_nhwc")
    assert targets.get("Conv", 0) >= 1 and set(targets) <= set(whatif.NHWC_OPS)
    with pytest.raises(BadInput, match="nothing to change"):
        whatif.nhwc_targets(OnnxModel.load(_mlp(tmp_path / "mlp.onnx")), "prefer_nhwc")


@pytest.mark.skipif(cuda.device_count() > 0, reason="the refusal of a machine without a GPU")
def test_nhwc_without_a_gpu_is_the_backend_unavailable_line(tmp_path, capsys):
    src = make_demo_model(tmp_path / "net.onnx", channels=8, image=16, classes=10)
    engines = tmp_path / "e"
    for backend in ("onnxruntime-cuda", "auto"):  # auto means onnxruntime-cuda for this experiment
        assert main(["compare", str(src), "--what-if", "nhwc", "--backend", backend, "--engines", str(engines)]) == 2
        err = capsys.readouterr().err.strip()
        assert "backend 'onnxruntime-cuda' cannot build here" in err and "\n" not in err
    assert not engines.exists()


def _arms_of_compare_nhwc(tmp_path, monkeypatch, precision="fp16"):
    """The arms compare_nhwc hands to compare_ab (the build, the GPU check and the measurement replaced)."""
    seen = {}

    def fake_compare_ab(arms, batch_sizes, options, **kw):
        seen["arms"] = list(arms)
        return ab.AbOutcome(SimpleNamespace(model="", comparisons=[], warnings=[]), list(arms))

    monkeypatch.setattr(ab, "resolve_for_build", lambda name: None)
    monkeypatch.setattr(whatif, "check_nhwc", lambda *a, **k: 0.0)
    monkeypatch.setattr(ab, "compare_ab", fake_compare_ab)
    src = make_demo_model(tmp_path / "net.onnx", channels=8, image=16, classes=10)
    out = ab.compare_nhwc(src, precision, [1], engines_dir=tmp_path / "e", backend="onnxruntime-cuda")
    return seen["arms"], out


def test_the_changed_arm_puts_prefer_nhwc_1_into_the_provider_options(tmp_path, monkeypatch, fake_ort):
    arms, out = _arms_of_compare_nhwc(tmp_path, monkeypatch)
    assert [a.label for a in arms] == ["fp32", "fp16", "fp16+nhwc"]
    changed = arms[-1]
    assert changed.options == (("prefer_nhwc", "1"),) and changed.model == arms[0].model  # the same file
    assert changed.engines_dir == whatif.whatif_dir(tmp_path / "e") and changed.backend == "onnxruntime-cuda"
    assert out.what_if["option"] == {"prefer_nhwc": "1"} and out.what_if["changed_model"] is None
    for arm in arms[1:]:  # each arm's engine as build_engines makes its spec (the arm's options)
        spec = BuildSpec.make(model_sha256="x", backend=arm.backend, precision=Precision.parse(arm.precision),
                              batch_sizes=(1,), options=dict(arm.options))
        oc.OnnxRuntimeCudaBackend().load(Path("m.onnx"), SimpleNamespace(spec=spec, inputs=INPUTS, outputs=OUTPUTS))
    plain, nhwc = (m["cuda_options"] for m in fake_ort.made)
    assert plain["prefer_nhwc"] == "0" and nhwc["prefer_nhwc"] == "1"
    # the rest of the chosen options stay as they were
    assert {k: v for k, v in nhwc.items() if k not in ("prefer_nhwc", "user_compute_stream")} == \
        {k: v for k, v in plain.items() if k not in ("prefer_nhwc", "user_compute_stream")}


def test_an_explicit_cuda_options_override_still_wins_over_the_engines_option(fake_ort):
    spec = BuildSpec.make(model_sha256="x", backend="onnxruntime-cuda", precision=Precision.FP16, batch_sizes=(1,),
                          options={"prefer_nhwc": "1"})
    oc.OnnxRuntimeCudaBackend().load(Path("m.onnx"), SimpleNamespace(spec=spec, inputs=INPUTS, outputs=OUTPUTS),
                                     cuda_options={"prefer_nhwc": "0"})
    assert fake_ort.made[0]["cuda_options"]["prefer_nhwc"] == "0"


def test_the_two_arms_have_different_cache_keys_and_are_never_picked_silently():
    from trtprof.compare.core import select_records
    from trtprof.engines.cache import EngineRecord

    def spec(options):
        return BuildSpec.make(model_sha256="x", backend="onnxruntime-cuda", precision=Precision.FP16,
                              batch_sizes=(1, 8), options=options)

    plain, nhwc = spec({}), spec({"prefer_nhwc": "1"})
    env = {"onnxruntime": "1.31.1", "device": "H200"}
    assert CacheKey.derive(key_spec(plain), env) != CacheKey.derive(key_spec(nhwc), env)
    assert dict(key_spec(nhwc).options) == {"prefer_nhwc": "1"} and key_spec(nhwc).batch_sizes == ()

    def record(s, created):
        return EngineRecord(key=created, model="net", model_path="/m/net.onnx", spec=s, environment=env,
                            artifact="a", artifact_sha256="", inputs=(), outputs=(), build_seconds=0.0,
                            created=created)

    with pytest.raises(BadInput, match=r"several fp16 engines here \(net/onnxruntime-cuda, net/onnxruntime-cuda\+1\)"):
        select_records([record(plain, "1"), record(nhwc, "2")], ["fp16"], "onnxruntime-cuda")


class _FakeNhwcSession:
    """A FAKE ORT session: outputs y = base, plus ``shift`` where prefer_nhwc is 1 (nothing runs)."""

    def __init__(self, options, shift):
        self.options = options
        self.shift = shift if options["prefer_nhwc"] == "1" else 0.0

    def get_outputs(self):
        return [SimpleNamespace(name="y")]

    def run(self, names, feeds):
        return [np.array([[2.0, -4.0, 1.0 + self.shift]], np.float32)]


@pytest.mark.parametrize("factor, refused", [(0.9, False), (1.1, True)])
def test_the_nhwc_output_check_just_inside_and_just_outside(monkeypatch, tmp_path, factor, refused):
    from trtprof.backends import onnxruntime as ortb

    made = []

    def fake_session(model, precision, *, path, device="cpu", cuda_options=None, **kw):
        made.append((precision, device, dict(cuda_options or {})))
        return _FakeNhwcSession(dict(cuda_options or {}), 4.0 * whatif.NHWC_RTOL * factor)

    monkeypatch.setattr(ortb, "ort_session", fake_session)
    feeds = {"x": np.zeros((1, 3), np.float32)}
    if refused:
        with pytest.raises(TrtprofError, match=r"the nhwc session's outputs differ .* of their scale \(> 0\.001\)"):
            whatif.check_nhwc(tmp_path / "m.onnx", feeds, "prefer_nhwc")
    else:
        assert whatif.check_nhwc(tmp_path / "m.onnx", feeds, "prefer_nhwc") == pytest.approx(
            whatif.NHWC_RTOL * factor, rel=1e-3)
    assert [m[0] for m in made] == [Precision.FP32, Precision.FP32] and {m[1] for m in made} == {"cuda"}
    assert [m[2]["prefer_nhwc"] for m in made] == ["0", "1"]
    assert all(m[2]["enable_cuda_graph"] == "0" and m[2]["cudnn_conv_algo_search"] == "EXHAUSTIVE" for m in made)
