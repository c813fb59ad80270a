"""The sweep's results folder: an append-only log that survives Ctrl-C, and the merged result.

    OUT/cells.jsonl        one line per finished cell (flushed and fsync'ed before the next cell
                           is reported): the source of truth, what ``--resume`` reads
    OUT/cells/<id>.json    each cell's own compare/bench JSON (written atomically before its line)
    OUT/cells/<id>.log     its build/compare output
    OUT/sweep.json         the merged result (``trtprof.sweep/1``), rewritten after every run
    OUT/sweep.csv          one row per comparison (or bench entry), for pandas

Why a log and not one JSON rewritten per cell: a kill between "write" and "rename" cannot lose a
line that was already fsync'ed, and a torn last line (the process died mid-write) is skipped on
read instead of making the whole file unreadable.
"""
from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from ..util.files import atomic_write_text, now_iso
from ..util.datafile import SAFE_NAME
from ..errors import BadInput
from ..schemas import SWEEP as SCHEMA
from ..util.signals import signals_deferred
from .rows import to_csv

LOG = "cells.jsonl"
RUNS = "runs.jsonl"  # one line per `trtprof sweep` run into this folder: executor, workers, wall time
MERGED = "sweep.json"
CSV = "sweep.csv"


class SweepStore:
    def __init__(self, out_dir: Path, *, resume: bool) -> None:
        self.out = Path(out_dir)
        self.log = self.out / LOG
        if self.log.exists() and not resume:
            raise BadInput("already holds a sweep: pass --resume to continue it, or another --out", path=self.out)
        (self.out / "cells").mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        # the log's records, in order: read once (on --resume; a new sweep's log is empty), then each record
        # this run adds as a later read would give it back (``add``), so ``latest`` never reads the log again
        self._records: list[dict[str, Any]] = self.repair_log() if resume else []

    def repair_log(self) -> list[dict[str, Any]]:
        """Read the log once: cut a torn last line (a run killed mid-write) before anything is appended, so
        the next record starts on its own line instead of being glued to the fragment and lost with it, and
        return the records of the lines kept (``parse_records``). The fragment is an unfinished record of
        trtprof's own, never a user's."""
        if not self.log.exists():
            return []
        data = self.log.read_bytes()
        keep = data.rfind(b"\n") + 1
        if keep != len(data):
            with open(self.log, "r+b") as fh:
                fh.truncate(keep)
                fh.flush()
                os.fsync(fh.fileno())
        return parse_records(data[:keep].decode("utf-8", errors="replace"))

    def read_records(self) -> list[dict[str, Any]]:
        """Every complete line of the log as it is now on disk, in order (a torn last line is skipped)."""
        if not self.log.exists():
            return []
        return parse_records(self.log.read_text(encoding="utf-8", errors="replace"))

    def latest(self) -> dict[str, dict[str, Any]]:
        """The last record of each cell id (a cell re-run on --resume replaces its failed record): of the
        records read at the start and those added since, without reading the log again."""
        latest: dict[str, dict[str, Any]] = {}
        with self._lock:
            for rec in self._records:
                latest[rec["id"]] = rec
        return latest

    def done_ids(self) -> set[str]:
        return {cid for cid, rec in self.latest().items() if rec.get("status") == "ok"}

    def add(self, record: Mapping[str, Any]) -> dict[str, Any]:
        """Store one finished cell: its result JSON and log first, then its line in the log."""
        rec = dict(record)
        if not (isinstance(rec.get("id"), str) and SAFE_NAME.fullmatch(rec["id"]) and ".." not in rec["id"]):
            raise ValueError(f"cell id {rec.get('id')!r} is not a plain name")  # ids are hex digests: a bug
        result = rec.pop("result", None)
        log_tail = rec.pop("log_tail", "")
        with self._lock:
            if result is not None:
                atomic_write_text(self.out / "cells" / f"{rec['id']}.json", json.dumps(result, indent=1) + "\n")
                rec["result_file"] = f"cells/{rec['id']}.json"
            atomic_write_text(self.out / "cells" / f"{rec['id']}.log", log_tail)
            rec["log_file"] = f"cells/{rec['id']}.log"
            line = json.dumps(rec, allow_nan=True)
            with open(self.log, "a", encoding="utf-8") as fh:
                fh.write(line + "\n")
                fh.flush()
                os.fsync(fh.fileno())
            self._records.append(json.loads(line))  # the record as the log holds it (a read would give this)
        return rec

    def add_run(self, info: Mapping[str, Any]) -> list[dict[str, Any]]:
        """Append this run's executor info; return every run's, oldest first."""
        with open(self.out / RUNS, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(dict(info)) + "\n")
        runs = []
        for line in (self.out / RUNS).read_text(encoding="utf-8").splitlines():
            try:
                runs.append(json.loads(line))
            except ValueError:
                continue
        return runs

    def write_merged(self, merged: Mapping[str, Any]) -> Path:
        path = self.out / MERGED
        with signals_deferred():  # a second Ctrl-C while the merged result is written must not lose it
            atomic_write_text(path, json.dumps(merged, indent=1, allow_nan=True) + "\n")
            atomic_write_text(self.out / CSV, to_csv(merged))
        return path


