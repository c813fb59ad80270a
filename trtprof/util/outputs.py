"""Outputs never destroy inputs: which existing files an output may replace.

Why a module: every command writes somewhere (``--out``, ``--csv``, ``-o``, a plots or sweep folder,
a report's ``<stem>_cells/``), and each used to replace whatever sat at that path — the model given
as input, the ``--inputs`` data, a user's notes. One rule, checked here for every output before any
work starts:

- an output that is (after resolving symlinks and hard links) any input of the command is refused,
  even with ``--force`` (the command would read what it is about to destroy);
- an existing file is replaced only when it is a trtprof output of the same kind, recognised by its
  content (a JSON ``schema``, the page's generator tag, the CSV header, an image's software tag);
  anything else is refused unless ``--force``.
"""
from __future__ import annotations

import json
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Sequence

from .. import schemas
from ..errors import BadInput

HEAD_BYTES = 4096  # where the tags sit: a page's <head>, a PNG's tEXt chunks, an SVG's metadata, a CSV header
MAX_JSON_BYTES = 64 * 1024**2  # as datafile.MAX_FILE_BYTES: a larger "result" is not one trtprof wrote
GENERATOR_META = '<meta name="generator" content="trtprof">'  # in every page's <head> (report.kit.document)
IMAGE_SOFTWARE = "trtprof"  # the PNG "Software" / SVG "Creator" tag of every plot (report.plots.save_figure)


@dataclass(frozen=True)
class OutputKind:
    """A kind of file trtprof writes, and how an existing one is recognised as such."""

    name: str  # in messages: "trtprof compare JSON"
    schemas: tuple[str | None, ...] = ()  # JSON: accepted values of the top-level "schema"
    json_key: str | None = None  # JSON: ... or an object holding this key (fix-fp16 without a comparison)
    heads: tuple[bytes, ...] = ()  # text/binary: the file starts with one of these
    tags: tuple[bytes, ...] = ()  # ... or holds one of these within HEAD_BYTES
    jsonl: bool = False  # JSON lines: every complete line an object (the sweep's logs)
    by_caller: bool = False  # the caller applies its own rule (profile --timeline's page mark)

    def recognises(self, path: Path) -> bool:
        if self.by_caller:
            return True
        try:
            if self.schemas or self.json_key:
                return _is_json_of(path, self.schemas, self.json_key)
            with open(path, "rb") as fh:
                head = fh.read(HEAD_BYTES)
            if self.jsonl:
                return _is_jsonl(head)
            return any(head.startswith(h) for h in self.heads) or any(t in head for t in self.tags)
        except OSError:
            return False


def _is_json_of(path: Path, accepted: tuple[str | None, ...], key: str | None) -> bool:
    if path.stat().st_size > MAX_JSON_BYTES:
        return False
    try:
        data = json.loads(path.read_bytes())
    except (ValueError, RecursionError):
        return False
    if not isinstance(data, dict):
        return False
    schema = data.get("schema")
    return (isinstance(schema, str) and schema in accepted) or (key is not None and isinstance(data.get(key), dict))


def _is_jsonl(head: bytes) -> bool:
    lines = head.split(b"\n")[:-1] or [head]  # the last piece may be cut by HEAD_BYTES
    try:
        return all(isinstance(json.loads(line), dict) for line in lines if line.strip())
    except ValueError:
        return False


COMPARE_JSON = OutputKind("trtprof compare JSON", schemas=schemas.COMPARE_READABLE, json_key="fix_fp16")
RESULTS_JSON = OutputKind("trtprof results JSON", schemas=(schemas.RESULTS,))
LAYERS_JSON = OutputKind("trtprof profile JSON", schemas=(schemas.LAYERS,))
TRAIN_JSON = OutputKind("trtprof train-compare JSON", schemas=(schemas.TRAIN_COMPARE,))
SWEEP_JSON = OutputKind("trtprof sweep JSON", schemas=(schemas.SWEEP,))
ANY_RESULT_JSON = OutputKind("trtprof result JSON", schemas=(*schemas.COMPARE_READABLE, schemas.RESULTS,
                                                             schemas.LAYERS, schemas.TRAIN_COMPARE), json_key="fix_fp16")
