"""Issue 36, deliverable 7: a small fuzz test through the real CLI (``trtprof.cli.main``, in-process for
speed). Real result files (a compare JSON, a bench results JSON) are mutated — truncation, type swaps,
null, NaN/±inf/huge numbers, a bigint, deep nesting, a key removed — and ``report`` (and ``plot`` for the
bench file) must answer each with exit 0, or exit 2 and one line: never a traceback. Seeded, so a
failure names the mutation that reproduces it; about a minute on CI's 2 cores."""
from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest

from trtprof.cli import main

SEED = 36
COMPARE_MUTATIONS = 40  # each one report (figures drawn): ~0.5-1 s apiece
BENCH_MUTATIONS = 15
SWAPS: list[Any] = [None, "abc", "<script>x</script>", [], {}, True, -1, 0, 1.5, 10**400, float("nan"), float("inf"),
                    -float("inf"), 1e308, [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]


def _paths(value: Any, prefix: tuple = ()) -> list[tuple]:
    out = [prefix]
    if isinstance(value, dict):
        for k, v in value.items():
            out += _paths(v, prefix + (k,))
    elif isinstance(value, list):
        for i, v in enumerate(value[:3]):  # the first few items: the rest are shaped alike
            out += _paths(v, prefix + (i,))
    return out


def _set(data: Any, path: tuple, value: Any, delete: bool = False) -> Any:
    if not path:
        return value
    parent = data
    for key in path[:-1]:
        parent = parent[key]
    if delete and isinstance(parent, dict):
        del parent[path[-1]]
    else:
        parent[path[-1]] = value
    return data


def _mutants(original: dict, n: int, rng: random.Random) -> list[tuple[str, str]]:
    """(what, file text) pairs: mostly one field changed, some truncations."""
    text = json.dumps(original, allow_nan=True)
    paths = [p for p in _paths(original) if p and "samples_ms" not in p[-2:]]  # not every sample: the fields
    out = []
    for i in range(n):
        if i % 10 == 9:
            cut = rng.randrange(1, len(text))
            out.append((f"truncated at {cut}", text[:cut]))
            continue
        path = rng.choice(paths)
        data = json.loads(text)
        if rng.random() < 0.15:
            _set(data, path, None, delete=True)
            what = f"{'.'.join(map(str, path))} removed"
        else:
            value = rng.choice(SWAPS)
            _set(data, path, value)
            what = f"{'.'.join(map(str, path))} = {str(value)[:40]}"
        out.append((what, json.dumps(data, allow_nan=True)))
    return out


def _run(argv: list[str]) -> tuple[int | None, BaseException | None]:
    try:
        return main(argv), None
    except SystemExit as done:
        return done.code if isinstance(done.code, int) else 2, None
    except BaseException as err:  # noqa: BLE001 - any escape is the bug this test looks for
        return None, err


@pytest.fixture(scope="module")
def real_files(tmp_path_factory) -> dict[str, dict]:
    from trtprof.model.demo import make_demo_model

    tmp = tmp_path_factory.mktemp("fuzz")
    model = make_demo_model(tmp / "convnet.onnx", channels=8, image=16, classes=10)
    assert main(["compare", str(model), "--engines", str(tmp / "e"), "--backend", "onnxruntime", "--in-process",
                 "--batch-sizes", "1", "--time-budget-s", "2", "--round-iterations", "2", "--out",
                 str(tmp / "c.json")]) == 0
    assert main(["bench", str(tmp / "e"), "--warmup", "1", "--iterations", "3", "--out", str(tmp / "r.json")]) == 0
    return {"compare": json.loads((tmp / "c.json").read_text()), "bench": json.loads((tmp / "r.json").read_text())}


@pytest.mark.parametrize("kind,count,commands", [("compare", COMPARE_MUTATIONS, ("report",)),
                                                 ("bench", BENCH_MUTATIONS, ("report", "plot"))])
def test_mutated_results_never_give_a_traceback(kind, count, commands, real_files, tmp_path, capsys):
    rng = random.Random(f"{SEED}-{kind}")
    failures = []
    for i, (what, text) in enumerate(_mutants(real_files[kind], count, rng)):
        src = tmp_path / f"m{i}.json"
        src.write_text(text)
        for command in commands:
            out = ["-o", str(tmp_path / f"m{i}.html")] if command == "report" else ["--out", str(tmp_path / f"p{i}")]
            code, err = _run([command, str(src), *out])
            stderr = capsys.readouterr().err
            lines = [line for line in stderr.splitlines() if line.strip() and not line.startswith("warning")]
            if err is not None or code not in (0, 2) or (code == 2 and len(lines) != 1):
                failures.append(f"{command} with {what}: "
                                + (f"{type(err).__name__}: {err}"[:200] if err is not None else f"rc {code}: {stderr[:200]}"))
    assert not failures, f"{len(failures)} of {count} mutations:\n" + "\n".join(failures)
