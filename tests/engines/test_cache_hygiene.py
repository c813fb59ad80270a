"""Issue 12: the cache lock and atomic writes are tested so that removing them fails the tests; stale
temp files, orphans, wrong-shape metadata; batch-free keys for ORT/torch; covering TensorRT
profiles; `trtprof cache ls` / `prune`; files created with the user's umask."""
from __future__ import annotations

import json
import multiprocessing as mp
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from trtprof.builder.pipeline import BuildSettings, build_engines, key_spec
from trtprof.engines.cache import EngineCache, EngineRecord, list_engines
from trtprof.util.files import atomic_write_bytes
from trtprof.engines.cache_admin import CORRUPT, OK, ORPHAN, TEMP, parse_age, scan_dir, select
from trtprof.cli import main
from trtprof.spec import BuildSpec, CacheKey, Precision, TensorSpec

from ..conftest import tree_snapshot

ENV = {"backend": "tensorrt", "tensorrt": "10.0", "device": "gpu-x"}


def _record(key: CacheKey, spec: BuildSpec) -> EngineRecord:
    return EngineRecord(key=key.hexdigest, model="m", model_path="m.onnx", spec=spec, environment=dict(ENV),
                        artifact="", artifact_sha256="", inputs=(TensorSpec("x", "float32", ("N", 4)),),
                        outputs=(TensorSpec("y", "float32", ("N", 4)),), build_seconds=0.0, created="")


# --- the lock: a forced race -----------------------------------------------------------------------

def _racing_build(root: str, log: str, barrier, hold_s: float) -> None:
    """Both processes pass the barrier together, then ask for the same key; the build (slow, logged)
    must run once: the second process waits on the lock and then gets a cache hit."""
    spec = BuildSpec.make(model_sha256="ab" * 32, backend="tensorrt", precision=Precision.FP32, batch_sizes=[1])
    key = CacheKey.derive(spec, ENV)
    cache = EngineCache(Path(root))

    def slow_build(tmp: Path) -> EngineRecord:
        with open(log, "a") as fh:
            fh.write(f"{os.getpid()}\n")
        time.sleep(hold_s)  # the window in which an unlocked second process would also build
        tmp.write_bytes(b"plan bytes")
        return _record(key, spec)

    barrier.wait()
    cache.get_or_build(key, cache.entry_stem("m", spec, key), ".plan", slow_build)


