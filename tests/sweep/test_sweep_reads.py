"""Issue 41, item 2, for sweeps: ``trtprof report sweep.json`` reads the sweep file once (it read it three
times: ``read_results``, then ``load_sweep`` for the cell pages' names and again for the page) and each cell's
file once; a ``sweep.json.gz`` gives the page the plain file gives; ``sweep --resume`` reads its journal
(``cells.jsonl``) once per run (it read it three times: the torn-line repair, the cells already done, the
merge at the end)."""
from __future__ import annotations

import gzip
import json
import pathlib
from pathlib import Path

import pytest

from trtprof.schemas import SWEEP
from trtprof.sweep.store import SweepStore

from ..cli.test_user_errors import assert_one_line, run_main
from ..compare.test_results_file import counting_reads
from ..report.test_report import synthetic_compare_json

CELLS = ("aaaaaaaaaaaa", "bbbbbbbbbbbb")


def sweep_folder(tmp_path: Path) -> Path:
    """A merged sweep file with two ok cells (each a compare file of the real writer) and a failed one."""
    folder = tmp_path / "sweep"
    (folder / "cells").mkdir(parents=True)
    compare = synthetic_compare_json(tmp_path)
    entries = []
    for i, cell_id in enumerate(CELLS):
        (folder / "cells" / f"{cell_id}.json").write_bytes(compare.read_bytes())
        entries.append({"id": cell_id, "name": f"net compare batch {i + 1}", "kind": "compare", "model": "net",
                        "batch_size": i + 1, "status": "ok", "result_file": f"cells/{cell_id}.json",
                        "precisions": ["fp32", "fp16"],
                        "summary": [{"candidate": "fp16", "baseline": "fp32", "speedup": 1.6 + i, "ci_low": 1.5,
                                     "ci_high": 1.7 + i, "verdict": "faster"}]})
    entries.append({"id": "cccccccccccc", "name": "net compare batch 8", "kind": "compare", "model": "net",
                    "batch_size": 8, "status": "failed", "error": "out of memory", "precisions": ["fp32", "fp16"]})
    merged = {"schema": SWEEP, "created": "2026-12-02T22:00:00Z", "cells_ok": 2, "cells_failed": 1,
              "cells_missing": 0, "cells_total": 3, "executor": {"name": "local", "slots": []},
              "warnings": ["a warning"], "entries": entries}
    (folder / "sweep.json").write_text(json.dumps(merged))
    return folder / "sweep.json"


def report(capsys, src: Path, out: Path) -> tuple[str, str]:
    code, printed, err = run_main(capsys, "report", str(src), "-o", str(out))
    assert code == 0, err
    lines = printed.splitlines()
    assert lines[-1] == f"report: {out}"
    return out.read_text(), "\n".join(lines[:-1])


def test_report_reads_the_sweep_once_and_each_cell_once(tmp_path, capsys, monkeypatch):
    pytest.importorskip("matplotlib")
    src = sweep_folder(tmp_path)
    reads = counting_reads(monkeypatch)
    page, md = report(capsys, src, tmp_path / "page.html")
    cells = [src.parent / "cells" / f"{c}.json" for c in CELLS]
    assert reads == [src, *cells]  # was [src, src, src, *cells]
    assert "2 ok, 1 failed" in md and "1.600× [1.500, 1.700] faster" in md and "out of memory" in md
    assert all(f'href="page_cells/{c}.html"' in page for c in CELLS)
    assert sorted(p.name for p in (tmp_path / "page_cells").iterdir()) == [f"{c}.html" for c in CELLS]


def test_a_gzipped_sweep_gives_the_plain_file_s_page(tmp_path, capsys, monkeypatch):
    pytest.importorskip("matplotlib")
    src = sweep_folder(tmp_path)
    page, md = report(capsys, src, tmp_path / "plain.html")
    gz = src.with_name("sweep.json.gz")
    gz.write_bytes(gzip.compress(src.read_bytes()))
    src.unlink()  # nothing can come from the plain file now
    reads = counting_reads(monkeypatch)
    page_gz, md_gz = report(capsys, gz, tmp_path / "gz.html")
    assert reads[0] == gz and reads.count(gz) == 1
    assert md_gz == md
    assert page_gz == page.replace("plain_cells/", "gz_cells/")  # the cell pages sit beside each page


