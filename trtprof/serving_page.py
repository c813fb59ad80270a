"""The report's sections for the deployer's questions (issue 24): memory and size per engine, and
(with ``--concurrency``) the latency–throughput curves and throughput at a latency target.

Kept apart from ``trtprof.report`` so the page assembly only calls ``sections(data)``."""
from __future__ import annotations

import html
from typing import Any, Mapping, Sequence


def _table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def memory_rows(results: Sequence[Any]) -> list[list[str]]:
    from .labels import engine_labels
    from .memory import fmt_bytes, in_use_bytes

    rows = []
    for r, label in zip(results, engine_labels(results)):
        rows.append([label, str(r.batch_size), fmt_bytes(r.engine.get("artifact_bytes")),
                     fmt_bytes(in_use_bytes(r.memory)), str(r.memory.get("kind", "n/a")),
                     str(r.memory.get("method") or r.memory.get("reason") or "")])
    return rows


def memory_section(results: Sequence[Any]) -> str:
    rows = memory_rows(results)
    if not rows or not any(r.engine.get("artifact_bytes") is not None or r.memory for r in results):
        return ""
    return ("<h2>Memory and size</h2><p>Artifact bytes on disk and memory in use while the engine infers "
            "(what each backend can measure; see the last column).</p>"
            + _table(("engine", "batch", "artifact", "memory in use", "measured as", "method"), rows))


def sections(data: Mapping[str, Any]) -> list[str]:
    """HTML sections for a compare or bench JSON already loaded by ``report.load``."""
    parts = [memory_section(data.get("parsed_results", []))]
    return [p for p in parts if p]