def test_two_processes_racing_for_one_key_build_it_once(tmp_path):
    """Without the lock both processes see no entry and both build (two log lines): this fails."""
    ctx = mp.get_context("spawn")
    barrier = ctx.Barrier(2)
    log = tmp_path / "builds.log"
    procs = [ctx.Process(target=_racing_build, args=(str(tmp_path / "engines"), str(log), barrier, 1.0))
             for _ in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
    assert [p.exitcode for p in procs] == [0, 0]
    assert len(log.read_text().splitlines()) == 1
    (record,) = list_engines(tmp_path / "engines")
    record.verify()


# --- atomic writes: kill a writer mid-write ---------------------------------------------------------

_WRITER = """
import sys
from pathlib import Path
from trtprof.util.files import atomic_write_bytes
atomic_write_bytes(Path(sys.argv[1]), b"N" * (512 * 1024 * 1024))
"""


def test_a_writer_killed_mid_write_leaves_the_old_file_whole(tmp_path):
    """SIGKILL while 512 MiB are being written: the target still holds the old bytes (a non-atomic
    write would have truncated it at open). The temp debris is then removed by `cache prune`."""
    target = tmp_path / "m.fp32.onnxruntime.0123456789ab.json"
    old = b'{"old": true}\n'
    target.write_bytes(old)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    proc = subprocess.Popen([sys.executable, "-c", _WRITER, str(target)], env=env)
    deadline = time.monotonic() + 60
    try:
        while time.monotonic() < deadline:  # wait until the write is under way
            temps = list(tmp_path.glob(".*.tmp"))
            if (temps and temps[0].stat().st_size > 0) or target.read_bytes() != old:
                break
            time.sleep(0.005)
        else:
            pytest.fail("writer never started")
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
    assert target.read_bytes() == old
    assert [item.status for item in scan_dir(tmp_path).items if item.status == TEMP] == []  # no proof it is ours
    (tmp_path / ".locks").mkdir()
    (tmp_path / ".locks" / ("0123456789ab" + "0" * 52 + ".lock")).touch()  # every build leaves its key's lock
    assert [item.status for item in scan_dir(tmp_path).items if item.status == TEMP] == [TEMP]


def test_atomic_write_uses_the_umask_not_0600(tmp_path):
    old = os.umask(0o022)
    try:
        atomic_write_bytes(tmp_path / "a.json", b"{}")
        assert (tmp_path / "a.json").stat().st_mode & 0o777 == 0o644
        os.umask(0o077)
        atomic_write_bytes(tmp_path / "b.json", b"{}")
        assert (tmp_path / "b.json").stat().st_mode & 0o777 == 0o600
    finally:
        os.umask(old)


def test_built_engines_and_results_are_created_with_the_umask(conv_model, tmp_path, capsys):
    old = os.umask(0o022)
    try:
        engines = tmp_path / "engines"
        assert main(["build", str(conv_model), "--engines", str(engines), "--backend", "onnxruntime"]) == 0
        out = tmp_path / "r.json"
        assert main(["bench", str(engines), "--warmup", "1", "--iterations", "2", "--out", str(out),
                     "--csv", str(tmp_path / "r.csv")]) == 0
    finally:
        os.umask(old)
    files = [*(p for p in engines.glob("*.*") if p.is_file()), out, tmp_path / "r.csv"]
    assert len(files) == 4 and all(f.stat().st_mode & 0o777 == 0o644 for f in files), \
        {f.name: oct(f.stat().st_mode & 0o777) for f in files}


# --- stale temps from a killed build ------------------------------------------------------------------

_KILLED_BUILD = """
import sys, time
from pathlib import Path
from trtprof.engines.cache import EngineCache
from trtprof.spec import BuildSpec, CacheKey, Precision
spec = BuildSpec.make(model_sha256="ab" * 32, backend="tensorrt", precision=Precision.FP32, batch_sizes=[1])
key = CacheKey.derive(spec, {"backend": "tensorrt", "tensorrt": "10.0", "device": "gpu-x"})
cache = EngineCache(Path(sys.argv[1]))
def build(tmp):
    print("building", flush=True)
    time.sleep(60)
cache.get_or_build(key, cache.entry_stem("m", spec, key), ".plan", build)
"""


def test_temp_file_of_a_killed_build_is_removed_by_the_next_build_under_the_lock(tmp_path):
    root = tmp_path / "engines"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    proc = subprocess.Popen([sys.executable, "-c", _KILLED_BUILD, str(root)], env=env, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "building"
    proc.send_signal(signal.SIGKILL)
    proc.wait(30)
    (debris,) = root.glob(".*.tmp")
    assert debris.stat().st_size == 0  # what the issue found: a 0-byte temp that stayed forever

    spec = BuildSpec.make(model_sha256="ab" * 32, backend="tensorrt", precision=Precision.FP32, batch_sizes=[1])
    key = CacheKey.derive(spec, ENV)
    cache = EngineCache(root)

    def build(tmp: Path) -> EngineRecord:
        tmp.write_bytes(b"plan")
        return _record(key, spec)

    cache.get_or_build(key, cache.entry_stem("m", spec, key), ".plan", build)
    assert not debris.exists()
    assert [p.name for p in root.iterdir() if p.name.startswith(".") and p.name != ".locks"] == []


# --- what the key holds ----------------------------------------------------------------------------

def test_onnxruntime_engine_serves_any_batch_set(conv_model, tmp_path):
    engines = tmp_path / "engines"
    (first,) = build_engines(conv_model, [Precision.FP16], [1, 4],
                             settings=BuildSettings(engines_dir=engines, backend="onnxruntime"))
    before = tree_snapshot(engines)
    (second,) = build_engines(conv_model, [Precision.FP16], [2, 8, 32],
                              settings=BuildSettings(engines_dir=engines, backend="onnxruntime",
                                                     options={"workspace_mb": 512}))  # a TensorRT option: not part of an ORT artifact
    assert first.built and not second.built and second.record.key == first.record.key
    assert tree_snapshot(engines) == before


def test_key_spec_keeps_batch_and_options_for_tensorrt_only():
    base = dict(model_sha256="ab" * 32, precision=Precision.FP32, batch_sizes=[1, 8], options={"workspace_mb": 64})
    for backend in ("onnxruntime", "torch"):
        a = key_spec(BuildSpec.make(backend=backend, **base))
        b = key_spec(BuildSpec.make(backend=backend, **{**base, "batch_sizes": [4], "options": {}}))
        assert a == b
    trt = BuildSpec.make(backend="tensorrt", **base)
    assert key_spec(trt) == trt
    assert key_spec(BuildSpec.make(backend="tensorrt", **{**base, "batch_sizes": [4]})) != trt


def _put(cache: EngineCache, spec: BuildSpec, env=ENV) -> EngineRecord:
    key = CacheKey.derive(spec, env)

    def build(tmp: Path) -> EngineRecord:
        tmp.write_bytes(f"plan {spec.batch_sizes}".encode())
        rec = _record(key, spec)
        rec.environment = dict(env)
        return rec

    record, _ = cache.get_or_build(key, cache.entry_stem("m", spec, key), ".plan", build)
    return record


def test_tensorrt_engine_whose_profile_covers_the_request_is_found(tmp_path):
    cache = EngineCache(tmp_path)
    make = lambda sizes, **kw: BuildSpec.make(model_sha256="ab" * 32, backend="tensorrt", precision=Precision.FP16,  # noqa: E731
                                              batch_sizes=sizes, **kw)
    wide = _put(cache, make([1, 32]))
    narrow = _put(cache, make([1, 8]))
    assert cache.find_covering(make([2, 4]), ENV).key == narrow.key  # the narrowest covering profile
    assert cache.find_covering(make([16]), ENV).key == wide.key
    assert cache.find_covering(make([64]), ENV) is None  # beyond every profile
    assert cache.find_covering(make([4], options={"workspace_mb": 64}), ENV) is None  # other options
    assert cache.find_covering(make([4]), {**ENV, "tensorrt": "11.0"}) is None  # other TensorRT
    Path(narrow.artifact_path).write_bytes(b"damaged")
    assert cache.find_covering(make([2, 4]), ENV).key == wide.key  # a corrupt one is skipped


# --- cache ls / prune -----------------------------------------------------------------------------

@pytest.fixture
def messy_engines(conv_model, multi_io_model, tmp_path) -> dict[str, Path]:
    """An engines dir with: good entries, a truncated artifact, metadata that is a JSON list, an
    orphan artifact (its JSON deleted), and the temp file of a killed build."""
    engines = tmp_path / "engines"
    for model in (conv_model, multi_io_model):
        assert main(["build", str(model), "--fp32", "--fp16", "--engines", str(engines), "--backend", "onnxruntime"]) == 0
    conv32, conv16 = sorted(engines.glob("convnet.fp32.*.onnx"))[0], sorted(engines.glob("convnet.fp16.*.onnx"))[0]
    io32, io16 = sorted(engines.glob("multi_io.fp32.*.onnx"))[0], sorted(engines.glob("multi_io.fp16.*.onnx"))[0]
    conv16.write_bytes(conv16.read_bytes()[:-7])  # corrupt: sha256 mismatch
    io16.with_suffix(".json").write_text("[]")  # corrupt: metadata of the wrong shape
    io32.with_suffix(".json").unlink()  # orphan
    temp = engines / f".{conv32.name}.k1ll3d.tmp"
    temp.write_bytes(b"")
    return {"good": conv32, "sha": conv16, "list": io16, "orphan": io32, "temp": temp, "dir": engines}


def test_scan_classifies_good_corrupt_orphan_and_temp(messy_engines):
    items = {i.files[0].name: i for i in scan_dir(messy_engines["dir"], verify=True).items}
    by_status = {}
    for item in items.values():
        by_status.setdefault(item.status, set()).update(f.name for f in item.files)
    m = messy_engines
    assert by_status[OK] == {m["good"].name, m["good"].with_suffix(".json").name}
    assert by_status[CORRUPT] == {m["sha"].name, m["sha"].with_suffix(".json").name, m["list"].name,
                                  m["list"].with_suffix(".json").name}
    assert by_status[ORPHAN] == {m["orphan"].name}
    assert by_status[TEMP] == {m["temp"].name}


def test_cache_ls_cli(messy_engines, capsys):
    assert main(["cache", "ls", str(messy_engines["dir"])]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    row = next(l for l in lines if messy_engines["good"].with_suffix(".json").name in l)
    assert row.split()[:4] == ["convnet", "fp32", "onnxruntime", "fp32"] and " ok " in row
    assert any("corrupt: " in l and "sha256" in l for l in lines)
    assert any("corrupt: " in l and "JSON list" in l for l in lines)
    assert any("orphan" in l and messy_engines["orphan"].name in l for l in lines)
    assert lines[-1].startswith("5 items") and "1 ok, 2 corrupt, 1 orphan, 1 temp" in lines[-1]


def test_bench_warns_about_orphans(messy_engines, tmp_path, capsys):
    d = messy_engines["dir"]
    for p in (messy_engines["sha"], messy_engines["list"]):  # leave only good + orphan + temp
        p.unlink()
        p.with_suffix(".json").unlink()
    assert main(["bench", str(d), "--warmup", "1", "--iterations", "2", "--out", str(tmp_path / "r.json")]) == 0
    err = capsys.readouterr().err
    assert f"{messy_engines['orphan']}: orphan artifact" in err and "temp file" in err


def test_cache_prune_corrupt_keeps_good_entries(messy_engines, capsys):
    d, m = messy_engines["dir"], messy_engines
    assert main(["cache", "prune", str(d), "--corrupt", "--dry-run"]) == 0
    assert "would remove 4 of 5" in capsys.readouterr().out and m["temp"].exists()
    assert main(["cache", "prune", str(d), "--corrupt"]) == 0
    assert "removed 4 of 5" in capsys.readouterr().out
    left = sorted(p.name for p in d.iterdir() if p.is_file())
    assert left == sorted([m["good"].name, m["good"].with_suffix(".json").name])
    (record,) = list_engines(d)
    record.verify()


def test_cache_prune_by_model_and_age(messy_engines, capsys):
    d, m = messy_engines["dir"], messy_engines
    assert main(["cache", "prune", str(d), "--older-than", "1d"]) == 0  # everything is new
    assert "removed 0 of 5" in capsys.readouterr().out
    old = time.time() - 3 * 86400
    for f in (m["good"], m["good"].with_suffix(".json")):
        os.utime(f, (old, old))
    assert main(["cache", "prune", str(d), "--older-than", "2d", "--model", "convnet"]) == 0
    assert "removed 1 of 5" in capsys.readouterr().out and not m["good"].exists() and m["sha"].exists()
    assert main(["cache", "prune", str(d), "--model", "multi_io"]) == 0
    assert not m["orphan"].exists() and not m["list"].exists()


def test_cache_prune_needs_a_filter_and_a_valid_age(messy_engines, capsys):
    assert main(["cache", "prune", str(messy_engines["dir"])]) == 2
    assert "at least one of" in capsys.readouterr().err
    assert main(["cache", "prune", str(messy_engines["dir"]), "--older-than", "soon"]) == 2
    assert "--older-than 'soon'" in capsys.readouterr().err
    assert main(["cache", "ls", str(messy_engines["dir"] / "nope")]) == 2


def test_prune_skips_an_entry_whose_lock_is_held(messy_engines):
    from filelock import FileLock

    from trtprof.engines.cache_admin import remove

    scan = scan_dir(messy_engines["dir"], verify=True)
    good = next(i for i in scan.items if i.status == OK)
    lock = FileLock(str(messy_engines["dir"] / ".locks" / f"{good.record.key}.lock"))
    with lock:
        held = subprocess.run([sys.executable, "-c", (
            "import sys; from pathlib import Path; from trtprof.engines.cache_admin import scan_dir, remove; "
            "i = next(i for i in scan_dir(Path(sys.argv[1])).items if i.record and i.record.key == sys.argv[2]); "
            "print(remove(Path(sys.argv[1]), i))"), str(messy_engines["dir"]), good.record.key],
            capture_output=True, text=True, timeout=120,
            env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])})
    assert held.stdout.strip() == "False", held.stderr
    assert all(f.exists() for f in good.files)
    assert remove(messy_engines["dir"], good) and not any(f.exists() for f in good.files)


@pytest.mark.parametrize("text,seconds", [("90s", 90), ("30m", 1800), ("12h", 43200), ("7d", 604800), ("2", 172800),
                                          ("1w", 604800)])
def test_parse_age(text, seconds):
    assert parse_age(text) == seconds


def test_select_combines_filters(messy_engines):
    scan = scan_dir(messy_engines["dir"], verify=True)
    assert {i.status for i in select(scan, corrupt=True)} == {CORRUPT, ORPHAN, TEMP}
    assert {i.model for i in select(scan, model="convnet")} == {"convnet"}
    assert [i.status for i in select(scan, corrupt=True, model="convnet")].count(OK) == 0
