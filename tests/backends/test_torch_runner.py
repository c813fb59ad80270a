"""The torch runner's settings record (``backends.torch_runner.TorchRunnerSettings``) on CPU torch: each field
reaches the runner as the keyword arguments it replaced did (device, the fp16 input cast, the memory format
and the inputs converted to NHWC, ignored by a contiguous runner), the defaults are a CUDA, contiguous,
casting runner, and the runner's names stay importable from ``backends.torch``, where callers take them."""
from __future__ import annotations

import pytest

from trtprof.spec import Precision, TensorSpec

torch = pytest.importorskip("torch")

from trtprof.backends import torch as torch_backend  # noqa: E402
from trtprof.backends import torch_runner  # noqa: E402
from trtprof.backends.torch_module import CHANNELS_LAST, CONTIGUOUS  # noqa: E402
from trtprof.backends.torch_runner import TorchRunner, TorchRunnerSettings  # noqa: E402

X = TensorSpec("x", "float32", (2, 3, 4, 4))
Y = TensorSpec("y", "float32", (2, 3, 4, 4))


def _runner(precision: Precision = Precision.FP32, **settings) -> TorchRunner:
    return TorchRunner(torch.nn.Identity(), precision, (X,), (Y,), settings=TorchRunnerSettings(**settings))


def test_the_defaults_are_a_cuda_contiguous_runner_that_casts_its_inputs():
    runner = TorchRunner(torch.nn.Identity(), Precision.FP16, (X,), (Y,))  # no CUDA touched before prepare
    assert (runner.device, runner.memory_format, runner.nhwc_inputs) == ("cuda", CONTIGUOUS, frozenset())
    assert runner.cast_in(torch.zeros(2, 3, 4, 4), "x").dtype == torch.float16
    assert TorchRunnerSettings() == TorchRunnerSettings(device="cuda", cast_io=True, memory_format=CONTIGUOUS,
                                                        nhwc_inputs=frozenset())


@pytest.mark.parametrize("cast_io, dtype", [(True, "float16"), (False, "float32")])
def test_cast_io_decides_whether_an_fp16_runner_casts_its_float_inputs(cast_io, dtype):
    runner = _runner(Precision.FP16, device="cpu", cast_io=cast_io)
    assert runner.cast_in(torch.zeros(2, 3, 4, 4), "x").dtype == getattr(torch, dtype)
    assert runner.cast_in(torch.zeros(2, 3, dtype=torch.int64), "x").dtype == torch.int64  # ints never cast


def test_a_contiguous_runner_ignores_nhwc_inputs_a_channels_last_one_converts_them():
    flat = _runner(device="cpu", memory_format=CONTIGUOUS, nhwc_inputs=frozenset({"x"}))
    assert flat.nhwc_inputs == frozenset() and flat.memory_format == CONTIGUOUS
    assert flat.cast_in(torch.zeros(2, 3, 4, 4), "x").is_contiguous()
    nhwc = _runner(device="cpu", memory_format=CHANNELS_LAST, nhwc_inputs=frozenset({"x"}))
    assert nhwc.nhwc_inputs == frozenset({"x"}) and nhwc.memory_format == CHANNELS_LAST and nhwc.device == "cpu"
    got = nhwc.cast_in(torch.zeros(2, 3, 4, 4), "x")
    assert got.is_contiguous(memory_format=torch.channels_last) and not got.is_contiguous()
    assert nhwc.cast_in(torch.zeros(2, 3, 4, 4), "other").is_contiguous()  # not listed: left alone


def test_the_settings_record_is_frozen():
    with pytest.raises(AttributeError):
        TorchRunnerSettings().device = "cpu"  # type: ignore[misc]


def test_the_runners_names_are_still_taken_from_backends_torch():
    for name in ("TorchRunner", "TorchRunnerSettings", "DeviceArray", "cudnn_mode"):
        assert getattr(torch_backend, name) is getattr(torch_runner, name)
