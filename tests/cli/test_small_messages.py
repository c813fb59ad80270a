"""Issue 36 item 10: the smaller messages. A full disk names the file that failed (a --csv failure was
blamed on the --out JSON; a write's ENOSPC carries no file name of its own), `bench typo_dir` says the
folder does not exist, fix-fp16's advice names its own option, an OOM at batch 1 does not advise batch 1."""
from __future__ import annotations

import errno

import pytest

from trtprof.cli import main
from trtprof.errors import OutOfMemory

from .test_cli import _assert_clean_failure
from .test_faults import FAST, engines, run_with_fault  # noqa: F401 - engines is a fixture


def test_a_csv_on_a_full_disk_is_named_not_the_json(engines, tmp_path):  # noqa: F811
    out, csv = tmp_path / "r.json", tmp_path / "r.csv"
    proc = run_with_fault(f"enospc:{csv}", "bench", str(engines), *FAST, "--out", str(out), "--csv", str(csv))
    _assert_clean_failure(proc, str(csv), "No space left on device")
    assert str(out) + ":" not in proc.stderr and out.exists() and not csv.exists()


def test_an_atomic_write_error_without_a_file_name_gets_the_target(tmp_path, monkeypatch):
    from trtprof.util import files

    def full(*_args):
        raise OSError(errno.ENOSPC, "No space left on device")  # what write() raises: no filename

    monkeypatch.setattr(files.os, "fsync", full)
    with pytest.raises(OSError) as caught:
        files.atomic_write_bytes(tmp_path / "x.json", b"{}")
    assert caught.value.filename == str(tmp_path / "x.json") and not list(tmp_path.iterdir())


def test_bench_of_a_folder_that_does_not_exist_says_so(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["bench", "typo_dir"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "typo_dir" in err[0] and "no such file or directory" in err[0]
    assert "inside the engines dir" not in err[0]


def test_fix_fp16_advice_names_its_own_option(static_batch_model, tmp_path, capsys):
    code = main(["fix-fp16", str(static_batch_model), "--batch-size", "4", "--backend", "onnxruntime",
                 "--engines", str(tmp_path / "e"), "--out", str(tmp_path / "f.json")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "--batch-size 2" in err[0] and "--batch-sizes" not in err[0]


def test_an_oom_at_batch_1_does_not_advise_batch_1():
    from trtprof.system.preflight import check_memory, out_of_memory

    with pytest.raises(OutOfMemory) as caught:
        check_memory(1, needed_bytes=10**9, available=10**6)
    assert "even one sample does not fit" in str(caught.value) and "--batch-sizes 1" not in str(caught.value)
    assert "even one sample" in str(out_of_memory(MemoryError(), 1, 10**9))
    with pytest.raises(OutOfMemory) as caught:  # just above batch 1 a smaller batch is still advised
        check_memory(2, needed_bytes=4 * 10**6, available=4 * 10**6 - 1)
    assert "try --batch-sizes 1 or smaller" in str(caught.value)
