"""The timeline's values: a ``Span`` (one kernel, copy or node on a lane) and a ``Timeline`` (one steady-state
iteration of one precision), the kind of a span (``kernel_kind``) and the colour each kind is drawn in.
Recording, findings, traces and drawing are ``layers.timeline``'s.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Mapping

KINDS = ("conv", "gemm", "elementwise", "reformat", "cast", "copy", "other")
COLOURS = {"conv": "#4c72b0", "gemm": "#8172b2", "elementwise": "#55a868", "reformat": "#ccb974",
           "cast": "#c44e52", "copy": "#64b5cd", "other": "#999999"}
TOP_KERNELS = 5

_KIND_PATTERNS = (  # by ONNX op or kernel name (cuDNN/cuBLAS/CUTLASS/ATen/ORT names), first match wins
    # "cast" as a word start: not "nocast" (ATen's gpu_kernel_impl_nocast) nor "broadcast"
    ("cast", re.compile(r"(?<![a-z])cast|_to_half|convert_?f(16|32)|b?float16_copy|half_copy", re.I)),
    ("copy", re.compile(r"^memcpy|^memset|memcpy|memset|^copy$|direct_copy|copy_kernel|htod|dtoh", re.I)),
    ("conv", re.compile(r"conv(?!ert)|implicit_?gemm|winograd|fprop|dgrad|wgrad|convolve|fft", re.I)),
    ("gemm", re.compile(r"gemm|gemv|matmul|\bmm\b|xmma|cutlass|cublas|nvjet|linear|attention|flash|s16816|h16816",
                       re.I)),
    ("reformat", re.compile(r"reorder|reformat|transpose|permute|nchw_?to_?nhwc|nhwc_?to_?nchw|add_?padding|"
                            r"layout|shuffle|^flatten$|^reshape$", re.I)),
    ("elementwise", re.compile(r"elementwise|vectorized|relu|elu|add|mul|sigmoid|tanh|gelu|softmax|norm|"
                               r"pool|reduce|clamp|clip|activation|bias|^sum$|^div$|^sub$", re.I)),
)


def kernel_kind(name: str, op_type: str = "") -> str:
    """The kind of a span, from its ONNX op type if known, else from its kernel name."""
    for text in (op_type, name):
        if not text:
            continue
        for kind, pattern in _KIND_PATTERNS:
            if pattern.search(text):
                return kind
    return "other"


@dataclass(frozen=True)
class Span:
    """One kernel, copy or node: ``start_us`` from the iteration's start, on ``lane`` (stream or thread)."""

    name: str
    kind: str
    lane: str
    start_us: float
    dur_us: float
    node: str | None = None  # the ONNX node it came from, where known

    @property
    def end_us(self) -> float:
        return self.start_us + self.dur_us

    def to_json(self) -> dict[str, Any]:
        # to the ns: the profilers' own resolution (torch's trace is in µs with 3 decimals), no longer digits
        return {"name": self.name, "kind": self.kind, "lane": self.lane, "start_us": round(self.start_us, 3),
                "dur_us": round(self.dur_us, 3), "node": self.node}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "Span":
        return cls(str(data["name"]), str(data["kind"]), str(data["lane"]), float(data["start_us"]),
                   float(data["dur_us"]), None if data.get("node") is None else str(data["node"]))


@dataclass(frozen=True)
class Timeline:
    """One steady-state iteration of one engine. ``window_us``: the iteration as the host saw it (start
    of its first span to the end of its last, unless the source measured the iteration itself)."""

    precision: str
    batch_size: int
    backend: str
    source: str
    spans: tuple[Span, ...]
    window_us: float
    settings: Mapping[str, Any] = field(default_factory=dict)  # cuda_graph, autotune, threads: what it ran with

    @property
    def lanes(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(s.lane for s in sorted(self.spans, key=lambda s: s.start_us)))

    @property
    def kernel_us(self) -> float:
        """Sum of span durations (concurrent spans each count)."""
        return sum(s.dur_us for s in self.spans)

    def busy_us(self) -> float:
        """Time in the window when at least one span runs (the union of all lanes' spans)."""
        total, end = 0.0, float("-inf")
        for s in sorted(self.spans, key=lambda s: s.start_us):
            start = max(s.start_us, end)
            if s.end_us > start:
                total += s.end_us - start
            end = max(end, s.end_us)
        return total

    def gaps(self) -> list[tuple[float, float]]:
        """(start, end) of every stretch of the window in which nothing runs."""
        out, end = [], 0.0
        for s in sorted(self.spans, key=lambda s: s.start_us):
            if s.start_us > end:
                out.append((end, s.start_us))
            end = max(end, s.end_us)
        if self.window_us > end:
            out.append((end, self.window_us))
        return out

    @property
    def idle_share(self) -> float:
        return 0.0 if self.window_us <= 0 else max(0.0, 1.0 - self.busy_us() / self.window_us)

    def of_kind(self, kind: str) -> tuple[Span, ...]:
        return tuple(s for s in self.spans if s.kind == kind)

    def top(self, n: int = TOP_KERNELS) -> list[tuple[str, str, float, int]]:
        """(name, kind, total µs, calls) of the ``n`` names with the most time in the iteration."""
        per: dict[str, list[Any]] = {}
        for s in self.spans:
            entry = per.setdefault(s.name, [s.kind, 0.0, 0])
            entry[1] += s.dur_us
            entry[2] += 1
        ranked = sorted(per.items(), key=lambda kv: -kv[1][1])[:n]
        return [(name, kind, total, calls) for name, (kind, total, calls) in ranked]

    def to_json(self) -> dict[str, Any]:
        return {"precision": self.precision, "batch_size": self.batch_size, "backend": self.backend,
                "source": self.source, "window_us": self.window_us, "idle_share": self.idle_share,
                "busy_us": self.busy_us(), "kernel_us": self.kernel_us, "settings": dict(self.settings),
                "summary": self.summary(), "spans": [s.to_json() for s in self.spans]}

    def summary(self) -> dict[str, Any]:
        """Per kind the spans and their µs, and the top kernels: what a reader of the JSON wants first."""
        by_kind = {k: {"count": len(self.of_kind(k)), "us": round(sum(s.dur_us for s in self.of_kind(k)), 3)}
                   for k in KINDS if self.of_kind(k)}
        return {"spans": len(self.spans), "by_kind": by_kind,
                "top": [{"name": name, "kind": kind, "us": round(total, 3), "calls": calls}
                        for name, kind, total, calls in self.top()]}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "Timeline":
        return cls(str(data["precision"]), int(data["batch_size"]), str(data["backend"]), str(data["source"]),
                   tuple(Span.from_json(s) for s in data["spans"]), float(data["window_us"]),
                   dict(data.get("settings") or {}))


# ---------------------------------------------------------------------------------------------------
# Findings: what the timelines say, in words
# ---------------------------------------------------------------------------------------------------
