"""Issue 45, deliverable 4: ``cache prune`` and friends touch exactly the files an entry's metadata names
and trtprof wrote. A user's ``<stem>.onnx.bak`` or ``<stem>.notes.txt`` beside an entry is not one of
them (was: any ``<stem>.<a>.<b>`` counted, prune removed both and the dry run listed them); an artifact
that is a symlink is refused at load (``bench``) and called corrupt by ``cache ls`` in the same words."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from trtprof import backends
from trtprof.cli._common import keeps_runtime_cache
from trtprof.engines.cache import EngineCache, EngineRecord
from trtprof.engines.cache_admin import CORRUPT, OK, scan_dir
from trtprof.spec import BuildSpec, CacheKey, Precision, TensorSpec

from ..cli.test_user_errors import assert_one_line, run_main


@pytest.fixture
def entry(conv_model, tmp_path, capsys) -> tuple[Path, Path, Path]:
    """(engines dir, metadata, artifact) of one ONNX Runtime fp32 entry."""
    engines = tmp_path / "engines"
    code, _, err = run_main(capsys, "build", str(conv_model), "--fp32", "--engines", str(engines),
                            "--backend", "onnxruntime")
    assert code == 0, err
    (meta,) = engines.glob("*.json")
    return engines, meta, meta.with_suffix(".onnx")


def _users_files(meta: Path) -> list[Path]:
    stem = meta.name[: -len(".json")]
    made = [meta.parent / f"{stem}.onnx.bak", meta.parent / f"{stem}.notes.txt", meta.parent / f"{stem}.json.old"]
    for path in made:
        path.write_text("the user's own\n")
    return made


@pytest.mark.parametrize("filters", [["--older-than", "0s"], ["--model", "convnet"]])
def test_prune_removes_the_entry_and_keeps_the_users_files_beside_it(filters, entry, capsys):
    engines, meta, artifact = entry
    users = _users_files(meta)
    code, out, err = run_main(capsys, "cache", "prune", str(engines), *filters, "--dry-run")
    assert code == 0, err
    assert f"{meta}" in out and f"{artifact}" in out
    assert not any(p.name in out.split("3 other files")[0] for p in users), out  # never listed for removal
    assert "3 other files not trtprof's, left alone" in out
    code, out, err = run_main(capsys, "cache", "prune", str(engines), *filters)
    assert code == 0, err
    assert not meta.exists() and not artifact.exists()
    assert all(p.read_text() == "the user's own\n" for p in users)


def test_prune_corrupt_keeps_the_users_files_of_a_corrupt_or_orphaned_entry(entry, capsys):
    engines, meta, artifact = entry
    users = _users_files(meta)
    meta.write_text("[]")  # corrupt metadata: its artifact is the one name a build writes, not every sibling
    code, out, err = run_main(capsys, "cache", "prune", str(engines), "--corrupt")
    assert code == 0, err
    assert not meta.exists() and not artifact.exists() and all(p.exists() for p in users)
    code, out, err = run_main(capsys, "cache", "prune", str(engines), "--corrupt")  # nothing of trtprof's left
    assert code == 2 and "holds no trtprof engine entry" in err and all(p.exists() for p in users)


def test_an_orphan_is_only_the_artifact_name_a_build_writes(entry, capsys):
    engines, meta, artifact = entry
    users = _users_files(meta)
    meta.unlink()
    items = scan_dir(engines).items
    assert [(i.status, [f.name for f in i.files]) for i in items] == [("orphan", [artifact.name])]
    assert sorted(p.name for p in scan_dir(engines).foreign) == sorted(p.name for p in users)


def _rtx_entry(root: Path) -> Path:
    """A TensorRT-RTX entry written through the cache (the record a fake build returns)."""
    spec = BuildSpec.make(model_sha256="cd" * 32, backend="tensorrt-rtx", precision=Precision.FP16, batch_sizes=[1])
    env = {"backend": "tensorrt-rtx", "tensorrt_rtx_version": "1.0"}
    key = CacheKey.derive(spec, env)
    cache = EngineCache(root)

    def build(tmp: Path) -> EngineRecord:
        tmp.write_bytes(b"plan")
        return EngineRecord(key=key.hexdigest, model="m", model_path="m.onnx", spec=spec, environment=env,
                            artifact="", artifact_sha256="", inputs=(TensorSpec("x", "float32", ("N", 4)),),
                            outputs=(TensorSpec("y", "float32", ("N", 4)),), build_seconds=0.0, created="")

    record, _ = cache.get_or_build(key, cache.entry_stem("m", spec, key), ".plan", build)
    return record.artifact_path


def test_a_tensorrt_rtx_runtime_cache_is_its_entrys_and_nothing_else_is(tmp_path):
    from trtprof.backends.tensorrt.rtx import RUNTIME_CACHE_SUFFIX

    plan = _rtx_entry(tmp_path)
    runtime_cache = plan.with_name(f"{plan.stem}.sm89{RUNTIME_CACHE_SUFFIX}")  # as RtxBackend.load names it
    runtime_cache.write_bytes(b"kernels")
    users = [plan.with_name(plan.name + ".bak"), plan.with_name(runtime_cache.name + ".bak"),
             plan.with_name(f"{plan.stem}.sm89.txt")]
    for p in users:
        p.write_text("mine")
    (item,) = scan_dir(tmp_path, verify=True, runtime_caches=keeps_runtime_cache).items
    assert item.status == OK and sorted(f.name for f in item.files) == sorted(
        [plan.with_suffix(".json").name, plan.name, runtime_cache.name])
    assert sorted(p.name for p in scan_dir(tmp_path, runtime_caches=keeps_runtime_cache).foreign) == sorted(
        p.name for p in users)
    # told of no backend that keeps runtime caches (scan_dir's default), the cache file is left alone
    (item,) = scan_dir(tmp_path).items
    assert runtime_cache not in item.files and runtime_cache in scan_dir(tmp_path).foreign


def test_runtime_caches_are_counted_for_the_backends_whose_capabilities_say_so(tmp_path, capsys):
    """Only TensorRT-RTX declares ``runtime_cache``; the CLI asks the backend, by the entry stem's backend part. A
    ``.sm89.rtxcache`` beside an entry of a backend that keeps none is not trtprof's: prune leaves it."""
    assert [n for n in backends.names() if keeps_runtime_cache(n)] == ["tensorrt-rtx"]
    plan = _rtx_entry(tmp_path)
    runtime_cache = plan.with_name(f"{plan.stem}.sm89.rtxcache")
    runtime_cache.write_bytes(b"kernels")
    other = tmp_path / plan.name.replace("tensorrt-rtx", "tensorrt").replace(".plan", ".sm89.rtxcache")
    other.write_bytes(b"not a runtime cache of anything")
    code, out, err = run_main(capsys, "cache", "prune", str(tmp_path), "--older-than", "0s")
    assert code == 0, err
    assert not plan.exists() and not runtime_cache.exists() and other.exists()


