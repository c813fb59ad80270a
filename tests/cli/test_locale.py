"""Issue 45 item 4 (round 5, "any locale"): every command works, and writes its JSON, under any locale
and an ASCII stdout; text the stream cannot encode falls back to ASCII ('≈' → '~', '…' → '...').

On 4b0e977, under ``LC_ALL=C`` with ``PYTHONUTF8=0``, `compare` measured, printed, then died on a
character before writing its JSON; `cache ls`, `compare --help` gave tracebacks.

The runs are real subprocesses (``python -m trtprof``) with ``LC_ALL=C LANG=C PYTHONUTF8=0`` and no
``PYTHONIOENCODING`` (an ASCII stdout, and ASCII as the default file encoding), and under a Latin-1
locale: this machine may have none (``locale -a``: C, C.utf8, POSIX here), and then the Latin-1 case is
simulated with ``PYTHONIOENCODING=latin-1`` (the stream's encoding, which is what broke), said in the
test's id.
"""
from __future__ import annotations

import ast
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from trtprof.cli import main

ROOT = Path(__file__).resolve().parents[2]


def _latin1_locale() -> str | None:
    try:
        names = subprocess.run(["locale", "-a"], capture_output=True, text=True, timeout=10).stdout.split()
    except (OSError, subprocess.SubprocessError):
        return None
    return next((n for n in names if n.lower().replace("-", "").endswith(("iso88591", "latin1"))), None)


LATIN1 = _latin1_locale()
ENVS = {
    "C-locale-ascii": {"LC_ALL": "C", "LANG": "C", "PYTHONUTF8": "0"},
    **({f"latin1-locale-{LATIN1}": {"LC_ALL": LATIN1, "LANG": LATIN1, "PYTHONUTF8": "0"}} if LATIN1 else
       {"latin1-simulated-PYTHONIOENCODING": {"LC_ALL": "C", "LANG": "C", "PYTHONUTF8": "0",
                                              "PYTHONIOENCODING": "latin-1"}}),
}


def run_under(env_extra: dict[str, str], *args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("LC_") and k not in ("LANG", "LANGUAGE", "PYTHONIOENCODING", "PYTHONUTF8",
                                                     "PYTHONCOERCECLOCALE")}
    env.update(env_extra, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "trtprof", *args], capture_output=True, cwd=cwd, env=env,
                          timeout=300)


def assert_clean(proc: subprocess.CompletedProcess, encoding: str) -> str:
    err = proc.stderr.decode(encoding)
    assert proc.returncode == 0, err
    assert "Traceback" not in err and "UnicodeEncodeError" not in err, err
    return proc.stdout.decode(encoding)  # raises if a byte is not of the stream's encoding


@pytest.fixture(scope="module")
def work(tmp_path_factory) -> Path:
    """A model, its engines at batch 1 and 4 (`cache ls` shows the range 1–4) and a bench results file."""
    from trtprof.model.demo import make_demo_model

    root = tmp_path_factory.mktemp("locale")
    model = make_demo_model(root / "m.onnx", channels=4, image=8, classes=5)
    assert main(["build", str(model), "--fp32", "--fp16", "--batch-sizes", "1,4", "--engines", str(root / "e"),
                 "--backend", "onnxruntime"]) == 0
    assert main(["bench", str(root / "e"), "--warmup", "1", "--iterations", "3", "--out", str(root / "r.json")]) == 0
    return root


@pytest.mark.parametrize("name", list(ENVS))
def test_help_cache_ls_and_report_under_the_locale(name, work, tmp_path):
    env = ENVS[name]
    encoding = "latin-1" if "latin1" in name else "ascii"
    for args in (["--help"], ["compare", "--help"], ["fix-fp16", "--help"], ["cache", "ls", str(work / "e")]):
        out = assert_clean(run_under(env, *args, cwd=tmp_path), encoding)
        assert out.strip()
    listing = assert_clean(run_under(env, "cache", "ls", str(work / "e"), cwd=tmp_path), encoding)
    assert "1-4" in listing  # '1–4' (an en dash) as ASCII
    page = tmp_path / "r.html"
    out = assert_clean(run_under(env, "report", str(work / "r.json"), "-o", str(page), cwd=tmp_path), encoding)
    assert page.read_text(encoding="utf-8").startswith("<!DOCTYPE html>") and out.strip()


