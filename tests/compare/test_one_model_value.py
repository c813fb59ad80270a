"""Issue 41, item 3: one model value. The user's file becomes one ``OnnxModel`` once (``builder.pipeline.
open_model``, the front step of build, compare and fix-fp16: parsed by ``onnx_model.load_onnx``), and that
value travels through the build, compare, the serving sweep after it, fix-fp16's builds, the what-ifs, an
A/B's arms (``ab.load_arms``) and profile (``cli.profile._open``), under the name ``model``; nothing downstream
parses the file again. The count of parses outside the backends
is the check (``parses`` in conftest: ``load_onnx`` and raw ``onnx.load`` calls; it parsed the file twice in
a compare with a serving sweep, twice in a build or fix-fp16 run with --inputs, eleven times in a pad-channels
what-if); a backend's build of a new engine reads the file itself (its build takes a file: ``backends/*``)
and is not counted."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from trtprof.cli import main

from .conftest import bisection_run

pytest.importorskip("onnxruntime")


def test_a_compare_with_a_serving_sweep_parses_the_model_once(conv_model, tmp_path, parses):
    out = tmp_path / "c.json"
    assert main(["compare", str(conv_model), "--engines", str(tmp_path / "e"), "--backend", "onnxruntime",
                 "--batch-sizes", "1", "--time-budget-s", "0.5", "--round-iterations", "5", "--in-process",
                 "--concurrency", "1", "--window-s", "0.05", "--serving-rounds", "2", "--out", str(out)]) == 0
    data = json.loads(out.read_text())
    assert data["serving"]["points"] and {p["precision"] for p in data["serving"]["points"]} == {"fp32", "fp16"}
    assert parses == [str(conv_model)]


def test_fix_fp16_parses_the_model_once(tmp_path, parses):
    model, _, data = bisection_run(tmp_path)
    assert data["fix_fp16"]["keep"] == ["shift", "unshift"] and data["comparisons"]  # found, then measured
    assert parses == [str(model)]


def test_a_build_with_inputs_parses_the_model_once(conv_model, tmp_path, parses, capsys):
    """``trtprof build`` reaches the builder with the ``OnnxModel`` of its front step (``open_model``): the
    --inputs check against the model's embeddings reads its graph, not the file again (it did: onnx.load)."""
    import numpy as np

    npz = tmp_path / "x.npz"
    np.savez(npz, input=np.random.default_rng(0).standard_normal((2, 3, 16, 16)).astype(np.float32))
    argv = ["build", str(conv_model), "--engines", str(tmp_path / "e"), "--backend", "onnxruntime", "--fp32", "--fp16"]
    assert main([*argv, "--inputs", str(npz)]) == 0
    assert parses == [str(conv_model)]
    assert main(argv) == 0  # the cache hits of a second build: one more read
    assert parses == [str(conv_model)] * 2
    assert capsys.readouterr().out.count("cache hit") == 2


def test_the_front_step_checks_the_backend_and_precisions_before_it_reads_the_file(tmp_path, capsys):
    """``open_model``: a precision the backend refuses is said before the (missing) file is looked at."""
    missing = tmp_path / "missing.onnx"
    argv = ["build", str(missing), "--engines", str(tmp_path / "e"), "--backend", "onnxruntime"]
    assert main([*argv, "--bf16"]) == 2
    err = capsys.readouterr().err.strip()
    assert "bf16 is not available on onnxruntime" in err and "\n" not in err
    assert main([*argv, "--fp32"]) == 2  # the same command with a precision it builds: the file's line
    err = capsys.readouterr().err.strip()
    assert str(missing) in err and "no such file" in err and "\n" not in err


def test_a_model_read_once_builds_and_finds_what_its_path_does(conv_model, tmp_path):
    """``build_model_engines`` on the ``OnnxModel`` a build returned finds the engine that ``build_engines`` on
    the path built (one key, one name), and hands that same value on."""
    from trtprof.builder.pipeline import BuildSettings, build_engines, build_model_engines, load_model
    from trtprof.spec import Precision

    settings = BuildSettings(engines_dir=tmp_path / "e", backend="onnxruntime")
    (first,) = build_engines(conv_model, [Precision.FP32], [1], settings)
    (again,) = build_model_engines(first.model, [Precision.FP32], [1], settings)
    assert first.built and not again.built and again.model is first.model
    assert (again.record.key, again.record.model, again.record.model_path) == \
        (first.record.key, "convnet", str(conv_model.resolve()))
    loaded = load_model(conv_model, settings)
    assert loaded.origin is None and loaded.user_path == conv_model and loaded.sha256 == first.model.sha256


