"""Issue 36, deliverable 9: the fuzz test extended to sweep specs and trtexec exports, through the real CLI
(``trtprof.cli.main`` in-process). Real files — a sweep spec (YAML) and trtexec's --exportTimes,
--exportProfile and --exportLayerInfo of a ResNet-50 (tests/data/trtexec) — are mutated: one field
swapped for null / a string / markup / a bool / a bigint / NaN / ±inf / 1e308 / deep nesting, a key
removed, truncated, a byte flipped. Each must be exit 0, or exit 2 with one line: never a traceback.
A spec that is accepted stops before any cell runs (``run_sweep`` replaced by a fake that says so).
Seeded: a failure names the mutation that reproduces it. ~20 s on CI's 2 cores."""
from __future__ import annotations

import gzip
import json
import random
from pathlib import Path
from typing import Any

import pytest

from .test_fuzz_results import SWAPS, _paths, _run, _set

SEED = 36
SPEC_MUTATIONS = 60
EXPORT_MUTATIONS = {"times": 40, "profile": 25, "layer_info": 25}
DATA = Path(__file__).parent.parent / "data" / "trtexec"
FILES = {"times": "resnet50-rtx3090-fp16.timing.json.gz", "profile": "resnet50-rtx3090-fp16.profile.json.gz",
         "layer_info": "resnet50-rtx3090-fp16.graph.json.gz"}


class SpecAccepted(Exception):
    """Raised by the fake ``run_sweep``: the spec passed every check, the sweep would start here."""


def _mutate(original: Any, n: int, rng: random.Random, dump) -> list[tuple[str, str]]:
    """(what, text): one field swapped or removed; every 8th a truncation, every 8th+1 a flipped byte."""
    text = dump(original)
    paths = [p for p in _paths(original) if p]
    out = []
    for i in range(n):
        if i % 8 == 7:
            cut = rng.randrange(1, len(text))
            out.append((f"truncated at {cut}", text[:cut]))
            continue
        if i % 8 == 6:
            at = rng.randrange(len(text))
            flipped = chr(ord(text[at]) ^ (1 << rng.randrange(7)))
            out.append((f"byte {at} flipped", text[:at] + flipped + text[at + 1:]))
            continue
        path = rng.choice(paths)
        data = json.loads(json.dumps(original))
        if rng.random() < 0.15 and isinstance(_parent(data, path), dict):
            _set(data, path, None, delete=True)
            what = f"{'.'.join(map(str, path))} removed"
        else:
            value = rng.choice(SWAPS)
            _set(data, path, value)
            what = f"{'.'.join(map(str, path))} = {str(value)[:40]}"
        out.append((what, dump(data)))
    return out


def _parent(data: Any, path: tuple) -> Any:
    for key in path[:-1]:
        data = data[key]
    return data


def _check(argv: list[str], what: str, capsys, failures: list[str], accepted: tuple[type, ...] = ()) -> None:
    code, err = _run(argv)
    stderr = capsys.readouterr().err
    if err is not None and isinstance(err, accepted):
        return
    lines = [line for line in stderr.splitlines() if line.strip() and not line.lower().startswith("warning")]
    if err is not None or code not in (0, 2) or (code == 2 and len(lines) != 1):
        failures.append(f"{argv[0]} with {what}: "
                        + (f"{type(err).__name__}: {err}"[:200] if err is not None else f"rc {code}: {stderr[:200]}"))


def test_mutated_specs_never_give_a_traceback(conv_model, tmp_path, capsys, monkeypatch):
    import yaml  # type: ignore[import-untyped]

    def accepted(*_args, **_kwargs):
        raise SpecAccepted

    monkeypatch.setattr("trtprof.sweep.runner.run_sweep", accepted)
    spec = {"sweep": {"kind": "compare", "precisions": ["fp32", "fp16"], "batch_sizes": [1, 4],
                      "time_budget_s": 2, "round_iterations": 2, "engines": str(tmp_path / "e")},
            "models": [{"path": str(conv_model), "backend": "onnxruntime", "batch_sizes": [1],
                        "shape": ["input:1x3x16x16"]}]}

    def dump(data: Any) -> str:
        try:
            return yaml.safe_dump(data)
        except (yaml.YAMLError, RecursionError):  # what PyYAML cannot write is a truncation's job
            return json.dumps(data, allow_nan=True)

    failures: list[str] = []
    rng = random.Random(f"{SEED}-spec")
    for i, (what, text) in enumerate(_mutate(spec, SPEC_MUTATIONS, rng, dump)):
        path = tmp_path / f"s{i}.yaml"
        path.write_text(text)
        _check(["sweep", str(path), "--out", str(tmp_path / f"out{i}")], what, capsys, failures, (SpecAccepted,))
    assert not failures, f"{len(failures)} of {SPEC_MUTATIONS} spec mutations:\n" + "\n".join(failures)


@pytest.mark.parametrize("kind", sorted(EXPORT_MUTATIONS))
def test_mutated_trtexec_exports_never_give_a_traceback(kind, tmp_path, capsys):
    originals = {k: json.loads(gzip.decompress((DATA / name).read_bytes())) for k, name in FILES.items()}
    for k, data in originals.items():
        (tmp_path / f"{k}.json").write_text(json.dumps(data))
    options = {"times": "--times", "profile": "--profile", "layer_info": "--layer-info"}
    original = originals[kind]
    if kind == "times":
        original = original[:30]  # the iterations are shaped alike: 30 keep each mutation fast
    failures: list[str] = []
    rng = random.Random(f"{SEED}-{kind}")
    count = EXPORT_MUTATIONS[kind]
    for i, (what, text) in enumerate(_mutate(original, count, rng, lambda d: json.dumps(d, allow_nan=True))):
        mutated = tmp_path / f"m{i}.json"
        mutated.write_text(text)
        files = {k: str(tmp_path / f"{k}.json") for k in FILES} | {kind: str(mutated)}
        argv = ["import", "trtexec", *[a for k in FILES for a in (options[k], files[k])], "--precision", "fp16",
                "--batch-size", "32", "--out", str(tmp_path / f"r{i}.json")]
        _check(argv, f"{kind}: {what}", capsys, failures)
        if (tmp_path / f"r{i}.json").exists():  # what import accepted, report and plot must take too
            _check(["report", str(tmp_path / f"r{i}.json"), "-o", str(tmp_path / f"r{i}.html")],
                   f"{kind}: {what} (report)", capsys, failures)
    assert not failures, f"{len(failures)} of {count} {kind} mutations:\n" + "\n".join(failures)
