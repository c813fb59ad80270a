"""A result file compressed with gzip (``results.json.gz``) reads as the JSON it holds, through the one
reader every command uses (``util.datafile.load_json``): ``report``, ``plot``, ``import trtexec`` and
``compare`` on imported runs give what they give for the plain file; a damaged gzip is exit 2 and one
line naming the file (issue 41 #6: the committed benchmark results are kept as ``.json.gz``)."""
from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from trtprof.cli import main
from trtprof.errors import BadInput
from trtprof.measure.results import ResultSet, read_json
from trtprof.util.datafile import load_json

from .test_report import synthetic_compare_json, synthetic_result
from ..cli.test_user_errors import assert_one_line, run_main

pytest.importorskip("matplotlib")

REPO = Path(__file__).resolve().parents[2]
# a compare file written on the H200 (kept gzipped in the tree since issue 41; either form is taken)
COMMITTED = sorted((REPO / "benchmarks" / "results" / "gpu_precisions-2026-12-01").glob("compare-mlp_fp8.json*"))


def gzipped(path: Path, name: str | None = None) -> Path:
    out = path.with_name(name or path.name + ".gz")
    out.write_bytes(gzip.compress(path.read_bytes()))
    return out


def plain(path: Path, dest: Path) -> Path:
    """``path``'s JSON as a plain file at ``dest`` (decompressed when ``path`` is gzip)."""
    data = path.read_bytes()
    dest.write_bytes(gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data)
    return dest


def report(capsys, src: Path, out: Path) -> tuple[str, str]:
    """``trtprof report`` through the CLI: (the HTML page, the Markdown summary without its last line,
    which names the page)."""
    code, printed, err = run_main(capsys, "report", str(src), "-o", str(out))
    assert code == 0, err
    lines = printed.splitlines()
    assert lines[-1] == f"report: {out}"
    return out.read_text(), "\n".join(lines[:-1])


def keyed_compare_json(tmp_path: Path) -> Path:
    """test_report's synthetic compare file with an engine key on each result, as compare writes them
    (an engine without a key is labelled by its object's id() on the page: a page that differs from
    run to run whatever file it is read from)."""
    src = synthetic_compare_json(tmp_path)
    data = json.loads(src.read_text())
    for r in data["results"]:
        r["engine"]["key"] = f"engine-{r['precision']}"
    src.write_text(json.dumps(data))
    return src


def test_report_renders_a_compare_json_and_its_gz_identically(tmp_path, capsys):
    src = keyed_compare_json(tmp_path)
    page, md = report(capsys, src, tmp_path / "plain.html")
    page_gz, md_gz = report(capsys, gzipped(src), tmp_path / "gz.html")
    assert page_gz == page and md_gz == md
    assert "| batch |" in md and "fp16" in page


def test_report_renders_a_committed_h200_compare_file_and_its_gz_identically(tmp_path, capsys):
    assert COMMITTED, "benchmarks/results/gpu_precisions-2026-12-01/compare-mlp_fp8.json(.gz) is gone"
    src = plain(COMMITTED[0], tmp_path / "compare.json")
    page, md = report(capsys, src, tmp_path / "plain.html")
    page_gz, md_gz = report(capsys, gzipped(src), tmp_path / "gz.html")
    assert page_gz == page and md_gz == md
    assert report(capsys, COMMITTED[0], tmp_path / "committed.html") == (page, md)  # the tree's file as it is
    assert json.loads(src.read_text())["model"] in page


def test_a_gzip_file_is_read_by_its_bytes_whatever_its_name(tmp_path):
    src = synthetic_compare_json(tmp_path)
    hidden = gzipped(src, "compare-copy.json")  # gzip inside, .json outside
    assert hidden.read_bytes()[:2] == b"\x1f\x8b"
    assert read_json(hidden) == read_json(src)


def test_plot_draws_the_same_figures_from_a_json_gz(tmp_path, capsys):
    results = tmp_path / "results.json"
    ResultSet(environment={}, results=[synthetic_result(p, b, b * m, seed=b)
                                       for p, m in (("fp32", 1.0), ("fp16", 0.6)) for b in (1, 4)]).write_json(results)
    code, printed, err = run_main(capsys, "plot", str(results), "--out", str(tmp_path / "plain"))
    assert code == 0, err
    code, printed_gz, err = run_main(capsys, "plot", str(gzipped(results)), "--out", str(tmp_path / "gz"))
    assert code == 0, err
    names = sorted(p.name for p in (tmp_path / "plain").iterdir())
    assert names and names == sorted(p.name for p in (tmp_path / "gz").iterdir())
    assert printed_gz == printed.replace(str(tmp_path / "plain"), str(tmp_path / "gz"))
    assert ResultSet.read(tmp_path / "results.json.gz").to_json() == ResultSet.read(results).to_json()


