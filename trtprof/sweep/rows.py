"""One row per comparison of a merged sweep: the CSV (``sweep.csv``) and the device column both the
CSV and the verdict matrix group by. Its own module because the store writes the CSV and the matrix
page reads the store's schema: in either of them it made the two import each other."""
from __future__ import annotations

import csv
import io
from typing import Any, Mapping

from ..util.csvsafe import csv_cell

CSV_COLUMNS = ("model", "kind", "batch_size", "device_type", "gpu_uuid", "host", "driver", "backend", "baseline",
               "candidate", "precision", "speedup", "ci_low", "ci_high", "verdict", "baseline_median_ms",
               "candidate_median_ms", "median_ms", "p99_ms", "throughput_per_s", "status", "error", "beside",
               "cell_id", "wall_s", "result_file")


def device_type(entry: Mapping[str, Any]) -> str:
    """What the matrix columns group by: the GPU name, or the CPU for CPU cells."""
    gpu = entry.get("gpu") or {}
    if gpu.get("name"):
        return str(gpu["name"])
    if entry.get("gpu_type_wanted"):
        return str(entry["gpu_type_wanted"])
    return f"CPU {(entry.get('host') or {}).get('cpu', '')}".strip()


def csv_rows(merged: Mapping[str, Any]) -> list[dict[str, Any]]:
    out = []
    for e in merged.get("entries", []):
        base = {"model": e.get("model"), "kind": e.get("kind"), "batch_size": e.get("batch_size"),
                "device_type": device_type(e), "gpu_uuid": (e.get("gpu") or {}).get("uuid"),
                "host": (e.get("host") or {}).get("hostname"), "driver": (e.get("gpu") or {}).get("driver"),
                "backend": e.get("backend"), "status": e.get("status"), "error": e.get("error"),
                "beside": ";".join(b.get("name") or b.get("id", "") for b in e.get("beside") or []),
                "cell_id": e.get("id"), "wall_s": e.get("wall_s"), "result_file": e.get("result_file")}
        summary = e.get("summary") or []
        if not summary:
            out.append(base)
        for row in summary:
            out.append({**base, **{k: v for k, v in row.items() if k in CSV_COLUMNS and k != "batch_size"}})
    return out


def to_csv(merged: Mapping[str, Any]) -> str:
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=CSV_COLUMNS, lineterminator="\n", extrasaction="ignore")
    writer.writeheader()
    for row in csv_rows(merged):
        writer.writerow({k: ("" if v is None else csv_cell(v)) for k, v in row.items()})  # "=cmd|…" stays text
    return buf.getvalue()
