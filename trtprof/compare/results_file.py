"""Every results file trtprof reads — by ``report``, ``plot``, ``import trtexec --append`` and ``compare``
on imported runs — read once, into its typed value: ``read_results``.

One read (``measure.results.read_json``: bounded, one-line errors, a ``.json.gz`` read as the JSON it
holds), one check (``compare.checks``, inside the value's ``from_json``; a sweep's counts and entries
here), one value: a compare file's ``CompareDocument``, a bench file's ``ResultSet``, or, for the files
whose pages live elsewhere (a sweep's ``sweep.json``, a train-compare), ``OtherResults``, their JSON as
read. The renderers take the value; a page that reads the JSON's blocks gets them from the value
(``OtherResults.data``, ``to_json()``), never from a second read of the file. Keys a value does not type
are kept and written back by its ``to_json``.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Union

from ..errors import BadInput
from ..measure.results import ResultSet, check_bench_file, read_json
from ..schemas import COMPARE_READABLE, RESULTS, SWEEP, TRAIN_COMPARE
from .checks import check_page_objects, check_stamps, check_sweep
from .report_value import CompareDocument


@dataclass(frozen=True)
class OtherResults:
    """A sweep's merged file (its counts and entries checked: ``checks.check_sweep``) or a train-compare
    result: its JSON as read (their pages own their fields)."""

    data: Mapping[str, Any]

    @property
    def schema(self) -> str:
        return str(self.data.get("schema"))

    def to_json(self) -> dict[str, Any]:
        return dict(self.data)


ResultsFile = Union[CompareDocument, ResultSet, OtherResults]


def read_results(path: Path) -> ResultsFile:
    """The file at ``path`` (plain or gzip) as its typed value; anything that is not a trtprof results file,
    or whose fields have the wrong type, is one BadInput line naming the file."""
    path = Path(path)
    return results_value(read_json(path), path)


def results_value(data: Mapping[str, Any], path: Path) -> ResultsFile:
    """``data`` (a results file's JSON, read from ``path``) as its typed value, checked."""
    schema = data.get("schema")
    if schema in COMPARE_READABLE:
        return CompareDocument.from_json(data, path)
    if schema == RESULTS:
        check_stamps(data, path)  # the stamps and top-level blocks every page reads (compare's: in from_json)
        check_page_objects(data, path)
        return ResultSet.from_json(data, path)
    if schema == SWEEP:
        check_sweep(data, path)  # the numbers and entries the matrix page reads
        return OtherResults(data)
    if schema == TRAIN_COMPARE:
        return OtherResults(data)
    raise BadInput(f"not a trtprof compare or results file (schema {schema!r})", path=path)


def read_bench(path: Path) -> ResultSet:
    """A bench results file (``plot``, ``import trtexec --append``, ``compare`` on imported runs): anything
    else is one BadInput line."""
    path = Path(path)
    return bench_value(read_json(path), path)


def bench_value(data: Mapping[str, Any], path: Path) -> ResultSet:
    """``data``, read from ``path``, as a bench results file's value (``read_bench`` after the read)."""
    check_bench_file(data, path)
    value = results_value(data, path)
    assert isinstance(value, ResultSet)
    return value
