"""The fake cannot drift: its surface against the real importable TensorRT module of the same flavour.

The contract tests can only pass when every name the backend uses exists in the fake; these tests
check that every public class, method, property and enum member the fake offers exists, with the same
name, in the real module, and that the fake refuses what the real one refuses (same snippet, both
modules). Together: what the backend uses exists in the real library.

Real ``tensorrt_rtx`` installs anywhere (CI runs these with marker ``tensorrt_rtx``); real enterprise
``tensorrt`` only where NVIDIA's index and a GPU driver are (marker ``tensorrt``; skipped elsewhere).
"""
from __future__ import annotations

import enum
import importlib
import types
import warnings

import pytest

from ..fakes.fake_tensorrt import FAKE_ONLY_NAMES, make_fake_tensorrt

RTX_VERSION = "1.7.1.116"


def _real(module_name: str) -> types.ModuleType:
    try:
        module = importlib.import_module(module_name)
    except ImportError as err:
        pytest.skip(f"{module_name} not importable ({err})")
    if getattr(module, "IS_FAKE", False) or not hasattr(module, "__version__"):
        pytest.skip(f"the importable {module_name} is not the real library")
    return module


def _flavours():
    return [
        pytest.param("tensorrt_rtx", lambda v: make_fake_tensorrt(v, flavour="rtx"), marks=pytest.mark.tensorrt_rtx,
                     id="rtx"),
        pytest.param("tensorrt", lambda v: make_fake_tensorrt(v), marks=pytest.mark.tensorrt, id="enterprise"),
    ]


def _own_public(cls: type) -> set[str]:
    """Public names a fake class defines itself (not inherited from object/bytes/enum)."""
    names = set()
    for klass in cls.__mro__:
        if klass.__module__ == "builtins" or klass in (enum.Enum, enum.IntEnum, enum.IntFlag, enum.Flag, int):
            continue
        names |= {n for n in vars(klass) if not n.startswith("_")}
    return names


@pytest.mark.parametrize("module_name, make", _flavours())
def test_every_fake_name_exists_in_the_real_module(module_name, make):
    real = _real(module_name)
    fake = make(real.__version__)
    problems = []
    for name in sorted(n for n in vars(fake) if not n.startswith("_") and n not in FAKE_ONLY_NAMES):
        if not hasattr(real, name):
            problems.append(f"{name}: not in {module_name}")
            continue
        value, real_value = getattr(fake, name), getattr(real, name)
        if isinstance(value, type) and issubclass(value, enum.Enum):
            missing = set(value.__members__) - set(getattr(real_value, "__members__", {}))
            problems += [f"{name}.{m}: no such member in {module_name}" for m in sorted(missing)]
        elif isinstance(value, type):
            missing = _own_public(value) - set(dir(real_value))
            problems += [f"{name}.{m}: no such attribute in {module_name}" for m in sorted(missing)]
    severity = getattr(fake.ILogger, "Severity")
    problems += [f"ILogger.Severity.{m}: missing" for m in severity.__members__ if not hasattr(real.ILogger.Severity, m)]
    assert not problems, "fake drifted from the real module:\n" + "\n".join(problems)


@pytest.mark.parametrize("module_name, make", _flavours())
def test_fake_and_real_refuse_the_same_things(module_name, make):
    real = _real(module_name)
    fake = make(real.__version__)
    for trt in (real, fake):
        label = "real" if trt is real else "fake"
        builder = trt.Builder(trt.Logger(trt.Logger.ERROR))
        config = builder.create_builder_config()
        with pytest.raises(AttributeError):  # pybind objects take no new attributes (a typo is an error)
            config.no_such_option = 1
        # the weak-typing surface is absent or present in both alike
        assert hasattr(trt.BuilderFlag, "FP16") == hasattr(fake.BuilderFlag, "FP16"), label
        assert hasattr(trt.NetworkDefinitionCreationFlag, "EXPLICIT_BATCH") == \
            hasattr(fake.NetworkDefinitionCreationFlag, "EXPLICIT_BATCH"), label
        assert hasattr(trt.ILayer, "precision") == hasattr(fake.ILayer, "precision"), label
        assert builder.create_network(1 << 20) is None, label  # unknown creation-flag bits
        assert builder.create_network(0) is not None, label


