"""The README is a map and docs/ holds the pages: the map stays short, every link in it and in the pages
leads somewhere that exists, every page is reachable from the map, every command shown parses with
today's CLI, and the Quickstart's test command is the one CI runs."""
from __future__ import annotations

import argparse
import re
import shlex
from pathlib import Path

import pytest

from trtprof.cli import make_parser

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
README_MAX_LINES = 200  # issue 26: the README is a map of at most 200 lines; the rest lives in docs/

LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
PLACEHOLDER = re.compile(r"^[\[(]?[A-Z][A-Z0-9_]*[.A-Za-z0-9]*[\])]?$")  # MODEL, PATH, RESULTS.json, [SPEC]


def markdown_files() -> list[Path]:
    return [README, *sorted(DOCS.glob("*.md"))]


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[`*_]", "", heading.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    text = re.sub(r"```.*?```", "", path.read_text(), flags=re.S)
    return {slug(m.group(1)) for m in re.finditer(r"^#{1,6} (.+)$", text, flags=re.M)}


def relative_links(path: Path) -> list[str]:
    text = re.sub(r"```.*?```", "", path.read_text(), flags=re.S)
    return [t for t in LINK.findall(text) if not re.match(r"[a-z]+://|mailto:", t)]


def check_readme_length(text: str, limit: int = README_MAX_LINES) -> None:
    lines = text.count("\n") + (0 if text.endswith("\n") else 1)
    if lines > limit:
        raise AssertionError(f"README.md has {lines} lines, more than {limit}: move detail into docs/")


def test_readme_is_a_map_of_at_most_200_lines():
    check_readme_length(README.read_text())


@pytest.mark.parametrize("lines,ok", [(200, True), (201, False)])
def test_the_length_check_itself_at_its_edge(lines, ok):
    text = "x\n" * lines
    if ok:
        check_readme_length(text)
    else:
        with pytest.raises(AssertionError, match=f"{lines} lines"):
            check_readme_length(text)


@pytest.mark.parametrize("path", markdown_files(), ids=lambda p: p.name)
def test_every_relative_link_and_anchor_exists(path):
    broken = []
    for target in relative_links(path):
        file_part, _, anchor = target.partition("#")
        dest = (path.parent / file_part).resolve() if file_part else path
        if not dest.exists():
            broken.append(f"{target} (no such file)")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            broken.append(f"{target} (no heading #{anchor} in {dest.name})")
    assert not broken, f"{path.name}: broken links: {broken}"


def test_readme_links_pages_under_docs_and_every_page_is_on_the_map():
    linked = {(ROOT / t.partition("#")[0]).resolve() for t in relative_links(README) if t.startswith("docs/")}
    assert linked, "README.md links no page under docs/"
    pages = {p.resolve() for p in DOCS.glob("*.md")}
    assert pages - linked == set(), f"pages under docs/ not linked from README.md: {sorted(pages - linked)}"


def test_slug_follows_githubs_rule():
    assert slug("Autotuning (torch)") == "autotuning-torch"
    assert slug("The report's model") == "the-reports-model"
    assert slug("`trtprof cache ls`") == "trtprof-cache-ls"


def shown_commands(path: Path) -> list[str]:
    """`trtprof …` lines in fenced or indented code blocks, continuations joined, comments dropped;
    synopsis lines (MODEL, [options], a|b, …) are not runnable examples and are left out."""
    out, in_fence = [], False
    lines = path.read_text().splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.lstrip().startswith("```"):
            in_fence = not in_fence
            i += 1
            continue
        code = in_fence or line.startswith("    ")
        while code and line.rstrip().endswith("\\") and i + 1 < len(lines):
            i += 1
            line = line.rstrip()[:-1] + " " + lines[i].strip()
        i += 1
        if not code:
            continue
        for piece in line.split("&&"):
            piece = re.sub(r"\s#\s.*$", "", piece).strip()
            piece = re.sub(r"^(\S*/)?trtprof\b", "trtprof", piece)
            if not piece.startswith("trtprof ") and piece != "trtprof":
                continue
            if "…" in piece or "[options]" in piece or "|" in piece:
                continue
            argv = shlex.split(piece)[1:]
            if any(PLACEHOLDER.match(a) for a in argv):
                continue
            out.append(" ".join(a.strip("[]") for a in argv))
    return out


def all_shown_commands() -> list[tuple[str, str]]:
    return [(p.name, c) for p in markdown_files() for c in shown_commands(p)]


def test_docs_show_commands_at_all():
    names = {name for name, _ in all_shown_commands()}
    assert {"README.md", "compare.md", "bench.md", "sweep.md"} <= names


@pytest.mark.parametrize("where,command", all_shown_commands(), ids=lambda v: str(v)[:60])
def test_every_command_shown_parses_with_todays_cli(where, command):
    parser = make_parser()
    argv = shlex.split(command)
    try:
        args = parser.parse_args(argv)
    except SystemExit as err:
        pytest.fail(f"{where}: `trtprof {command}` does not parse (exit {err.code})")
    assert isinstance(args, argparse.Namespace) and args.command == argv[0]


def test_a_stale_option_is_caught_by_the_command_check(tmp_path, capsys):
    page = tmp_path / "page.md"
    page.write_text("    trtprof compare model.onnx --no-such-option\n")
    (command,) = shown_commands(page)
    with pytest.raises(SystemExit):
        make_parser().parse_args(shlex.split(command))
    assert "--no-such-option" in capsys.readouterr().err


def test_every_subcommand_is_on_the_map():
    sub = next(a for a in make_parser()._actions if isinstance(a, argparse._SubParsersAction))
    text = README.read_text()
    missing = [name for name in sub.choices if f"`trtprof {name}" not in text]
    assert not missing, f"README.md does not say where these commands are documented: {missing}"


def test_quickstart_test_command_is_the_one_ci_runs():
    """.ci/run runs the README's test command verbatim; the two must not drift apart."""
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    marker = next(i for i, line in enumerate(ci) if "keep in sync with README.md" in line)
    command = ci[marker + 1].strip()
    assert command.startswith("python3 -m venv .venv && ")
    quickstart = README.read_text().split("<!-- section:quickstart -->")[1].split("<!-- /section:quickstart -->")[0]
    assert command in quickstart.splitlines()


def test_ci_runs_the_suite_without_torch_with_the_readme_extras():
    """.ci/run's torch-less venv installs exactly the extras of the README's test command, then runs the suite."""
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    marker = next(i for i, line in enumerate(ci) if "keep in sync with README.md" in line)
    readme_extras = re.search(r"pip install -q -e '([^']+)'", ci[marker + 1]).group(1)
    installs = [line for line in ci if line.startswith(".venv-notorch/bin/pip install")]
    assert installs == [f".venv-notorch/bin/pip install -q -e '{readme_extras}'"]
    assert ".venv-notorch/bin/python -m pytest -ra -p no:cacheprovider" in ci
    assert ".venv-notorch/" in (ROOT / ".gitignore").read_text().splitlines()


def test_the_sweep_spec_shown_in_the_docs_loads(tmp_path):
    from trtprof.sweep.spec import load_spec

    toml = re.search(r"```toml\n(.*?)```", (DOCS / "sweep.md").read_text(), flags=re.S).group(1)
    spec_path = tmp_path / "sweep.toml"
    spec_path.write_text(toml)
    from trtprof.model.demo import make_demo_model

    for name in ("resnet50.onnx", "conv_elu.onnx"):  # readable models: the spec checks each before any cell
        make_demo_model(tmp_path / name, channels=4, image=8, classes=3)
    spec = load_spec(spec_path)
    assert [Path(m.path).name for m in spec.models] == ["resnet50.onnx", "conv_elu.onnx"]
    assert spec.models[1].batch_sizes == (1, 256) and spec.models[0].precisions == ("fp32", "tf32", "fp16")
