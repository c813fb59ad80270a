"""Issue 45, long legal names: an output name the file system takes is written (its atomic temp's name is
cut, not the output's); one it cannot take is refused before any work in one line; a model with a 245-character
name builds (the engine entry's stem is capped with a hash); any other "name too long" is one line."""
from __future__ import annotations

import errno
import os

import pytest

from trtprof.cli import _common, main
from trtprof.util.files import STEM_MAX, atomic_write_text, safe_stem

from ..conftest import one_line_error


def name_max(folder) -> int:
    return os.pathconf(folder, "PC_NAME_MAX")


def test_an_output_name_at_the_file_systems_limit_is_written(tmp_path):
    longest = tmp_path / ("a" * (name_max(tmp_path) - 5) + ".html")  # exactly NAME_MAX bytes
    atomic_write_text(longest, "page")
    assert longest.read_text() == "page" and [p.name for p in tmp_path.iterdir()] == [longest.name]


def test_output_names_just_inside_and_just_outside_the_limit(tmp_path):
    limit = name_max(tmp_path)
    _common.check_name_length(tmp_path / ("o" * limit), "--out")  # inside: no error
    with pytest.raises(_common.BadInput) as err:
        _common.check_name_length(tmp_path / ("o" * (limit + 1)), "--out")
    assert f"{limit + 1} bytes" in str(err.value) and "\n" not in str(err.value)


def test_report_to_a_name_too_long_is_one_line_before_any_work(tmp_path, capsys):
    results = tmp_path / "r.json"
    results.write_text("{}")
    out = tmp_path / ("a" * 300 + ".html")
    code = main(["report", str(results), "-o", str(out)])
    one_line_error(code, capsys.readouterr().err, "bytes; the file system takes at most")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.json"]


def test_a_245_character_model_name_builds(tmp_path, capsys):
    pytest.importorskip("onnxruntime")
    from trtprof.model.demo import make_demo_model

    model = make_demo_model(tmp_path / ("m" * 245 + ".onnx"), channels=4, image=8, classes=3)
    code = main(["build", "--fp32", str(model), "--engines", str(tmp_path / "e"), "--backend", "onnxruntime"])
    assert code == 0, capsys.readouterr().err
    names = [p.name for p in (tmp_path / "e").rglob("*")]
    assert names and max(len(n.encode()) for n in names) <= 255


def test_stems_are_capped_with_a_hash_just_above_the_limit():
    assert safe_stem("s" * STEM_MAX) == "s" * STEM_MAX
    capped = safe_stem("s" * (STEM_MAX + 1))
    assert len(capped) == STEM_MAX and capped != safe_stem("s" * (STEM_MAX + 2))


def test_any_other_name_too_long_is_one_line(tmp_path, capsys, monkeypatch):
    from trtprof.cli import report

    def too_long(args):
        raise OSError(errno.ENAMETOOLONG, "File name too long", str(tmp_path / "x"))

    monkeypatch.setattr(report, "run", too_long)
    results = tmp_path / "r.json"
    results.write_text("{}")
    one_line_error(main(["report", str(results), "-o", str(tmp_path / "p.html")]), capsys.readouterr().err,
                   "File name too long")
