"""Issue 45, item 9 (the rest): engine metadata nested 100,000 deep, given to every command that reads
an engines dir (``cache ls``, every ``cache prune`` filter, ``prune --corrupt`` included, ``bench``,
``inspect``, a ``build`` and a ``compare`` into that dir), is one line or a corrupt entry — never a
RecursionError traceback; ``/proc/self/mem`` as the model path (a "regular file" whose read fails with
EIO) is one line, exit 2, for every command that reads a model."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from .test_user_errors import assert_one_line, run_main

DEPTH = 100_000


@pytest.fixture
def deep(conv_model, tmp_path, capsys) -> tuple[Path, Path]:
    """(engines dir, metadata) of an fp32 entry whose ``notes`` are 100,000 nested lists."""
    engines = tmp_path / "engines"
    code, _, err = run_main(capsys, "build", str(conv_model), "--fp32", "--engines", str(engines),
                            "--backend", "onnxruntime")
    assert code == 0, err
    (meta,) = engines.glob("*.json")
    data = json.loads(meta.read_text())
    data["notes"] = "NESTED"
    meta.write_text(json.dumps(data).replace('"NESTED"', "[" * DEPTH + "]" * DEPTH))
    return engines, meta


def _listed_as_corrupt(out: str, meta: Path) -> bool:
    return any(line.startswith(f"corrupt: {meta.name}: unreadable engine metadata (nested too deeply)")
               for line in out.splitlines())


def test_cache_ls_lists_it_as_corrupt(deep, capsys):
    engines, meta = deep
    code, out, err = run_main(capsys, "cache", "ls", str(engines))
    assert code == 0 and "Traceback" not in err and _listed_as_corrupt(out, meta), out + err


@pytest.mark.parametrize("filters", [["--corrupt", "--dry-run"], ["--older-than", "0s", "--dry-run"],
                                     ["--model", "convnet", "--dry-run"], ["--corrupt"]])
def test_every_prune_filter_answers(filters, deep, capsys):
    engines, meta = deep
    code, out, err = run_main(capsys, "cache", "prune", str(engines), *filters)
    assert code == 0 and "Traceback" not in err, err
    assert f"remove corrupt: {meta}" in out or f"removed corrupt: {meta}" in out
    assert meta.exists() == ("--dry-run" in filters)


def test_bench_and_inspect_refuse_it_in_one_line(deep, tmp_path, capsys):
    engines, meta = deep
    for argv in (["bench", str(engines), "--warmup", "1", "--iterations", "2", "--out", str(tmp_path / "r.json")],
                 ["bench", str(meta), "--warmup", "1", "--iterations", "2", "--out", str(tmp_path / "r.json")],
                 ["inspect", str(meta)]):
        code, _, err = run_main(capsys, *argv)
        assert_one_line(code, err, meta.name, "nested too deeply")
    assert not (tmp_path / "r.json").exists()


def test_a_build_or_compare_into_that_dir_replaces_the_corrupt_entry(deep, conv_model, tmp_path, capsys):
    engines, meta = deep
    code, _, err = run_main(capsys, "build", str(conv_model), "--fp32", "--engines", str(engines),
                            "--backend", "onnxruntime")
    assert code == 0 and "Traceback" not in err, err
    assert isinstance(json.loads(meta.read_text())["notes"], list)  # rebuilt: readable again (it was 100,000 deep)
    meta.write_text("[" * DEPTH + "]" * DEPTH)
    code, _, err = run_main(capsys, "compare", str(conv_model), "--engines", str(engines), "--backend", "onnxruntime",
                            "--in-process", "--precisions", "fp32,fp16", "--batch-sizes", "1", "--time-budget-s", "1",
                            "--round-iterations", "2", "--out", str(tmp_path / "c.json"))
    assert code == 0 and "Traceback" not in err, err


@pytest.mark.parametrize("command", [
    ["build", "--fp32", "--backend", "onnxruntime"],
    ["compare", "--backend", "onnxruntime", "--time-budget-s", "1"],
    ["profile", "--backend", "onnxruntime"],
    ["fix-fp16", "--backend", "onnxruntime"],
])
def test_proc_self_mem_as_the_model_is_one_line(command, tmp_path, capsys, monkeypatch):
    proc_mem = Path("/proc/self/mem")
    if not proc_mem.exists():
        pytest.skip("no /proc/self/mem on this system")
    monkeypatch.chdir(tmp_path)  # engines and outputs, if any were made, would land here
    code, _, err = run_main(capsys, command[0], str(proc_mem), *command[1:])
    assert_one_line(code, err, "/proc/self/mem", "cannot read the model")
    assert list(tmp_path.iterdir()) == []  # refused before anything was written