HTML_PAGE = OutputKind("trtprof HTML page", tags=(GENERATOR_META.encode(),))
# the first columns of each CSV trtprof writes (measure.results.to_csv, sweep.rows.to_csv)
CSV_TABLE = OutputKind("trtprof CSV", heads=(b"engine_label,model,precision,", b"model,kind,batch_size,device_type,"))
IMAGE = OutputKind("trtprof plot", tags=(IMAGE_SOFTWARE.encode(),))
JSON_LINES = OutputKind("trtprof sweep log", jsonl=True)
CELL_LOG = OutputKind("trtprof cell log")  # recognised only inside a folder whose cells.jsonl is trtprof's
CALLER_CHECKED = OutputKind("output checked by its command", by_caller=True)  # only the input rule applies here
ONNX_CONVERTED = OutputKind("ONNX model converted by trtprof", tags=(b"tf2onnx",))  # producer_name, at the start


def identity(path: Path) -> tuple[int, int] | None:
    """(device, inode) of an existing path (symlinks followed): two names of one file compare equal."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino


def resolved(path: Path) -> Path:
    return Path(os.path.abspath(path)).resolve()


NOT_REGULAR = ((stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISCHR, "a character device"),
               (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


def check_regular(path: Path, option: str) -> None:
    """Refuse (BadInput, one line; ``--force`` does not change it) an existing output that is not a
    regular file: a symlink of any kind (to a file, to an old result, dangling: the rename would put a
    file where the link was), a FIFO, a device (``/dev/null``), a socket. trtprof writes only regular
    files; a folder is left to the callers' own "is a directory" rules."""
    try:
        st = os.lstat(path)
    except OSError:  # not there (or not reachable: the writability checks say why)
        return
    mode = st.st_mode
    if stat.S_ISLNK(mode):
        try:
            to = os.readlink(path)
        except OSError:
            to = "?"
        what = "a symlink" if os.path.exists(path) else "a dangling symlink"
        raise BadInput(f"{option}: is {what} (to {to[:200]}); trtprof writes only regular files and replaces no "
                       "link: give the path of a file", path=path)
    for test, what in NOT_REGULAR:
        if test(mode):
            raise BadInput(f"{option}: is {what}, not a regular file; trtprof writes only regular files: give "
                           "the path of a file", path=path)


def check_replaceable(path: Path, option: str, kind: OutputKind, inputs: Iterable[Path], *,
                      force: bool = False) -> None:
    """Refuse (BadInput, one line) an output that is an input of the command or a file in an input folder
    (both even with ``force``), one that exists and is not a regular file (``check_regular``, even with
    ``force``), or an existing file that is not a trtprof output of ``kind`` (unless ``force``). Symlinks
    and hard links are followed to find the inputs."""
    target = resolved(path)
    ident = identity(target)
    for given in inputs:
        if target == resolved(given) or (ident is not None and ident == identity(given)):
            raise BadInput(f"{option}: is an input of this command ({given}); write the output elsewhere",
                           path=path)
        if resolved(given) in target.parents and os.path.isdir(given):  # an --inputs folder's files are inputs
            raise BadInput(f"{option}: is in {given}, a folder this command reads (its files are inputs, "
                           "--force included); write the output elsewhere", path=path)
    check_regular(Path(path), option)
    if ident is None or force or not target.is_file():
        return
    if not kind.recognises(target):
        raise BadInput(f"{option}: exists and is not a {kind.name}; left alone (give another path, or --force "
                       "to replace it)", path=path)


def check_folder_files(folder: Path, option: str, files: Sequence[tuple[str, OutputKind]], inputs: Iterable[Path],
                       *, force: bool = False) -> None:
    """The same rule for each file a command will write into ``folder`` (names relative to it)."""
    given = list(inputs)
    for name, kind in files:
        check_replaceable(Path(folder) / name, f"{option} {name}", kind, given, force=force)
