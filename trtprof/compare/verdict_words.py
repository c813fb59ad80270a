"""What a speedup verdict may say: one rule for the terminal, the page, the Markdown summary and the JSON.

Why a rule of its own (issue 44): the verdict word and its colour were printed as the interval alone
decided them, so ``0.685× [0.567, 0.828] SLOWER`` stood on the line that said 2 loads were too few to
trust its width, and ``int8 1.499× FASTER`` was green above a table whose accuracy said BROKEN.

The rule: the verdict (``faster``/``slower``/``equivalent``/``inconclusive``, from the interval) is shown
plainly — its word, in its colour — only when nothing takes it back:

* **provisional**: fewer loads ran than the VALID minimum (``--min-loads``, default
  ``interleave.MIN_LOADS`` = 6; the stamp's ``too_few_loads``): ``SLOWER (provisional: 2 of 6 loads)``,
  amber; the JSON says ``provisional: true`` with ``provisional_reason``;
* **accuracy BROKEN** (``accuracy.judge``): ``FASTER but accuracy BROKEN``, in the BROKEN colour, never
  the verdict's own (a faster engine whose outputs are wrong is not faster at anything).

Both together: ``FASTER (provisional: 2 of 6 loads) but accuracy BROKEN``. Whether the run measured what
it claims (an "fp16" that ran FP32) is the validity stamp's to say, on the line above the verdict.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Any, Mapping, TextIO

from ..stats.speedup import SLOWER

PROVISIONAL = "provisional"  # the tone of a verdict from fewer loads than the minimum
BROKEN = "broken"  # the tone of a verdict whose candidate's accuracy is BROKEN
ACCURACY_BROKEN = "BROKEN"  # accuracy.BROKEN, the label of its verdict (tested equal)
# The stamp's reason for too few loads (system.validity.check_loads): "2 of the minimum 6 loads ran".
_TOO_FEW = re.compile(r"(\d+) of the minimum (\d+) loads")


@dataclass(frozen=True)
class ShownVerdict:
    """A verdict as it may be shown: ``words`` (the verdict word in capitals and what qualifies it),
    ``tone`` (the colour: the verdict's own, ``provisional`` or ``broken``) and why it is provisional."""

    verdict: str
    words: str
    tone: str
    provisional: bool = False
    provisional_reason: str | None = None
    accuracy_broken: bool = False

    @property
    def page_words(self) -> str:
        """The pages' form: the verdict word as the pages write it (lower case), the rest as printed."""
        return self.verdict + self.words[len(self.verdict):]

    @property
    def plain(self) -> bool:
        """Nothing takes the verdict back: shown in its own words and colour."""
        return self.tone == self.verdict


def provisional_reason(loads: int, min_loads: int) -> str:
    return (f"{loads} of the minimum {min_loads} loads ran: the interval and its verdict may change with the "
            "loads still missing (a larger --time-budget-s, fewer batch sizes)")


def shown_verdict(verdict: str, *, loads: int | None, min_loads: int | None,
                  accuracy: str | None = None) -> ShownVerdict:
    """``verdict`` qualified by the rule above: ``loads`` of ``min_loads`` (None: not known, never
    provisional) and the candidate's accuracy verdict (``OK``/``DEGRADED``/``BROKEN`` or None)."""
    words = verdict.upper()
    provisional = loads is not None and min_loads is not None and loads < min_loads
    if provisional:
        words += f" (provisional: {loads} of {min_loads} loads)"
    broken = accuracy == ACCURACY_BROKEN
    if broken:
        words += f" {'and' if verdict == SLOWER else 'but'} accuracy BROKEN"
    tone = BROKEN if broken else PROVISIONAL if provisional else verdict
    return ShownVerdict(verdict=verdict, words=words, tone=tone, provisional=provisional,
                        provisional_reason=provisional_reason(loads, min_loads) if provisional else None,  # type: ignore[arg-type]
                        accuracy_broken=broken)


def loads_from_stamp(validity: Mapping[str, Any] | None) -> tuple[int, int] | None:
    """(loads, minimum) from a stamp's ``too_few_loads`` reason: what a file written before the
    comparison recorded its ``min_loads`` still says."""
    for reason in (validity or {}).get("reasons") or ():
        if isinstance(reason, Mapping) and reason.get("code") == "too_few_loads":
            found = _TOO_FEW.search(str(reason.get("text", "")))
            if found:
                return int(found.group(1)), int(found.group(2))
    return None


# ANSI colours of the tones on a terminal (the pages' CSS classes: report.kit, ``v-<tone>``)
ANSI = {"faster": "32", "slower": "31", "equivalent": "36", PROVISIONAL: "33", BROKEN: "1;35"}


def colour_enabled(stream: TextIO) -> bool:
    """Colour on a terminal, as the conventions say: ``NO_COLOR`` (any value) switches it off,
    ``FORCE_COLOR`` (non-empty, not 0) on even where the stream is not a terminal (a CI log)."""
    if os.environ.get("NO_COLOR"):
        return False
    force = os.environ.get("FORCE_COLOR", "")
    if force and force != "0":
        return True
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty()) and os.environ.get("TERM") != "dumb"


def coloured(shown: ShownVerdict, enabled: bool) -> str:
    """``shown.words`` in its tone's colour when ``enabled`` (inconclusive has none)."""
    code = ANSI.get(shown.tone)
    return f"\x1b[{code}m{shown.words}\x1b[0m" if enabled and code else shown.words
