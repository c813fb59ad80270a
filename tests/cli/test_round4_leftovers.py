"""Issue 45, item 10 (round 4's leftovers): ``build`` on a full disk names the file it could not write
(a backend's own write to the temp artifact raised ENOSPC/EFBIG with no file name: "cannot write (No
space left on device)" and nothing else); a renamed copy of a model is reported under its own name on a
cache hit (was: under the name of the copy the entry was first built from). The loader raising
``GeneratorExit`` is in tests/model/test_inputs_bounded.py."""
from __future__ import annotations

import errno
import json
import shutil

import pytest

from .test_user_errors import assert_one_line, run_main


def test_build_on_a_full_disk_names_the_engines_dir_file(conv_model, tmp_path, capsys, monkeypatch):
    """ONNX Runtime's backend writes the artifact's bytes itself (``Path.write_bytes`` on the entry's temp
    name); on a full disk the kernel's ENOSPC reaches it as an OSError with no file name, as injected here
    (tests/faults/sitecustomize.py names the file, which a real write error never does). The line names the
    artifact in the engines dir (not the temp name, not the model) and nothing is left behind."""
    import pathlib

    real = pathlib.Path.write_bytes

    def full_disk(self, data):
        if self.name.startswith(".convnet.fp32.onnxruntime.") and self.name.endswith(".tmp"):
            raise OSError(errno.ENOSPC, "No space left on device")  # what write(2) gives: no file name
        return real(self, data)

    monkeypatch.setattr(pathlib.Path, "write_bytes", full_disk)
    engines = tmp_path / "engines"
    code, _, err = run_main(capsys, "build", str(conv_model), "--fp32", "--engines", str(engines),
                            "--backend", "onnxruntime")
    line = assert_one_line(code, err, f"{engines}/convnet.fp32.onnxruntime.", "cannot write (No space left on device)")
    assert ".tmp" not in line and f"{conv_model}:" not in line
    assert [p.name for p in engines.iterdir() if p.name != ".locks"] == []


def test_a_write_error_without_a_file_name_gets_the_artifacts_name(tmp_path):
    """The rule itself: an OSError of a full disk raised by a build (no file name) is re-raised naming the
    entry's artifact; one that names its file, or another errno, passes unchanged."""
    from trtprof.engines.cache import EngineCache
    from trtprof.spec import BuildSpec, CacheKey, Precision

    spec = BuildSpec.make(model_sha256="ef" * 32, backend="onnxruntime", precision=Precision.FP32, batch_sizes=[1])
    key = CacheKey.derive(spec, {"backend": "onnxruntime"})
    cache = EngineCache(tmp_path)
    stem = cache.entry_stem("m", spec, key)
    for raised, named in [(OSError(errno.ENOSPC, "No space left on device"), str(tmp_path / f"{stem}.onnx")),
                          (OSError(errno.ENOSPC, "No space left on device", "/elsewhere"), "/elsewhere"),
                          (OSError(errno.EACCES, "Permission denied"), None)]:
        def build(tmp, raised=raised):
            raise raised

        with pytest.raises(OSError) as caught:
            cache.get_or_build(key, stem, ".onnx", build)
        assert caught.value.filename == named and caught.value.errno == raised.errno
    assert [p.name for p in tmp_path.iterdir()] == [".locks"]


def test_a_renamed_copy_is_reported_under_its_own_name_on_a_cache_hit(conv_model, tmp_path, capsys):
    engines = tmp_path / "e"
    code, _, err = run_main(capsys, "build", str(conv_model), "--fp32", "--fp16", "--engines", str(engines),
                            "--backend", "onnxruntime")
    assert code == 0, err
    renamed = shutil.copy(conv_model, tmp_path / "resnet_copy.onnx")
    out = tmp_path / "c.json"
    code, stdout, err = run_main(capsys, "compare", str(renamed), "--engines", str(engines), "--backend", "onnxruntime",
                                 "--in-process", "--precisions", "fp32,fp16", "--batch-sizes", "1", "--time-budget-s",
                                 "1", "--round-iterations", "2", "--out", str(out))
    assert code == 0, err
    assert "cache hit" in stdout + err and not list(engines.glob("resnet_copy.*"))  # served, not rebuilt
    data = json.loads(out.read_text())
    assert data["model"] == "resnet_copy"
    assert {r["model"] for r in data["results"]} == {"resnet_copy"}
    assert all("/convnet." in r["engine"]["artifact"] for r in data["results"])  # the file served, by its name
