"""tools/check_imports.py can fail: a planted cycle or private import in a temp package is found."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

TOOL = Path(__file__).resolve().parents[2] / "tools" / "check_imports.py"


def make_package(root: Path, files: dict[str, str]) -> Path:
    """A package ``pkg`` under ``root`` with the given modules (relative path -> source)."""
    package = root / "pkg"
    for relative, source in {"__init__.py": "", **files}.items():
        path = package / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(source))
    return package


def check(package: Path, *options: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(TOOL), "--package", str(package), *options],
        capture_output=True,
        text=True,
        check=False,
    )


def test_clean_package_passes(tmp_path):
    package = make_package(
        tmp_path,
        {
            "low.py": "VALUE = 1\n",
            "high.py": "from .low import VALUE\n\ndef f():\n    from . import low\n    return low.VALUE\n",
        },
    )
    result = check(package)
    assert result.returncode == 0, result.stdout
    assert "0 circle(s)" in result.stdout


def test_cycle_through_a_function_level_import_fails(tmp_path):
    package = make_package(
        tmp_path,
        {
            "a.py": "from .b import g\n\ndef f():\n    return g()\n",
            "b.py": "def g():\n    from .sub.c import h\n    return h()\n",
            "sub/__init__.py": "",
            "sub/c.py": "def h():\n    from ..a import f\n    return f\n",
        },
    )
    result = check(package)
    assert result.returncode == 1
    assert "cycle: pkg.a -> pkg.b -> pkg.sub.c -> pkg.a" in result.stdout
    assert "1 circle(s)" in result.stdout


def test_cycle_through_type_checking_counts_unless_runtime_only(tmp_path):
    package = make_package(
        tmp_path,
        {
            "a.py": "from .b import B\n",
            "b.py": """\
                from typing import TYPE_CHECKING
                if TYPE_CHECKING:
                    from .a import A
                class B:
                    pass
            """,
        },
    )
    assert check(package).returncode == 1
    assert check(package, "--runtime-only").returncode == 0


def test_absolute_and_from_package_imports_are_edges(tmp_path):
    package = make_package(
        tmp_path,
        {"a.py": "import pkg.b\n", "b.py": "def g():\n    from pkg import a\n    return a\n"},
    )
    result = check(package, "--graph")
    assert result.returncode == 1
    assert "pkg.a -> pkg.b" in result.stdout and "pkg.b -> pkg.a" in result.stdout


def test_private_name_from_another_module_fails(tmp_path):
    package = make_package(
        tmp_path,
        {
            "low.py": "_SECRET = 1\n__all__ = ['_SECRET']\n",
            "high.py": "from .low import _SECRET\n",
        },
    )
    result = check(package)
    assert result.returncode == 1
    assert "pkg.high uses pkg.low._SECRET" in result.stdout


def test_private_attribute_of_an_imported_module_fails(tmp_path):
    package = make_package(
        tmp_path,
        {"low.py": "_SECRET = 1\n", "high.py": "from . import low\nX = low._SECRET\nY = low.__name__\n"},
    )
    result = check(package)
    assert result.returncode == 1
    assert "pkg.high uses pkg.low._SECRET" in result.stdout
    assert "__name__" not in result.stdout


def test_own_private_names_are_fine(tmp_path):
    package = make_package(tmp_path, {"a.py": "_X = 1\n\ndef f():\n    return _X\n"})
    assert check(package).returncode == 0


def test_not_a_package_is_refused(tmp_path):
    result = check(tmp_path)
    assert result.returncode == 2
    assert "not a package" in result.stderr


def test_trtprof_itself_has_no_cycles_and_no_private_imports():
    result = subprocess.run([sys.executable, str(TOOL)], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout
    assert "0 circle(s)" in result.stdout and "0 private name(s)" in result.stdout


def test_a_circle_of_wings_fails_only_with_wings(tmp_path):
    """Two wings whose modules import each other without a module cycle (w1.a -> w2.b, w2.c -> w1.d):
    the module graph is clean, the wing graph has the circle, and ``--wings`` reports and fails on it."""
    package = make_package(
        tmp_path,
        {
            "w1/__init__.py": "",
            "w1/a.py": "from ..w2.b import B\n",
            "w1/d.py": "D = 1\n",
            "w2/__init__.py": "",
            "w2/b.py": "B = 1\n",
            "w2/c.py": "from ..w1.d import D\n",
        },
    )
    assert check(package).returncode == 0
    result = check(package, "--wings")
    assert result.returncode == 1
    assert "wing cycle: pkg.w1 -> pkg.w2 -> pkg.w1" in result.stdout
    assert "1 circle(s) of wings" in result.stdout


def test_trtprof_has_no_circle_of_wings():
    result = subprocess.run([sys.executable, str(TOOL), "--wings"], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout
    assert "0 circle(s) of wings importing each other" in result.stdout
