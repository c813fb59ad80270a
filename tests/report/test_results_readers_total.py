"""Issue 45, deliverable 7, the named cases of round 5's fuzzer: a results file (bench) or compare file
with an integer beyond a float's range (``artifact_bytes``, ``ci_high``, ``rtol``, ``rss_bytes``,
``span_s``), a key given twice turning ``environment`` into a string or ``settings`` into null,
``gpus: -1``, a float validity flag or stamp — each through ``report`` and ``plot``: exit 0, or exit 2
and one line naming the file; never a traceback. The 600-mutation fuzz is tests/report/test_fuzz_results.py."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

import pytest

from trtprof.cli import main

from ..cli.test_user_errors import run_main

BIG = "1" + "0" * 400  # an integer literal beyond a float's range


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, str]:
    from trtprof.model.demo import make_demo_model

    tmp = tmp_path_factory.mktemp("readers")
    model = make_demo_model(tmp / "convnet.onnx", channels=4, image=8, classes=4)
    assert main(["compare", str(model), "--engines", str(tmp / "e"), "--backend", "onnxruntime", "--in-process",
                 "--batch-sizes", "1", "--time-budget-s", "1", "--round-iterations", "2", "--out",
                 str(tmp / "c.json")]) == 0
    assert main(["bench", str(tmp / "e"), "--warmup", "1", "--iterations", "3", "--out", str(tmp / "r.json")]) == 0
    return {"compare": (tmp / "c.json").read_text(), "bench": (tmp / "r.json").read_text()}


def _edit(text: str, change: Callable[[dict], Any]) -> str:
    data = json.loads(text)
    change(data)
    return json.dumps(data)


def _big_at(*path: Any) -> Callable[[str], str]:
    """The file with the number at ``path`` written as a 401-digit integer."""
    def make(text: str) -> str:
        data = json.loads(text)
        parent = data
        for key in path[:-1]:
            parent = parent.setdefault(key, {}) if isinstance(key, str) else parent[key]
        parent[path[-1]] = "BIGNUMBER"
        return json.dumps(data).replace('"BIGNUMBER"', BIG)
    return make


def _duplicate(key: str, value: str) -> Callable[[str], str]:
    """The top-level object with ``key`` given a second time, last (JSON keeps the last)."""
    return lambda text: text.rstrip()[:-1] + f', "{key}": {value}}}'


CASES: dict[str, tuple[str, Callable[[str], str], str | None]] = {
    # name: (file, mutation, the refusal's words; None where rendering it is fine)
    "artifact_bytes 10**400": ("bench", _big_at("results", 0, "engine", "artifact_bytes"), "beyond the range of a float"),
    "rss_bytes 10**400": ("bench", _big_at("results", 0, "memory", "rss_bytes"), "beyond the range of a float"),
    "ci_high 10**400": ("compare", _big_at("comparisons", 0, "ci_high"), "beyond the range of a float"),
    "rtol 10**400": ("compare", _big_at("settings", "rtol"), "beyond the range of a float"),
    "span_s 10**400": ("bench", _big_at("results", 0, "span_s"), "beyond the range of a float"),
    "environment twice, then a string": ("bench", _duplicate("environment", '"x"'), "'environment' appears twice"),
    "settings twice, then null": ("compare", _duplicate("settings", "null"), "'settings' appears twice"),
    "settings null": ("compare", lambda t: _edit(t, lambda d: d.__setitem__("settings", None)), "settings"),
    "gpus -1 (bench)": ("bench", lambda t: _edit(t, lambda d: d["environment"].__setitem__("gpus", -1)),
                        "environment.gpus"),
    "gpus -1 (compare)": ("compare", lambda t: _edit(t, lambda d: d["environment"].__setitem__("gpus", -1)),
                          "environment.gpus"),
    "validity.valid 1.5": ("compare", lambda t: _edit(t, lambda d: d["validity"].__setitem__("valid", 1.5)),
                           "validity.valid"),
    "results[0].validity.stamp 0.5": (
        "bench", lambda t: _edit(t, lambda d: d["results"][0]["validity"].__setitem__("stamp", 0.5)),
        "results[0].validity.stamp"),
    "a 10**6-character string in a string field": (
        "compare", lambda t: _edit(t, lambda d: d.__setitem__("model", "m" * 10**6)), None),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_damaged_results_file_is_rendered_or_one_line(name, files, tmp_path, capsys):
    kind, mutate, refusal = CASES[name]
    src = tmp_path / "damaged.json"
    src.write_text(mutate(files[kind]))
    for command, out in (("report", ["-o", str(tmp_path / "p.html")]), ("plot", ["--out", str(tmp_path / "plots")])):
        code, _, err = run_main(capsys, command, str(src), *out)
        lines = [line for line in err.splitlines() if line.strip() and not line.startswith("warning")]
        assert "Traceback" not in err and code in (0, 2), (command, code, err)
        if code == 2:
            assert len(lines) == 1 and str(src) in lines[0], (command, err)
        every_reader = refusal is not None and ("beyond" in refusal or "twice" in refusal)  # util.datafile's
        if refusal is not None and (command == "report" or (kind == "bench" and every_reader)):
            assert code == 2 and refusal in lines[0], (command, err)


def test_strict_json_keeps_what_trtprof_writes():
    """Just inside: the largest integer a float holds, NaN/Infinity, and the same key in two objects."""
    from trtprof.util.datafile import strict_json

    text = '{"a": %d, "b": [NaN, Infinity], "c": {"a": 1}, "d": {"a": 2}}' % int(1.7976931348623157e308)
    assert strict_json(text)["c"] == {"a": 1}
    with pytest.raises(ValueError, match="beyond the range of a float"):
        strict_json('{"a": %d}' % (int(1.7976931348623157e308) + 10**292))  # just outside
    with pytest.raises(ValueError, match="'a' appears twice"):
        strict_json('{"a": 1, "b": 2, "a": 3}')


def test_a_results_file_twice_keyed_is_named_in_one_line(files, tmp_path, capsys):
    src = Path(tmp_path / "r.json")
    src.write_text(_duplicate("results", "[]")(files["bench"]))
    code, _, err = run_main(capsys, "plot", str(src), "--out", str(tmp_path / "p"))
    assert code == 2 and f"{src}: results file: key 'results' appears twice" in err, err
