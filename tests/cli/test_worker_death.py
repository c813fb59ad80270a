"""Issue 36, deliverable 3: a measurement worker that dies (the OOM killer's kill -9) or is told to stop
(SIGTERM of that one process) mid-compare costs nothing finished. Real processes on the CPU (ONNX
Runtime): a compare over three batch sizes, one worker killed after the first batch size is decided.
Expected: one line naming the load and the signal, exit 2, the finished batch size in the JSON, the
interrupted one's finished rounds kept and marked partial, and the parent exits (never hangs)."""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
WAIT_S = 240  # a hang fails the test instead of the CI job


def _workers_of(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmd = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        if ppid == pid and b"trtprof.measure.workers" in cmd:
            found.append(int(entry.name))
    return sorted(found)


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM])
def test_a_worker_killed_mid_compare_keeps_the_finished_batch_sizes(sig, conv_model, tmp_path):
    out = tmp_path / "c.json"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
    argv = [sys.executable, "-m", "trtprof", "compare", str(conv_model), "--engines", str(tmp_path / "e"),
            "--backend", "onnxruntime", "--batch-sizes", "1,2,4", "--time-budget-s", "6", "--min-loads", "3",
            "--round-iterations", "5", "--out", str(out)]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    lines: list[str] = []
    killed: list[int] = []

    def watch() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            lines.append(line)
            # batch 1 decided, batch 2 has run rounds: kill one of its workers
            if not killed and line.startswith("  batch 2:") and " 0 rounds" not in line and any(
                    l.startswith("batch 1:") for l in lines):
                victims = _workers_of(proc.pid)
                if victims:  # the first: load 0's, which every batch size uses (on a loaded machine the budget
                    # may open only the floor's 2 of the 3 workers, and the last one's death costs nothing)
                    os.kill(victims[0], sig)
                    killed.append(victims[0])

    reader = threading.Thread(target=watch, daemon=True)
    reader.start()
    try:
        proc.wait(timeout=WAIT_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        pytest.fail("the parent hung after its worker died")
    reader.join(timeout=10)
    err = "".join(lines)
    assert killed, f"no worker was killed (the run ended first?): {err}"
    assert "Traceback" not in err, err
    assert proc.returncode == 2, err
    last = [l for l in lines if l.strip()][-1]
    assert "load" in last and signal.Signals(sig).name in last, last
    data = json.loads(out.read_text())
    assert data["worker_lost"] and signal.Signals(sig).name in data["worker_lost"]
    # the batch size it died in (2, or 4 when batch 2 ended between the progress line and the kill)
    lost = int(re.search(r"during batch size (\d+)", data["worker_lost"]).group(1))
    assert lost in (2, 4), data["worker_lost"]
    batches = {c["batch_size"]: c for c in data["comparisons"]}
    for size in (1, 2, 4):
        if size < lost:  # decided before: kept whole
            assert size in batches and not batches[size].get("partial"), size
        elif size == lost and size in batches:  # its finished rounds, marked
            assert batches[size]["partial"] is True and batches[size]["stop_reason"] == "load_lost"
            assert batches[size]["rounds"] >= 1
        else:
            assert size in data["pending_batch_sizes"], size
    assert not _workers_of(proc.pid)