def test_every_builtin_backends_artifact_suffix_is_known_to_the_cache():
    """A new backend must add its suffix, or prune would leave its orphans alone (never the reverse)."""
    import trtprof.backends as backends
    from trtprof.engines.cache import ARTIFACT_SUFFIXES

    for name in backends.names():
        try:
            impl = backends.get(name)
        except Exception:  # noqa: BLE001 - a backend whose library is missing here still has its class suffix
            continue
        assert impl.artifact_suffix in ARTIFACT_SUFFIXES, (name, impl.artifact_suffix)


# --- an artifact that is a symlink: refused the same way at load and in cache ls ---------------------

def test_an_artifact_that_is_a_symlink_is_corrupt_for_bench_and_cache_ls_alike(entry, tmp_path, capsys):
    engines, meta, artifact = entry
    outside = tmp_path / "elsewhere.onnx"
    shutil.move(artifact, outside)
    artifact.symlink_to(outside)  # same bytes: the sha256 in the metadata still matches through the link
    code, _, err = run_main(capsys, "bench", str(engines), "--warmup", "1", "--iterations", "2",
                            "--out", str(tmp_path / "r.json"))
    assert_one_line(code, err, artifact.name, "artifact is a symlink")
    assert not (tmp_path / "r.json").exists()
    code, out, err = run_main(capsys, "cache", "ls", str(engines))
    assert code == 0 and f"corrupt: {meta.name}: artifact is a symlink" in out, out + err
    (item,) = scan_dir(engines).items
    assert item.status == CORRUPT and item.files == [meta]  # the link is not the entry's file
    code, out, err = run_main(capsys, "cache", "prune", str(engines), "--corrupt")
    assert code == 0 and not meta.exists(), err
    assert artifact.is_symlink() and outside.exists()  # neither the link nor what it points to is touched
