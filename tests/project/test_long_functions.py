"""tools/long_functions.py can fail: functions and modules planted in a temp package over the limits are
refused, ones exactly at the limits pass, and the allow-list is a ratchet (a grown, stale or new entry fails)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

TOOL = Path(__file__).resolve().parents[2] / "tools" / "long_functions.py"
ALLOW = TOOL.parent / "long_functions_allow.txt"


def function(name: str, lines: int, params: int) -> str:
    """Source of a function of exactly ``lines`` lines (def line included) and ``params`` parameters."""
    assert lines >= 2
    arguments = ", ".join(f"a{i}" for i in range(params))
    body = ["    x = 0"] * (lines - 2) + ["    return x"]
    return "\n".join([f"def {name}({arguments}):", *body]) + "\n"


def make_package(root: Path, files: dict[str, str]) -> Path:
    package = root / "pkg"
    package.mkdir()
    for relative, source in {"__init__.py": "", **files}.items():
        (package / relative).write_text(source)
    return package


def check(package: Path, *options: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(TOOL), "--package", str(package), "--lines", "60", "--params", "7", "--fail", *options],
        capture_output=True,
        text=True,
        check=False,
    )


def test_exactly_at_the_limits_passes(tmp_path):
    package = make_package(tmp_path, {"m.py": function("sixty", 60, 7)})
    result = check(package)
    assert result.returncode == 0, result.stdout
    assert "0 over 60 lines" in result.stdout


def test_one_line_over_fails(tmp_path):
    package = make_package(tmp_path, {"m.py": function("sixty_one", 61, 7)})
    result = check(package)
    assert result.returncode == 1
    assert "new offender: pkg/m.py:sixty_one (61 lines, 7 params)" in result.stdout


def test_one_parameter_over_fails(tmp_path):
    package = make_package(tmp_path, {"m.py": function("eight", 10, 8)})
    result = check(package)
    assert result.returncode == 1
    assert "new offender: pkg/m.py:eight (10 lines, 8 params)" in result.stdout


def test_a_method_is_named_by_its_class_and_self_counts(tmp_path):
    method = "class C:\n" + "".join("    " + line + "\n" for line in function("m", 5, 8).splitlines())
    package = make_package(tmp_path, {"m.py": method})
    result = check(package)
    assert result.returncode == 1
    assert "new offender: pkg/m.py:C.m (5 lines, 8 params)" in result.stdout


def test_without_fail_it_only_lists(tmp_path):
    package = make_package(tmp_path, {"m.py": function("long", 70, 1)})
    result = subprocess.run(
        [sys.executable, str(TOOL), "--package", str(package)], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0
    assert "pkg/m.py:1 long" in result.stdout


def test_module_over_600_lines_needs_a_reason(tmp_path):
    short = function("f", 10, 1)
    filler = "\n" * (601 - len(short.splitlines()))
    package = make_package(
        tmp_path,
        {
            "at_limit.py": short + "\n" * (600 - len(short.splitlines())),
            "long.py": short + filler,
            "explained.py": '"""A module.\n\nWhy this module is long: one table.\n"""\n' + short + filler,
        },
    )
    result = check(package)
    assert result.returncode == 1
    assert "new offender: pkg/long.py (601 lines, 0 params)" in result.stdout
    assert "at_limit" not in result.stdout and "explained" not in result.stdout


def write_allow(tmp_path: Path, text: str) -> str:
    path = tmp_path / "allow.txt"
    path.write_text(text)
    return str(path)


def test_allow_list_excuses_an_offender_at_its_size(tmp_path):
    package = make_package(tmp_path, {"m.py": function("long", 70, 8)})
    allow = write_allow(tmp_path, "# old code\npkg/m.py:long lines=70 params=8\n")
    result = check(package, "--allow", allow)
    assert result.returncode == 0, result.stdout


def test_allow_list_fails_when_the_function_grew(tmp_path):
    package = make_package(tmp_path, {"m.py": function("long", 71, 8)})
    result = check(package, "--allow", write_allow(tmp_path, "pkg/m.py:long lines=70 params=8\n"))
    assert result.returncode == 1
    assert "grew: pkg/m.py:long is 71 lines, 8 params" in result.stdout


def test_allow_list_fails_when_a_parameter_was_added(tmp_path):
    package = make_package(tmp_path, {"m.py": function("long", 70, 9)})
    result = check(package, "--allow", write_allow(tmp_path, "pkg/m.py:long lines=70 params=8\n"))
    assert result.returncode == 1
    assert "grew: pkg/m.py:long" in result.stdout


def test_allow_list_fails_on_an_entry_back_within_the_limits(tmp_path):
    package = make_package(tmp_path, {"m.py": function("long", 60, 7)})
    result = check(package, "--allow", write_allow(tmp_path, "pkg/m.py:long lines=70 params=8\n"))
    assert result.returncode == 1
    assert "stale entry: pkg/m.py:long" in result.stdout


def test_allow_list_fails_on_an_entry_whose_function_is_gone(tmp_path):
    package = make_package(tmp_path, {"m.py": function("other", 5, 1)})
    result = check(package, "--allow", write_allow(tmp_path, "pkg/m.py:long lines=70 params=8\n"))
    assert result.returncode == 1
    assert "stale entry: pkg/m.py:long" in result.stdout


def test_allow_list_passes_a_shrunk_offender_with_a_note(tmp_path):
    package = make_package(tmp_path, {"m.py": function("long", 65, 8)})
    result = check(package, "--allow", write_allow(tmp_path, "pkg/m.py:long lines=70 params=8\n"))
    assert result.returncode == 0, result.stdout
    assert "lower pkg/m.py:long to lines=65 params=8" in result.stdout


def test_malformed_allow_line_is_one_line_error(tmp_path):
    package = make_package(tmp_path, {"m.py": function("f", 5, 1)})
    result = check(package, "--allow", write_allow(tmp_path, "pkg/m.py:long seventy\n"))
    assert result.returncode == 2
    assert "allow.txt:1: expected 'NAME lines=N params=P'" in result.stderr
    assert "Traceback" not in result.stderr


def test_the_project_passes_its_own_check():
    """trtprof/ against tools/long_functions_allow.txt, as .ci/run runs it."""
    result = subprocess.run(
        [sys.executable, str(TOOL), "--lines", "60", "--params", "7", "--fail"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout
    assert ALLOW.is_file()