def test_a_pad_channels_what_if_parses_the_model_once(conv_model, tmp_path, parses):
    """The what-if's original is read once (``ab.what_if_model``) and its padded copy is the ``OnnxModel`` that
    made it (``OnnxModel.save``): its targets, the identity check's inputs and all three arms' builds take
    those values (it parsed the original eight times and read the copy back three times)."""
    out = tmp_path / "c.json"
    assert main(["compare", str(conv_model), "--what-if", "pad-channels", "--engines", str(tmp_path / "e"),
                 "--backend", "onnxruntime", "--batch-sizes", "1", "--time-budget-s", "0.3", "--round-iterations", "3",
                 "--in-process", "--out", str(out)]) == 0
    what_if = json.loads(out.read_text())["ab"]["what_if"]
    assert what_if["change"]["padded"] and what_if["outputs_max_rel_diff"] <= what_if["identical_rtol"]
    assert parses == [str(conv_model)]


def test_the_what_ifs_change_a_copy_of_the_graph_they_are_given(tmp_path, parses):
    """Each what-if step takes the ``OnnxModel`` and reads no file; the graph it was given stays as it was
    (the padding, the torch runner's Identity pre-pass and the optimizer work on copies or serialize it)."""
    import importlib.util

    import numpy as np

    from trtprof.compare import whatif
    from trtprof.model.demo import make_demo_model
    from trtprof.model.onnx_model import OnnxModel

    model = OnnxModel.load(make_demo_model(tmp_path / "m.onnx", channels=12, image=16, classes=10))
    before = model.proto.SerializeToString()
    parses.clear()
    change, copy = whatif.pad_channels(model, tmp_path / "p.onnx")
    assert set(change.padded) == {"conv0", "conv1", "fc"} and copy.path.is_file()
    assert whatif.channels_last_targets(model)["convs"] == ["conv0", "conv1", "conv2"]
    assert whatif.nhwc_targets(model, "prefer_nhwc")["Conv"] == 3
    if importlib.util.find_spec("onnx2torch") is not None:
        feeds = {"input": np.random.default_rng(0).standard_normal((2, 3, 16, 16)).astype(np.float32)}
        assert whatif.check_channels_last(model, feeds, device="cpu") <= whatif.CHANNELS_LAST_RTOL
    if importlib.util.find_spec("torch") is not None:  # the optimizer imports it while it fuses
        whatif.ort_fusions(model, tmp_path / "f.onnx")  # a ConvNet: nothing fused, nothing written
    # nothing here is read (the optimizer reads back its own output, in a temporary folder of its own)
    assert not [path for path in parses if path.startswith(str(tmp_path))] and len(parses) <= 1
    assert model.proto.SerializeToString() == before


def test_a_two_file_ab_parses_each_file_once(tmp_path, parses):
    """``compare A.onnx B.onnx``: each arm carries its file read once (``ab.load_arms``): the input pairing,
    the compatibility check and the build take that ``OnnxModel`` (it parsed each file three times)."""
    from trtprof.model.demo import make_demo_model

    a = make_demo_model(tmp_path / "small.onnx", channels=8, image=16, classes=10)
    b = make_demo_model(tmp_path / "wide.onnx", channels=16, image=16, classes=10)
    out = tmp_path / "ab.json"
    assert main(["compare", str(a), str(b), "--engines", str(tmp_path / "e"), "--backend", "onnxruntime",
                 "--batch-sizes", "1", "--time-budget-s", "0.3", "--round-iterations", "3", "--in-process",
                 "--out", str(out)]) == 0
    assert [arm["label"] for arm in json.loads(out.read_text())["ab"]["arms"]] == ["small", "wide"]
    assert sorted(p for p in parses if p.startswith(str(tmp_path)) and "/e/" not in p) == [str(a), str(b)]