def parse_records(text: str) -> list[dict[str, Any]]:
    """The records of the log's ``text``, in order: a line that is not JSON (a torn last line) is skipped,
    and so is a record whose id is not a plain name."""
    out = []
    for line in text.splitlines():
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        # the id names files under cells/: only a plain name is ever used (issue 21)
        if isinstance(rec, dict) and isinstance(rec.get("id"), str) and SAFE_NAME.fullmatch(rec["id"]) \
                and ".." not in rec["id"]:
            out.append(rec)
    return out


def neighbours(records: Sequence[Mapping[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Per cell, the cells that ran at the same time on the same host (what may have disturbed it)."""
    out: dict[str, list[dict[str, Any]]] = {}
    for rec in records:
        beside = []
        host = (rec.get("host") or {}).get("hostname")
        for other in records:
            if other is rec or other.get("id") == rec.get("id") or (other.get("host") or {}).get("hostname") != host:
                continue
            overlap = min(rec["finished_epoch"], other["finished_epoch"]) - max(rec["started_epoch"], other["started_epoch"])
            if overlap > 0:
                beside.append({"id": other["id"], "name": other.get("name"), "slot": (other.get("slot") or {}).get("name"),
                               "gpu_uuid": (other.get("gpu") or {}).get("uuid"), "overlap_s": round(overlap, 2)})
        out[rec["id"]] = beside
    return out


def interference_warnings(entries: Iterable[Mapping[str, Any]], interference: Mapping[str, Any] | None) -> list[str]:
    """Warn about cells that ran beside others: with the measured figures when given, else say they
    were not measured. The verdict is less exposed than the latencies (a compare interleaves its
    precisions, so a steady neighbour slows both sides), but a neighbour that comes and goes is not
    steady."""
    crowded = [e for e in entries if e.get("beside")]
    if not crowded:
        return []
    if not interference:
        return [f"{len(crowded)} cell(s) ran beside another cell on the same host, and this sweep was given no "
                "interference measurement (benchmarks/sweep_interference.py, then --interference FILE): their "
                "absolute latencies may include a neighbour's disturbance"]
    warnings = []
    for kind in ("gpu", "cpu"):
        figures = interference.get(kind)
        if not figures:
            continue
        mine = [e for e in crowded if (e.get("gpu") is not None) == (kind == "gpu")]
        if mine and figures.get("above_noise"):
            warnings.append(
                f"{len(mine)} {kind.upper()} cell(s) ran beside another cell, and sweep_interference measured "
                f"{figures.get('worst_slowdown', 0):+.1%} latency change with a busy neighbour on "
                f"{figures.get('device', 'this host')} (noise floor ±{figures.get('noise_floor', 0):.1%}): "
                f"re-run those cells with one worker if absolute latencies matter")
    return warnings


def merge(spec_json: Mapping[str, Any], cells: Sequence[Mapping[str, Any]], latest: Mapping[str, Mapping[str, Any]],
          *, executor: Mapping[str, Any], interference: Mapping[str, Any] | None,
          runs: Sequence[Mapping[str, Any]] = ()) -> dict[str, Any]:
    """The merged result: every cell of the spec in order, with its last record (or ``missing``); whether this
    run was interrupted and its wall time are the ``executor``'s record of it (``interrupted``, ``run_wall_s``)."""
    interrupted, wall_s = bool(executor.get("interrupted", False)), executor.get("run_wall_s")
    records = [dict(latest[c["id"]]) for c in cells if c["id"] in latest]
    beside = neighbours(records)
    entries = []
    for c in cells:
        if c["id"] in latest:
            entry = dict(latest[c["id"]])
            entry["beside"] = beside.get(c["id"], [])
        else:
            entry = {**c, "status": "missing"}
        entries.append(entry)
    counts = {s: sum(1 for e in entries if e["status"] == s) for s in ("ok", "failed", "missing")}
    warnings = interference_warnings(entries, interference)
    ids = {c["id"] for c in cells}
    stale = [rid for rid in latest if rid not in ids]
    if stale:
        warnings.append(f"{len(stale)} cell record(s) in this folder belong to no cell of this spec (were models or "
                        "settings changed before --resume?): they are kept in cells.jsonl but not merged")
    return {
        "schema": SCHEMA, "created": now_iso(), "spec": dict(spec_json), "executor": dict(executor),
        "runs": [dict(r) for r in runs],
        "interrupted": interrupted, "wall_s": wall_s, "cells_total": len(entries),
        "cells_ok": counts["ok"], "cells_failed": counts["failed"], "cells_missing": counts["missing"],
        "interference": dict(interference) if interference else None, "warnings": warnings, "entries": entries,
    }
