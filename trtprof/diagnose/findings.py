"""The result type every diagnosis rule returns: one cause, in words, with the evidence behind it.

Its own low module because the rules live in several rooms (``diagnose`` for timings and the engine,
``layers.rules`` for a layer profile, ``train.reasons`` for a training step) and ``diagnose`` calls the
layer rules: with ``Finding`` in ``diagnose`` the two imported each other.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(frozen=True)
class Finding:
    rule: str
    message: str
    evidence: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)