def test_an_ab_paired_by_position_parses_each_file_once(tmp_path, parses):
    """Inputs that differ only in name: the renamed copy is written from B's ``OnnxModel`` and built from the
    copy that made it (``OnnxModel.save``), not read back (A was parsed three times, B twice, the copy twice)."""
    from trtprof.compare import whatif
    from trtprof.compare.rename_inputs import RENAMED_DIR
    from trtprof.model.demo import make_demo_model

    from .test_ab_inputs_by_position import with_input_named

    a = make_demo_model(tmp_path / "a.onnx", channels=8, image=16, classes=10)
    b = with_input_named(a, "pixels", tmp_path / "b.onnx")
    engines, out = tmp_path / "e", tmp_path / "ab.json"
    parses.clear()
    assert main(["compare", str(a), str(b), "--engines", str(engines), "--backend", "onnxruntime", "--batch-sizes",
                 "1", "--time-budget-s", "0.3", "--round-iterations", "3", "--in-process", "--out", str(out)]) == 0
    copy = whatif.whatif_dir(engines) / RENAMED_DIR / "b.onnx"
    assert [arm["model"] for arm in json.loads(out.read_text())["ab"]["arms"]] == [str(a), str(copy)]
    assert sorted(p for p in parses if not p.startswith(str(engines)) or p == str(copy)) == [str(a), str(b)]


PROFILE_FAST = ["--backend", "onnxruntime", "--iterations", "2", "--warmup", "1"]


def users_files(parses: list[str], tmp_path, engines) -> list[str]:
    """The parses of files the user gave (the engines and the profiler's own files left out)."""
    return [p for p in parses if p.startswith(str(tmp_path)) and not p.startswith(str(engines))]


def test_profile_without_batch_size_parses_the_model_once(static_batch_model, tmp_path, parses, capsys):
    """``trtprof profile MODEL``: the batch the model fixes comes from the ``OnnxModel`` it builds from
    (``cli.profile._open``), not from a read of its own (it parsed the file twice)."""
    engines, out = tmp_path / "e", tmp_path / "layers.json"
    assert main(["profile", str(static_batch_model), "--engines", str(engines), "--out", str(out),
                 *PROFILE_FAST]) == 0
    assert "batch size 2: the model fixes its batch to 2" in capsys.readouterr().out
    assert json.loads(out.read_text())["table"]["rows"]
    assert users_files(parses, tmp_path, engines) == [str(static_batch_model)]


def test_profile_fallback_build_takes_the_model_read_once(conv_model, tmp_path, parses, capsys):
    """--inputs naming an input the model lacks: profile builds again with --shape alone (its fallback
    ``resolve_records``) from the ``OnnxModel`` it read, then refuses the names in the same one line (the
    fallback read the file a second time)."""
    import numpy as np

    npz = tmp_path / "x.npz"
    np.savez(npz, wrong=np.zeros((2, 3, 16, 16), np.float32))
    engines = tmp_path / "e"
    assert main(["profile", str(conv_model), "--engines", str(engines), "--batch-size", "2", "--inputs", str(npz),
                 "--out", str(tmp_path / "l.json"), *PROFILE_FAST]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (f"trtprof profile: error: {conv_model}: --inputs {npz}: lacks input(s) input; has unknown "
                   "name(s) wrong (model inputs: input)")
    assert list(engines.glob("convnet.fp32.*.json"))  # the fallback built (the names are said after it)
    assert users_files(parses, tmp_path, engines) == [str(conv_model)]


def test_an_ab_without_batch_sizes_parses_each_file_once(static_batch_model, tmp_path, parses, capsys):
    """The default batch sizes of ``compare A.onnx B.onnx`` (the batch both fix) come from the arms' models
    (``cli.compare.user_arms``, read once before anything is built), not from reads of their own."""
    import shutil

    b = Path(shutil.copy(static_batch_model, tmp_path / "again.onnx"))
    out = tmp_path / "ab.json"
    assert main(["compare", str(static_batch_model), str(b), "--engines", str(tmp_path / "e"), "--backend",
                 "onnxruntime", "--time-budget-s", "0.3", "--round-iterations", "3", "--in-process",
                 "--out", str(out)]) == 0
    assert "batch size 2: the model fixes its batch to 2" in capsys.readouterr().out
    assert [c["batch_size"] for c in json.loads(out.read_text())["comparisons"]] == [2]
    assert sorted(p for p in parses if "/e/" not in p) == sorted([str(static_batch_model), str(b)])
