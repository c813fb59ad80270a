"""Issue 36 item 8: under ``ulimit -v 400000`` a compare died (or spun) in scipy's import with a
traceback; now it is refused before any work, in one line naming the limit. Real limit via setrlimit
in the child; the threshold itself just inside and outside with a monkeypatched limit."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from trtprof.errors import BadInput
from trtprof.system import address_space

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="RLIMIT_AS as Linux has it")
def test_compare_under_ulimit_v_400000_is_one_line(conv_model, tmp_path):
    import resource

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (400_000 * 1024, resource.RLIM_INFINITY))

    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.run([sys.executable, "-m", "trtprof", "compare", str(conv_model), "--backend", "onnxruntime",
                           "--engines", str(tmp_path / "e"), "--out", str(tmp_path / "c.json")],
                          capture_output=True, text=True, env=env, timeout=120, preexec_fn=limit)
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == 2 and len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert "ulimit -v 400000" in lines[0]
    assert not (tmp_path / "e").exists() and not (tmp_path / "c.json").exists()


def test_the_limit_just_inside_and_outside(monkeypatch):
    monkeypatch.setattr(address_space, "address_space_limit", lambda: address_space.MIN_ADDRESS_SPACE_BYTES)
    address_space.check_address_space("compare")
    monkeypatch.setattr(address_space, "address_space_limit", lambda: address_space.MIN_ADDRESS_SPACE_BYTES - 1)
    with pytest.raises(BadInput, match="ulimit -v"):
        address_space.check_address_space("compare")
    address_space.check_address_space("report")  # reading results maps far less: not refused
    monkeypatch.setattr(address_space, "address_space_limit", lambda: None)
    address_space.check_address_space("compare")


def test_a_library_that_cannot_be_mapped_is_one_line(monkeypatch, capsys, tmp_path):
    from trtprof.cli import main, report

    def fail(_args):
        raise ImportError("/x/_dfitpack.so: failed to map segment from shared object")

    monkeypatch.setattr(report, "run", fail)
    results = tmp_path / "r.json"
    results.write_text("{}")
    from trtprof.cli import make_parser  # noqa: F401 - the parser binds run at build time: patch before main

    code = main(["report", str(results), "-o", str(tmp_path / "r.html")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "ulimit -v" in err[0] and "failed to map segment" in err[0]
