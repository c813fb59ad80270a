"""benchmarks/README.md is the catalogue of the measured claims (issue 41 #6): every script in benchmarks/
has its row there, every result it names exists, every run kept in benchmarks/results/ is named there,
and every result file README.md and docs/ cite exists in the tree (a result gzipped or removed without
its citation following is a dangling reference)."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BENCH = REPO / "benchmarks"
RESULTS = BENCH / "results"
CATALOGUE = BENCH / "README.md"
DOCS = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]

# a cited result: benchmarks/results/PATH anywhere, `results/PATH` in a code span, or a code span that starts with
# a run's name (SCRIPT[-DEVICE]-YYYY-MM-DD…, as the docs cite runs beside one already named)
CITED = re.compile(r"(?:benchmarks/results/|`results/|`(?=[A-Za-z0-9_]+-[^`\s]*20\d\d-\d\d-\d\d))([^`\s)\]]*)")
RUN_SUFFIXES = re.compile(r"(\.(json|txt|md|log|csv|tgz|gz))+$")


def cited_results(text: str) -> list[str]:
    """The results paths a page cites, relative to benchmarks/results (elided "…-v2*.txt" and the
    DATE / DEVICE / PATH placeholders left out: they name no file)."""
    paths = []
    for m in CITED.finditer(text):
        path = m.group(1).rstrip(".,;:")
        if path and not any(word in path for word in ("…", "DATE", "DEVICE", "PATH")):
            paths.append(path)
    return paths


def blocks(text: str) -> list[str]:
    """The page's paragraphs, list items and table rows, each one string."""
    out: list[list[str]] = []
    for line in text.splitlines():
        if not out or not line.strip() or line.startswith(("- ", "|", "#")) or not out[-1]:
            out.append([])
        if line.strip():
            out[-1].append(line)
    return ["\n".join(b) for b in out if b]


def catalogue_parts() -> tuple[str, str]:
    """(the catalogue without its list of what left the tree, that list): the runs named as out of the
    tree are the ones that must not be in it."""
    parts = blocks(CATALOGUE.read_text())
    gone = [b for b in parts if "out of the tree" in b]
    assert len(gone) == 1, gone
    return "\n".join(b for b in parts if b not in gone), gone[0]


def exists(path: str) -> bool:
    """A file or folder under benchmarks/results; a glob (``demo_time_cpu-*``, ``timeline_cost-….*``) must
    match at least one."""
    if "*" in path:
        return any(RESULTS.glob(path.rstrip("/")))
    return (RESULTS / path).exists() and (not path.endswith("/") or (RESULTS / path).is_dir())


def scripts() -> list[str]:
    return sorted(p.name for p in BENCH.iterdir() if p.is_file() and p.suffix in (".py", ".sh"))


def test_there_is_a_catalogue_of_scripts_and_results():
    assert len(scripts()) >= 30, scripts()
    assert len(cited_results(CATALOGUE.read_text())) >= 60


@pytest.mark.parametrize("script", scripts())
def test_every_script_has_its_row(script):
    """Each script is named in the catalogue's tables (a row of its own or in a row's script column)."""
    rows = [line for line in CATALOGUE.read_text().splitlines() if line.startswith("|")]
    assert any(re.search(rf"(?<![\w./-]){re.escape(script)}(?![\w.-])", row) for row in rows), \
        f"benchmarks/{script} has no row in benchmarks/README.md"


def test_every_script_the_catalogue_names_exists():
    """A script renamed or removed takes its name out of the catalogue (its former names stay in the
    renaming line only, as `old` → `new`)."""
    text = CATALOGUE.read_text()
    renamed = set(re.findall(r"`([\w.-]+\.(?:py|sh))` →", text))
    named = set(re.findall(r"`([\w-]+\.(?:py|sh))", text))
    missing = sorted(name for name in named - renamed if not (BENCH / name).is_file())
    assert not missing, f"benchmarks/README.md names scripts that are not in benchmarks/: {missing}"
    assert renamed and all(not (BENCH / name).exists() for name in renamed)


def test_every_result_the_catalogue_names_exists():
    kept, _ = catalogue_parts()
    missing = [p for p in cited_results(kept) if not exists(p)]
    assert not missing, f"benchmarks/README.md names results that are not in the tree: {missing}"


def test_what_the_catalogue_says_left_the_tree_is_gone():
    _, gone = catalogue_parts()
    named = cited_results(gone)
    assert len(named) >= 3, named
    still = [p for p in named if any(RESULTS.glob(p.rstrip("/") + "*"))]
    assert not still, f"benchmarks/README.md says these left the tree, but they are in it: {still}"


def test_every_run_kept_is_in_the_catalogue():
    """Each file or folder at the top of benchmarks/results is named there (by its run: the name without
    .json/.txt/.md/.log/.gz), so a result added without its row, or a row's run removed, fails here."""
    text = CATALOGUE.read_text()
    unnamed = []
    for entry in sorted(RESULTS.iterdir()):
        run = RUN_SUFFIXES.sub("", entry.name)
        if not re.search(rf"results/{re.escape(run)}(?=[./`) ]|$)", text, re.M):
            unnamed.append(entry.name)
    assert not unnamed, f"results not in benchmarks/README.md: {unnamed}"


@pytest.mark.parametrize("page", DOCS, ids=lambda p: str(p.relative_to(REPO)))
def test_every_result_the_docs_cite_exists(page):
    missing = [p for p in cited_results(page.read_text()) if not exists(p)]
    assert not missing, f"{page.relative_to(REPO)} cites results that are not in the tree: {missing}"


def test_the_citation_check_sees_a_dangling_reference(tmp_path):
    """The reader of citations is not blind: a gzipped file cited by its old name, a removed folder and a
    glob that matches nothing are each found missing; elisions and placeholders are not citations."""
    text = ("see `benchmarks/results/fp16_survey-2026-11-30.json` and (`results/gpu_timeline-H200-2026-12-01-first/`), "
            "`power_cpu-2026-12-01-v9*.txt`, `…-v2*.txt`, `benchmarks/results/fp16_survey-DATE.json`, "
            "`results/gpu_why-2026-11-30/run3/` and benchmarks/results/demo_time_cpu-*")
    found = cited_results(text)
    assert found == ["fp16_survey-2026-11-30.json", "gpu_timeline-H200-2026-12-01-first/", "power_cpu-2026-12-01-v9*.txt",
                     "gpu_why-2026-11-30/run3/", "demo_time_cpu-*"]
    assert [exists(p) for p in found] == [False, False, False, True, True]