@pytest.mark.parametrize("value,refused", [(-1, True), (True, True), ("3", True), (0, False)])
def test_the_sweep_s_counts_are_checked_once_read_just_inside_and_outside(tmp_path, capsys, value, refused):
    """The check load_sweep made, now made where the file is read (``compare.results_file``): an integer
    >= 0 passes, anything else is one line naming the field and the file."""
    src = sweep_folder(tmp_path)
    data = json.loads(src.read_text())
    data["cells_missing"] = value
    data["entries"] = data["entries"][2:]  # the failed cell only: no cell page needed
    src.write_text(json.dumps(data))
    code, _, err = run_main(capsys, "report", str(src), "-o", str(tmp_path / "m.html"))
    if refused:
        assert_one_line(code, err, str(src), "cells_missing")
        assert not (tmp_path / "m.html").exists()
    else:
        assert code == 0, err


def test_an_entry_that_is_not_an_object_is_one_line(tmp_path, capsys):
    src = sweep_folder(tmp_path)
    data = json.loads(src.read_text())
    data["entries"][1] = "cells/x.json"
    src.write_text(json.dumps(data))
    code, _, err = run_main(capsys, "report", str(src), "-o", str(tmp_path / "m.html"))
    assert_one_line(code, err, str(src), "entries[1]: expected an object, not str")


def counting_journal_reads(monkeypatch, log: Path) -> list[str]:
    """Every read of ``log`` through pathlib (the store reads its journal with read_bytes/read_text)."""
    reads: list[str] = []
    for name in ("read_bytes", "read_text"):
        real = getattr(pathlib.Path, name)

        def counted(self, *args, _real=real, _name=name, **kwargs):
            if Path(self) == log:
                reads.append(_name)
            return _real(self, *args, **kwargs)

        monkeypatch.setattr(pathlib.Path, name, counted)
    return reads


def test_resume_reads_the_journal_once_and_merges_what_a_fresh_read_gives(tmp_path, monkeypatch):
    """What ``run_sweep`` asks of its store on --resume: the cells done, one record added per cell run, the
    last record of each cell for the merge. One read of cells.jsonl (the repair of a torn last line
    included); the records merged are those a fresh read of the file gives."""
    out = tmp_path / "sw"
    first = SweepStore(out, resume=False)
    first.add({"id": "aaaaaaaaaaaa", "status": "ok", "wall_s": 1.0})
    first.add({"id": "bbbbbbbbbbbb", "status": "failed", "error": "x"})
    with open(first.log, "a") as fh:
        fh.write('{"id": "cccccccccccc", "sta')  # killed mid-write
    reads = counting_journal_reads(monkeypatch, first.log)
    store = SweepStore(out, resume=True)
    assert store.done_ids() == {"aaaaaaaaaaaa"}
    store.add({"id": "bbbbbbbbbbbb", "status": "ok", "span": (1, 2), "nan": float("nan")})  # re-run: now ok
    store.add({"id": "cccccccccccc", "status": "ok"})
    latest = store.latest()
    assert reads == ["read_bytes"]  # was ["read_bytes", "read_text", "read_text"]
    fresh = {r["id"]: r for r in store.read_records()}
    assert json.dumps(latest, allow_nan=True) == json.dumps(fresh, allow_nan=True)
    assert latest["bbbbbbbbbbbb"]["span"] == [1, 2] and latest["bbbbbbbbbbbb"]["status"] == "ok"
    assert store.done_ids() == {"aaaaaaaaaaaa", "bbbbbbbbbbbb", "cccccccccccc"}


def test_a_new_sweep_never_reads_its_journal(tmp_path, monkeypatch):
    out = tmp_path / "sw"
    reads = counting_journal_reads(monkeypatch, out / "cells.jsonl")
    store = SweepStore(out, resume=False)
    store.add({"id": "aaaaaaaaaaaa", "status": "ok"})
    assert list(store.latest()) == ["aaaaaaaaaaaa"] and reads == []


def test_the_environment_table_names_the_runtime_packages_in_their_order():
    """One row per (host, GPU); its libraries are the runtimes' packages a cell recorded, in
    ``system.environment.RUNTIME_PACKAGES``' order, others left out; a missing cell adds no row."""
    from trtprof.sweep.matrix import environments

    packages = {"numpy": "2.0", "cuda-bindings": "12.9", "tensorrt-rtx": "1.1", "tensorrt": "10.13", "torch": "2.8",
                "onnxruntime": "1.22", "onnx": "1.18"}
    entry = {"status": "ok", "host": {"hostname": "h", "python": "3.12"}, "gpu": {"uuid": "GPU-1", "driver": "580"},
             "packages": packages}
    rows = environments({"entries": [entry, {**entry, "status": "missing", "gpu": {"uuid": "GPU-2"}}]})
    assert rows == [["h", rows[0][1], "GPU-1", "580", "3.12",
                     "onnxruntime 1.22, torch 2.8, tensorrt 10.13, tensorrt-rtx 1.1, cuda-bindings 12.9"]]