@pytest.mark.tensorrt_rtx
def test_rtx_fake_and_real_agree_on_the_build_time_answers(conv_model):
    real = _real("tensorrt_rtx")
    fake = make_fake_tensorrt(real.__version__, flavour="rtx")
    fake.behaviour.gpu_compute_capability = None  # this CI machine has no GPU: say the same of the fake
    from trtprof.system import cuda

    if cuda.device_count() > 0:
        pytest.skip("these are the no-GPU answers; this machine has a GPU")
    for trt in (real, fake):
        label = "real" if trt is real else "fake"
        logger = trt.Logger(trt.Logger.ERROR)
        builder = trt.Builder(logger)
        config = builder.create_builder_config()
        assert config.num_compute_capabilities == 0, label  # the portable default: no targets set
        assert config.set_compute_capability(trt.ComputeCapability.SM86, 0) is False, label  # index out of range
        config.num_compute_capabilities = 2
        assert config.set_compute_capability(trt.ComputeCapability.NONE, 0) is False, label
        assert config.set_compute_capability(trt.ComputeCapability.SM86, 0) is True, label
        assert config.set_compute_capability(trt.ComputeCapability.SM120, 1) is True, label
        assert [config.get_compute_capability(i).name for i in range(2)] == ["SM86", "SM120"], label
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)  # real: "timing cache operations are no-ops"
            empty = len(memoryview(config.create_timing_cache(b"").serialize()))
            garbage = config.create_timing_cache(b"not a timing cache")
            assert config.set_timing_cache(garbage, False) is True, label  # True for garbage...
            assert len(memoryview(garbage.serialize())) == empty, label  # ...but it is an empty cache
        network = builder.create_network(0)
        parser = trt.OnnxParser(network, logger)
        assert parser.parse_from_file(str(conv_model)), label
        layer = network.get_layer(0)
        assert isinstance(layer.type, enum.Enum) or type(layer.type).__name__ == "LayerType", label
        with pytest.raises(AttributeError):
            layer.precision = trt.float16  # strongly typed: no per-layer precision
        profile = builder.create_optimization_profile()
        profile.set_shape("input", (1, 3, 16, 16), (2, 3, 16, 16), (2, 3, 16, 16))
        config.add_optimization_profile(profile)
        plan = builder.build_serialized_network(network, config)
        assert plan is not None and type(plan).__name__ == "IHostMemory" and plan.nbytes > 0, label
        runtime = trt.Runtime(logger)
        validity, diagnostics = runtime.get_engine_validity(plan)
        assert validity == trt.EngineValidity.INVALID, label  # no GPU: nothing can run here
        assert runtime.deserialize_cuda_engine(plan) is None, label


@pytest.mark.tensorrt_rtx
def test_rtx_parser_errors_are_enums_with_node_names(unsupported_op_model):
    real = _real("tensorrt_rtx")
    fake = make_fake_tensorrt(real.__version__, flavour="rtx")
    fake.behaviour.parse_errors = [("fancy", "FancyOp", 0, "no importer")]
    for trt in (real, fake):
        logger = trt.Logger(trt.Logger.ERROR)
        network = trt.Builder(logger).create_network(0)
        parser = trt.OnnxParser(network, logger)
        assert not parser.parse_from_file(str(unsupported_op_model))
        err = parser.get_error(0)
        # real: an unknown op is INVALID_NODE ("Plugin not found"), not UNSUPPORTED_NODE: only the type is shared
        assert type(err.code()).__name__ == "ErrorCode" and err.code().name in real.ErrorCode.__members__
        assert err.node_name() == "fancy" and err.node_operator() == "FancyOp"
