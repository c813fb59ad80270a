"""The backend contract from outside (issue 41): a backend defined in tests/ (tests/fakes/plugin_backend.py),
registered through the ``trtprof.backends`` entry point of a distribution made here (a .dist-info folder on
PYTHONPATH, as pip would install it), runs build, bench, compare and profile through the real CLI with no
module of trtprof changed; ``--backend``'s help lists it."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
NAME = "numpy-reference"


@pytest.fixture
def plugin_env(tmp_path: Path) -> dict[str, str]:
    dist = tmp_path / "site" / "trtprof_numpy_reference-0.1.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: trtprof-numpy-reference\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text(
        f"[trtprof.backends]\n{NAME} = tests.fakes.plugin_backend:PluginBackend\n")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(tmp_path / "site"), str(REPO), env.get("PYTHONPATH", "")])
    return env


def cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "trtprof", *args], capture_output=True, text=True, env=env,
                          timeout=600)


def test_a_plugin_backend_runs_every_command(plugin_env, conv_model, tmp_path):
    engines = tmp_path / "engines"
    help_text = cli(plugin_env, "build", "--help").stdout
    assert NAME in help_text.replace("\n", "").replace(" ", "")
    build = cli(plugin_env, "build", "--backend", NAME, "--fp32", "--fp16", "--engines", str(engines), str(conv_model))
    assert build.returncode == 0, build.stderr
    built = sorted(p.name for p in engines.glob(f"*.{NAME}.*.onnx"))
    assert len(built) == 2, built
    bench = cli(plugin_env, "bench", str(engines), "--batch-sizes", "1,2", "--iterations", "5", "--warmup", "1",
                "--out", str(tmp_path / "bench.json"))
    assert bench.returncode == 0, bench.stderr
    results = json.loads((tmp_path / "bench.json").read_text())["results"]
    assert {r["backend"] for r in results} == {NAME} and len(results) == 4
    assert all(r["config"]["clock"] == "perf_counter_ns" for r in results)  # its capabilities: a host runtime
    compare = cli(plugin_env, "compare", str(conv_model), "--backend", NAME, "--engines", str(engines),
                  "--precisions", "fp32,fp16", "--batch-sizes", "2", "--time-budget-s", "4", "--min-loads", "2",
                  "--out", str(tmp_path / "compare.json"))
    assert compare.returncode == 0, compare.stderr
    saved = json.loads((tmp_path / "compare.json").read_text())
    assert saved["comparisons"][0]["verdict"] in {"faster", "slower", "equivalent", "inconclusive"}
    assert {r["backend"] for r in saved["results"]} == {NAME}
    profile = cli(plugin_env, "profile", str(conv_model), "--backend", NAME, "--engines", str(engines),
                  "--precisions", "fp32,fp16", "--batch-size", "1", "--out", str(tmp_path / "profile.json"))
    assert profile.returncode == 0, profile.stderr
    assert "Conv" in (tmp_path / "profile.json").read_text()


def test_without_the_entry_point_the_name_is_unknown_in_one_line(conv_model, tmp_path):
    env = dict(os.environ)
    proc = cli(env, "build", "--backend", NAME, "--fp32", "--engines", str(tmp_path / "e"), str(conv_model))
    assert proc.returncode == 2 and f"unknown backend '{NAME}'" in proc.stderr
    assert "Traceback" not in proc.stderr and not (tmp_path / "e").exists()
