"""README's demo time is what the committed measurements say, with their load (issue 34, deliverable 6).

Each ``benchmarks/results/demo_time_cpu-*.txt`` (written by ``benchmarks/demo_time.sh``) gives its runs'
range "min-max s" and the load average around them; README must quote every file's range, so a new
measurement that README does not cite (or a README figure edited by hand) fails here."""
from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
RUN = re.compile(r"^run \d+: (?P<s>[\d.]+) s; load average \(1 min\) (?P<before>[\d.]+) before, (?P<after>[\d.]+) after$")


def measured(path: Path) -> tuple[float, float, float, float]:
    """(fastest s, slowest s, lowest load, highest load) of one file's runs."""
    runs = [m for m in (RUN.match(line) for line in path.read_text().splitlines()) if m]
    assert runs, f"{path.name}: no runs"
    secs = [float(m["s"]) for m in runs]
    loads = [float(m[k]) for m in runs for k in ("before", "after")]
    return min(secs), max(secs), min(loads), max(loads)


def test_readme_quotes_every_committed_demo_time_with_its_load():
    readme = " ".join((REPO / "README.md").read_text().split())
    files = sorted((REPO / "benchmarks" / "results").glob("demo_time_cpu-*.txt"))
    assert files
    for path in files:
        fast, slow, low, high = measured(path)
        assert f"{fast:.1f}-{slow:.1f} s at load average" in readme, path.name
        said = re.search(rf"{fast:.1f}-{slow:.1f} s at load average (?P<a>[\d.]+)(?:-(?P<b>[\d.]+))?", readme)
        assert said is not None
        a, b = float(said["a"]), float(said["b"] or said["a"])
        assert int(low) <= a and b <= high + 1, (path.name, low, high, said.group(0))  # the load it ran at


def test_the_run_line_parser_reads_what_demo_time_writes(tmp_path):
    f = tmp_path / "demo_time_cpu-x.txt"
    f.write_text("# header\nrun 1: 16.1 s; load average (1 min) 6.86 before, 6.57 after\n"
                 "run 2: 11.8 s; load average (1 min) 6.57 before, 6.33 after\n")
    assert measured(f) == (11.8, 16.1, 6.33, 6.86)
