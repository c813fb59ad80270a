from __future__ import annotations

import multiprocessing as mp
from pathlib import Path

import pytest

from trtprof.builder.pipeline import BuildSettings, build_engines
from trtprof.engines.cache import EngineCache, EngineRecord, list_engines
from trtprof.errors import CacheCorrupt
from trtprof.spec import BuildSpec, CacheKey, Precision

from ..conftest import tree_snapshot

ENV = {"backend": "onnxruntime", "onnxruntime": "1.0", "device": "cpu-x"}


def spec(**kw) -> BuildSpec:
    base = dict(model_sha256="ab" * 32, backend="onnxruntime", precision=Precision.FP32, batch_sizes=[1, 8])
    base.update(kw)
    return BuildSpec.make(**base)


def test_key_is_stable_and_normalised():
    a = CacheKey.derive(spec(batch_sizes=[8, 1, 8]), ENV)
    b = CacheKey.derive(spec(batch_sizes=[1, 8]), dict(reversed(list(ENV.items()))))
    assert a == b and len(a.hexdigest) == 64


@pytest.mark.parametrize("change", [
    dict(precision=Precision.FP16),
    dict(batch_sizes=[1, 16]),
    dict(model_sha256="cd" * 32),
    dict(shapes={"x": (1, 3, 32, 32)}),
    dict(options={"workspace_mb": 512}),
    dict(backend="tensorrt"),
])
def test_key_changes_with_everything_that_changes_the_artifact(change):
    assert CacheKey.derive(spec(**change), ENV) != CacheKey.derive(spec(), ENV)


@pytest.mark.parametrize("env_change", [{"onnxruntime": "2.0"}, {"device": "cpu-y"}])
def test_key_changes_with_backend_version_and_device(env_change):
    assert CacheKey.derive(spec(), {**ENV, **env_change}) != CacheKey.derive(spec(), ENV)


def test_spec_json_roundtrip():
    s = spec(shapes={"tokens": (1, 128, 4)}, options={"opt_batch": 8})
    assert BuildSpec.from_json(s.to_json()) == s


def test_second_build_is_a_cache_hit_that_changes_nothing(conv_model, tmp_path):
    engines = tmp_path / "engines"
    first = build_engines(conv_model, [Precision.FP32, Precision.FP16], [1, 4],
                          settings=BuildSettings(engines_dir=engines, backend="onnxruntime"))
    assert [o.built for o in first] == [True, True]
    before = tree_snapshot(engines)
    second = build_engines(conv_model, [Precision.FP32, Precision.FP16], [4, 1],
                           settings=BuildSettings(engines_dir=engines, backend="onnxruntime"))
    assert [o.built for o in second] == [False, False]
    assert tree_snapshot(engines) == before
    assert {o.record.key for o in first} == {o.record.key for o in second}
    # artifact + metadata side by side, human-readable names
    names = sorted(before)
    assert len(names) == 4
    assert all(n.startswith("convnet.fp") and ".onnxruntime." in n for n in names)


def test_corrupt_artifact_is_rebuilt_by_build_and_refused_by_load(conv_model, tmp_path):
    engines = tmp_path / "engines"
    (outcome,) = build_engines(conv_model, [Precision.FP32],
                               settings=BuildSettings(engines_dir=engines, backend="onnxruntime"))
    artifact = outcome.record.artifact_path
    good = artifact.read_bytes()
    artifact.write_bytes(good[: len(good) // 2])
    (record,) = list_engines(engines)
    with pytest.raises(CacheCorrupt, match="sha256"):
        record.verify()
    (again,) = build_engines(conv_model, [Precision.FP32],
                             settings=BuildSettings(engines_dir=engines, backend="onnxruntime"))
    assert again.built and artifact.read_bytes() == good


def test_rebuild_forces_a_build(conv_model, tmp_path):
    engines = tmp_path / "engines"
    build_engines(conv_model, [Precision.FP32], settings=BuildSettings(engines_dir=engines, backend="onnxruntime"))
    (outcome,) = build_engines(conv_model, [Precision.FP32],
                               settings=BuildSettings(engines_dir=engines, backend="onnxruntime", rebuild=True))
    assert outcome.built
    assert len(list(engines.glob("*.json"))) == 1


def test_failed_build_leaves_nothing(tmp_path):
    cache = EngineCache(tmp_path / "engines")
    key = CacheKey.derive(spec(), ENV)

    def boom(tmp: Path) -> EngineRecord:
        tmp.write_bytes(b"partial")
        raise RuntimeError("backend crashed mid-write")

    with pytest.raises(RuntimeError):
        cache.get_or_build(key, "m.fp32.onnxruntime.x", ".onnx", boom)
    assert tree_snapshot(cache.root) == {}


def _build_in_process(args):
    model, engines = args
    from trtprof.builder.pipeline import BuildSettings
    from trtprof.builder.pipeline import build_engines as build

    (outcome,) = build(Path(model), [Precision.FP32],
                       settings=BuildSettings(engines_dir=Path(engines), backend="onnxruntime"))
    return outcome.record.artifact_sha256


def test_two_processes_building_one_key_end_with_one_good_artifact(conv_model, tmp_path):
    engines = tmp_path / "engines"
    ctx = mp.get_context("spawn")
    with ctx.Pool(2) as pool:
        digests = pool.map(_build_in_process, [(str(conv_model), str(engines))] * 2)
    assert digests[0] == digests[1]
    (record,) = list_engines(engines)
    record.verify()
    leftovers = [p for p in engines.iterdir() if p.name.startswith(".") and p.name != ".locks"]
    assert leftovers == []
