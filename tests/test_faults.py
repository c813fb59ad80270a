"""Issue 21: fault injection. Each case runs the real CLI in a subprocess with one fault injected (by
tests/faults/sitecustomize.py, named per test) or a real limit (``ulimit -f``), and asserts the promise:
the exit code, the one line, and the user files that must still exist."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from trtprof.cli import main

from .test_cli import _assert_clean_failure

FAULTS_DIR = Path(__file__).parent / "faults"
REPO = Path(__file__).resolve().parent.parent


def run_with_fault(fault: str, *argv: str, preexec_fn=None, timeout: float = 300) -> subprocess.CompletedProcess:
    """``python -m trtprof ARGV`` with ``fault`` injected (see tests/faults/sitecustomize.py)."""
    env = dict(os.environ, TRTPROF_TEST_FAULT=fault,
               PYTHONPATH=os.pathsep.join([str(FAULTS_DIR), str(REPO), os.environ.get("PYTHONPATH", "")]))
    return subprocess.run([sys.executable, "-m", "trtprof", *argv], capture_output=True, text=True,
                          timeout=timeout, env=env, preexec_fn=preexec_fn)


@pytest.fixture
def engines(conv_model, tmp_path) -> Path:
    out = tmp_path / "engines"
    assert main(["build", str(conv_model), "--fp32", "--batch-sizes", "1,2", "--engines", str(out),
                 "--backend", "onnxruntime"]) == 0
    return out


def test_ort_allocation_failure_while_running_is_exit_2_naming_the_batch(engines, tmp_path):
    """Fault: ORT's session run raises its own "Failed to allocate memory" RuntimeException at batch
    4096 (injected: whether a real run fails depends on the ORT version and the machine). The CLI
    says which batch ran out, what to try, and writes no half result."""
    (meta,) = engines.glob("*.fp32.*.json")
    out = tmp_path / "r.json"
    proc = run_with_fault("ort_oom:4096", "bench", str(meta), "--batch-sizes", "4096", "--warmup", "1",
                          "--iterations", "2", "--out", str(out))
    _assert_clean_failure(proc, "out of memory at batch size 4096", "an allocation of", "inputs alone take",
                          "try --batch-sizes")
    assert not out.exists() and meta.exists()
    # the same injection leaves a batch below its threshold alone: the fault is what failed the run
    proc = run_with_fault("ort_oom:4096", "bench", str(meta), "--batch-sizes", "2", "--warmup", "1",
                          "--iterations", "2", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    assert out.exists()