@pytest.mark.parametrize("name", list(ENVS))
def test_compare_prints_and_writes_its_json_under_the_locale(name, work, tmp_path):
    env = ENVS[name]
    encoding = "latin-1" if "latin1" in name else "ascii"
    out_json = tmp_path / "c.json"
    proc = run_under(env, "compare", str(work / "m.onnx"), "--engines", str(work / "e"), "--backend", "onnxruntime",
                     "--batch-sizes", "1", "--time-budget-s", "4", "--min-loads", "2", "--round-iterations", "5",
                     "--out", str(out_json), cwd=tmp_path)
    out = assert_clean(proc, encoding)
    assert "fp16 vs fp32" in out and f"compare: {out_json}" in out
    assert json.loads(out_json.read_text(encoding="utf-8"))["comparisons"]
    page = tmp_path / "c.html"
    assert_clean(run_under(env, "report", str(out_json), "-o", str(page), cwd=tmp_path), encoding)
    assert page.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")  # files are UTF-8 whatever the locale


def test_a_non_ascii_model_name_under_the_c_locale(work, tmp_path):
    """Under LC_ALL=C the name 'modèle' arrives as surrogate escapes: the results, the page and its plots
    carry it as UTF-8 ('modèle'), and no library sees a surrogate."""
    model = tmp_path / "modèle.onnx"
    model.write_bytes((work / "m.onnx").read_bytes())
    env = ENVS["C-locale-ascii"]
    assert_clean(run_under(env, "build", str(model), "--engines", str(tmp_path / "e"), "--backend", "onnxruntime",
                           cwd=tmp_path), "ascii")
    assert_clean(run_under(env, "bench", str(tmp_path / "e"), "--warmup", "1", "--iterations", "3", "--out",
                           str(tmp_path / "r.json"), cwd=tmp_path), "ascii")
    assert_clean(run_under(env, "report", str(tmp_path / "r.json"), "-o", str(tmp_path / "r.html"), cwd=tmp_path),
                 "ascii")
    assert "modèle" in (tmp_path / "r.html").read_text(encoding="utf-8")


def test_the_fallback_spells_out_what_the_stream_cannot_hold():
    from trtprof.util.console import fit_streams

    raw = io.BytesIO()
    stream = io.TextIOWrapper(raw, encoding="ascii")
    saved = sys.stdout
    sys.stdout = stream
    try:
        fit_streams()
        print("1.04× ≈ faster… ±2 % ≥ 1–4 é 中", end="")
        stream.flush()
    finally:
        sys.stdout = saved
    assert raw.getvalue() == b"1.04x ~ faster... +/-2 % >= 1-4 e \\u4e2d"
    latin = io.TextIOWrapper(io.BytesIO(), encoding="latin-1")
    from trtprof.util.console import needs_fallback

    assert needs_fallback(latin) and not needs_fallback(io.TextIOWrapper(io.BytesIO(), encoding="utf-8"))


# --- files: every text file trtprof opens names its encoding (the locale's default is ASCII under C) ---

TEXT_CALLS = {"read_text", "write_text"}
TEMP_FILES = {"TemporaryFile", "NamedTemporaryFile", "SpooledTemporaryFile"}


def _mode(call: ast.Call, position: int) -> str | None:
    for kw in call.keywords:
        if kw.arg == "mode":
            return kw.value.value if isinstance(kw.value, ast.Constant) else "?"
    if len(call.args) > position and isinstance(call.args[position], ast.Constant):
        return call.args[position].value
    return None


def _missing_encoding(tree: ast.AST):
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        names = {kw.arg for kw in node.keywords}
        if "encoding" in names:
            continue
        func = node.func
        name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
        if name == "open" and isinstance(func, ast.Name):
            mode = _mode(node, 1) or "r"
        elif name == "open":  # Path.open("w"); zipfile's and classmethods' open take no text mode
            mode = _mode(node, 0) or "b"
        elif name == "fdopen":
            mode = _mode(node, 1) or "r"
        elif name in TEMP_FILES:
            mode = _mode(node, 0) or "w+b"
        elif name in TEXT_CALLS and isinstance(func, ast.Attribute):  # Path's; datafile.read_text is UTF-8
            mode = "t"
        elif name in ("run", "Popen", "check_output", "check_call") and names & {"text", "universal_newlines"}:
            mode = "t"
        else:
            continue
        if "b" not in str(mode):
            yield node.lineno, name


def test_every_text_file_names_its_encoding():
    missing = []
    for path in sorted((ROOT / "trtprof").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        missing += [f"{path.relative_to(ROOT)}:{line} {name}" for line, name in _missing_encoding(tree)]
    assert not missing, "text files opened in the locale's encoding:\n" + "\n".join(missing)


def test_the_encoding_check_finds_a_bare_open():
    tree = ast.parse("open(p)\nopen(p, 'rb')\np.read_text()\np.read_bytes()\nopen(p, encoding='utf-8')\n"
                     "subprocess.run(a, text=True)\nzf.open(info)\np.open('w')\n")
    assert [line for line, _ in _missing_encoding(tree)] == [1, 3, 6, 8]