@pytest.mark.parametrize("command", ["report", "plot"])
@pytest.mark.parametrize("content", [b"\x1f\x8b\x08\x00garbage", b"not gzip at all", b""], ids=["bad-stream", "no-magic", "empty"])
def test_a_damaged_gz_is_one_line_naming_the_file(tmp_path, capsys, command, content):
    bad = tmp_path / "results.json.gz"
    bad.write_bytes(content)
    out = ["-o", str(tmp_path / "r.html")] if command == "report" else ["--out", str(tmp_path / "plots")]
    code, _, err = run_main(capsys, command, str(bad), *out)
    assert_one_line(code, err, str(bad), "not valid gzip data")


def test_a_truncated_gz_is_one_line_naming_the_file(tmp_path, capsys):
    src = gzipped(synthetic_compare_json(tmp_path))
    src.write_bytes(src.read_bytes()[:-20])  # the stream cut short: no end-of-stream marker, no CRC
    code, _, err = run_main(capsys, "report", str(src), "-o", str(tmp_path / "r.html"))
    assert_one_line(code, err, str(src), "not valid gzip data")
    assert not (tmp_path / "r.html").exists()


def test_the_size_limit_bounds_the_decompressed_text(tmp_path):
    """A small .gz of a large text (a gzip bomb) is refused at the limit, not read whole."""
    bomb = tmp_path / "bomb.json.gz"
    bomb.write_bytes(gzip.compress(b"[" + b"0," * 500_000 + b"0]"))
    assert bomb.stat().st_size < 10_000
    with pytest.raises(BadInput, match="decompresses to more than the 100000-byte limit"):
        load_json(bomb, "results file", limit=100_000)
    assert len(load_json(bomb, "results file")) == 500_001


def test_gzip_text_that_is_not_json_or_not_utf8_is_one_line(tmp_path, capsys):
    for content, needle in ((b'{"schema": ', "not valid JSON"), (b"\xff\xfe{}", "not UTF-8")):
        bad = tmp_path / "x.json.gz"
        bad.write_bytes(gzip.compress(content))
        code, _, err = run_main(capsys, "report", str(bad), "-o", str(tmp_path / "r.html"))
        assert_one_line(code, err, str(bad), needle)


def test_import_trtexec_reads_the_committed_gz_exports_as_they_are(tmp_path, capsys):
    """``import trtexec`` on trtexec's exports kept compressed (tests/data/trtexec/*.json.gz) gives the
    results it gives on the same exports decompressed; ``compare`` then reads those results as .json.gz."""
    data = REPO / "tests" / "data" / "trtexec"

    def imported(out: Path, gz: bool) -> None:
        for i, precision in enumerate(("fp32", "fp16")):
            files = []
            for option, kind in (("--times", "timing"), ("--profile", "profile"), ("--layer-info", "graph")):
                src = data / f"resnet50-rtx3090-{precision}.{kind}.json.gz"
                files += [option, str(src if gz else plain(src, tmp_path / f"{precision}.{kind}.json"))]
            code, _, err = run_main(capsys, "import", "trtexec", *files, "--precision", precision, "--batch-size", "32",
                                    "--model", "resnet50", "--out", str(out), *(["--append"] if i else []))
            assert code == 0, err

    imported(tmp_path / "from-plain.json", gz=False)
    imported(tmp_path / "from-gz.json", gz=True)
    a, b = (ResultSet.read(tmp_path / n).to_json() for n in ("from-plain.json", "from-gz.json"))
    assert [r["samples_ms"] for r in a["results"]] == [r["samples_ms"] for r in b["results"]]
    assert [r["precision"] for r in b["results"]] == ["fp32", "fp16"]

    compared = {}
    for name in ("from-plain.json", "from-gz.json.gz"):
        src = tmp_path / name if name.endswith(".json") else gzipped(tmp_path / "from-gz.json")
        code, _, err = run_main(capsys, "compare", str(src), "--out", str(tmp_path / f"cmp-{name}.json"))
        assert code == 0, err
        compared[name] = json.loads((tmp_path / f"cmp-{name}.json").read_text())["comparisons"]
    assert compared["from-gz.json.gz"] == compared["from-plain.json"] and compared["from-plain.json"]


TRAIN = sorted((REPO / "benchmarks" / "results" / "gpu_train-2026-11-30").glob("train-resnet50.json*"))


def test_report_renders_a_train_compare_file_and_its_gz_identically(tmp_path, capsys):
    """The training page reads its file through the same reader (it re-read it with json.loads before)."""
    assert TRAIN, "benchmarks/results/gpu_train-2026-11-30/train-resnet50.json(.gz) is gone"
    src = plain(TRAIN[0], tmp_path / "train.json")
    page, md = report(capsys, src, tmp_path / "plain.html")
    page_gz, md_gz = report(capsys, gzipped(src), tmp_path / "gz.html")
    assert page_gz == page and md_gz == md
    assert "resnet50" in page
