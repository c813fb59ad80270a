"""The engine cache's checks at their edges: the schema number, an artifact name, an empty artifact,
the batch profile that covers a request; each just accepted and just refused. Fake builds (a
callable that writes bytes) stand in for a backend: the cache never looks inside an artifact."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from trtprof.engines.cache import EngineCache, EngineRecord, list_engines
from trtprof.util.files import safe_stem
from trtprof.errors import BadInput, CacheCorrupt
from trtprof.spec import CACHE_SCHEMA, BuildSpec, CacheKey, Precision

from ..conftest import tree_snapshot

ENV = {"backend": "onnxruntime", "onnxruntime": "1.0", "device": "cpu-x"}


def spec(batch_sizes=(1, 8)) -> BuildSpec:
    return BuildSpec.make(model_sha256="ab" * 32, backend="onnxruntime", precision=Precision.FP32,
                          batch_sizes=list(batch_sizes))


def fake_build(data: bytes, the_spec: BuildSpec, key: CacheKey):
    """A fake backend build: writes ``data`` as the artifact and returns its record."""
    def build(tmp: Path) -> EngineRecord:
        tmp.write_bytes(data)
        return EngineRecord(key=key.hexdigest, model="m", model_path="m.onnx", spec=the_spec, environment=dict(ENV),
                            artifact="", artifact_sha256="", inputs=(), outputs=(), build_seconds=0.0, created="now")
    return build


def built(tmp_path: Path, data: bytes = b"engine", the_spec: BuildSpec | None = None) -> tuple[EngineCache, EngineRecord]:
    the_spec = the_spec or spec()
    key = CacheKey.derive(the_spec, ENV)
    cache = EngineCache(tmp_path / "engines")
    record, was_built = cache.get_or_build(key, cache.entry_stem("m", the_spec, key), ".onnx",
                                           fake_build(data, the_spec, key))
    assert was_built
    return cache, record


def rewrite_meta(record: EngineRecord, **changes) -> Path:
    meta = record.meta_path
    data = json.loads(meta.read_text())
    data.update(changes)
    meta.write_text(json.dumps(data))
    return meta


def test_the_current_schema_is_read_and_its_neighbours_are_refused(tmp_path):
    _, record = built(tmp_path)
    assert EngineRecord.read(record.meta_path).key == record.key
    for other in (CACHE_SCHEMA - 1, CACHE_SCHEMA + 1, None, str(CACHE_SCHEMA)):
        meta = rewrite_meta(record, schema=other)
        with pytest.raises(CacheCorrupt, match="schema"):
            EngineRecord.read(meta)


def test_a_wrong_schema_entry_is_not_served_but_rebuilt(tmp_path):
    cache, record = built(tmp_path)
    rewrite_meta(record, schema=CACHE_SCHEMA + 1)
    key = CacheKey.derive(spec(), ENV)
    assert cache.find(key) is None
    again, was_built = cache.get_or_build(key, cache.entry_stem("m", spec(), key), ".onnx", fake_build(b"new", spec(), key))
    assert was_built and EngineRecord.read(again.meta_path).artifact_sha256 == again.artifact_sha256


@pytest.mark.parametrize("name, ok", [("m.fp32.onnxruntime.abc.onnx", True), ("", False),
                                      ("sub/m.onnx", False), ("../m.onnx", False), ("/etc/passwd", False)])
def test_an_artifact_name_is_one_non_empty_file_name(tmp_path, name, ok):
    _, record = built(tmp_path)
    meta = rewrite_meta(record, artifact=name)
    if ok:
        assert EngineRecord.read(meta).artifact == name
    else:
        with pytest.raises(CacheCorrupt, match="wrong shape"):
            EngineRecord.read(meta)


def test_non_string_key_or_sha_is_refused(tmp_path):
    _, record = built(tmp_path)
    for change in ({"key": 5}, {"artifact_sha256": None}, {"artifact": 3}):
        _, record = built(tmp_path / str(len(str(change))))
        with pytest.raises(CacheCorrupt):
            EngineRecord.read(rewrite_meta(record, **change))


def test_an_empty_artifact_is_refused_and_a_one_byte_artifact_is_kept(tmp_path):
    the_spec = spec()
    key = CacheKey.derive(the_spec, ENV)
    cache = EngineCache(tmp_path / "engines")
    stem = cache.entry_stem("m", the_spec, key)
    with pytest.raises(CacheCorrupt, match="wrote no artifact"):
        cache.get_or_build(key, stem, ".onnx", fake_build(b"", the_spec, key))
    assert [p for p in (tmp_path / "engines").iterdir() if p.name != ".locks"] == []  # nothing half-written
    record, was_built = cache.get_or_build(key, stem, ".onnx", fake_build(b"x", the_spec, key))
    assert was_built and record.artifact_path.read_bytes() == b"x"
    record.verify()


def test_a_hit_is_served_only_while_the_artifact_matches_its_sha(tmp_path):
    cache, record = built(tmp_path, b"engine")
    key = CacheKey.derive(spec(), ENV)
    stem = cache.entry_stem("m", spec(), key)
    before = tree_snapshot(cache.root)
    hit, was_built = cache.get_or_build(key, stem, ".onnx", fake_build(b"other", spec(), key))
    assert not was_built and hit.artifact_sha256 == record.artifact_sha256 and tree_snapshot(cache.root) == before
    record.artifact_path.write_bytes(b"engine!")  # one byte more
    with pytest.raises(CacheCorrupt, match="does not match"):
        record.verify()
    rebuilt, was_built = cache.get_or_build(key, stem, ".onnx", fake_build(b"other", spec(), key))
    assert was_built and rebuilt.artifact_path.read_bytes() == b"other"


def test_rebuild_builds_even_over_a_good_hit(tmp_path):
    cache, _ = built(tmp_path, b"engine")
    key = CacheKey.derive(spec(), ENV)
    again, was_built = cache.get_or_build(key, cache.entry_stem("m", spec(), key), ".onnx",
                                          fake_build(b"fresh", spec(), key), rebuild=True)
    assert was_built and again.artifact_path.read_bytes() == b"fresh"


def test_a_covering_profile_must_hold_both_ends_of_the_request(tmp_path):
    """An engine built for batches 2–8 serves 2, 8 and 2–8, not 1 or 9."""
    cache, record = built(tmp_path, the_spec=spec((2, 8)))
    assert cache.find_covering(spec((2, 8)), ENV).key == record.key
    assert cache.find_covering(spec((2,)), ENV).key == record.key
    assert cache.find_covering(spec((8,)), ENV).key == record.key
    assert cache.find_covering(spec((1, 8)), ENV) is None
    assert cache.find_covering(spec((2, 9)), ENV) is None
    assert cache.find_covering(spec((2, 8)), {**ENV, "device": "other"}) is None


def test_the_narrowest_covering_profile_wins(tmp_path):
    cache, _ = built(tmp_path, the_spec=spec((1, 32)))
    _, narrow = built(tmp_path, the_spec=spec((1, 8)))
    assert cache.find_covering(spec((4,)), ENV).key == narrow.key


def test_list_engines_skips_hidden_files_and_refuses_an_empty_dir(tmp_path):
    cache, record = built(tmp_path)
    (cache.root / ".hidden.json").write_text("{}")
    assert [r.key for r in list_engines(cache.root)] == [record.key]
    assert [r.key for r in list_engines(record.artifact_path)] == [record.key]  # the artifact: its JSON beside
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(BadInput, match="no engines here"):
        list_engines(empty)
    with pytest.raises(BadInput, match="no such file"):
        list_engines(tmp_path / "missing")
    bare = tmp_path / "engine_without_suffix"
    bare.write_bytes(b"x")
    with pytest.raises(BadInput, match="no metadata JSON beside it"):
        list_engines(bare)
    stray = tmp_path / "stray.plan"
    stray.write_bytes(b"x")
    with pytest.raises(BadInput, match="no metadata JSON beside it"):
        list_engines(stray)


def test_safe_stem_keeps_letters_digits_dash_underscore():
    assert safe_stem("res-net_50") == "res-net_50"
    assert safe_stem("a/b.c d") == "a_b_c_d"
    assert safe_stem("") == "model"


def test_entry_lock_makes_its_folder_and_its_parents_and_can_be_taken_again(tmp_path):
    from trtprof.engines.cache import LOCK_DIR, entry_lock

    root = tmp_path / "new" / "engines"
    with entry_lock(root, "k"):
        assert (root / LOCK_DIR / "k.lock").exists()
    with entry_lock(root, "k"):  # the folder exists now: still fine
        pass


def test_a_record_not_read_from_disk_has_no_artifact_path():
    record = EngineRecord(key="k", model="m", model_path="", spec=spec(), environment={}, artifact="a.onnx",
                          artifact_sha256="", inputs=(), outputs=(), build_seconds=0.0, created="")
    with pytest.raises(ValueError, match="not read from disk"):
        record.artifact_path


def test_optional_fields_of_older_metadata_read_as_empty(tmp_path):
    _, record = built(tmp_path)
    data = json.loads(record.meta_path.read_text())
    for optional in ("model_path", "environment", "build_seconds", "created", "backend_metadata", "notes"):
        del data[optional]
    old = EngineRecord.from_json(data)
    assert (old.model_path, old.environment, old.build_seconds, old.created, old.backend_metadata, old.notes) == \
        ("", {}, 0.0, "", {}, [])


def test_entries_get_the_mode_open_would_give_not_mkstemps_0600(tmp_path):
    import os
    import stat

    old = os.umask(0o022)
    try:
        _, record = built(tmp_path)
    finally:
        os.umask(old)
    assert stat.S_IMODE(record.artifact_path.stat().st_mode) == 0o644
    assert stat.S_IMODE(record.meta_path.stat().st_mode) == 0o644


def test_without_a_lock_a_verified_hit_is_served_unbuilt_and_nothing_is_built(tmp_path):
    """A lock folder that cannot be made (here a file named .locks: works as root too, unlike chmod)
    is a read-only engines dir: a verified hit is served, with built False; anything else is refused."""
    import shutil

    from trtprof.engines.cache import LOCK_DIR, CacheNotWritable

    cache, record = built(tmp_path)
    shutil.rmtree(cache.root / LOCK_DIR)
    (cache.root / LOCK_DIR).write_text("not a folder")
    key = CacheKey.derive(spec(), ENV)
    stem = cache.entry_stem("m", spec(), key)
    hit, was_built = cache.get_or_build(key, stem, ".onnx", fake_build(b"other", spec(), key))
    assert not was_built and hit.artifact_sha256 == record.artifact_sha256
    with pytest.raises(CacheNotWritable, match=r"not writable \(File exists\)"):  # the OS's reason, not the wrapper's
        cache.get_or_build(key, stem, ".onnx", fake_build(b"other", spec(), key), rebuild=True)
    record.artifact_path.write_bytes(b"damaged")
    with pytest.raises(CacheNotWritable, match="has no usable"):
        cache.get_or_build(key, stem, ".onnx", fake_build(b"other", spec(), key))


def test_the_metadata_file_is_indented_json_with_sorted_keys(tmp_path):
    _, record = built(tmp_path)
    text = record.meta_path.read_text()
    data = json.loads(text)
    assert list(data) == sorted(data) and text.endswith("}\n") and '\n  "artifact"' in text
