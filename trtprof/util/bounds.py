"""The bounds of numeric options: each option's value is a finite number of one kind between a
documented least and most value, checked when the option is parsed (argparse's one-line error, exit 2),
so that no value — ``2**64`` warm-up runs, a ``1e308`` s budget, ``nan`` — reaches the work.

A ``Bound`` is the ``type=`` of an ``argparse`` option (``cli._common`` holds one per kind of option,
reused by every command that has it); ``problem`` answers the same question for a value read from a
file (a sweep spec's fields stand for options).
"""
from __future__ import annotations

import argparse
import math
from dataclasses import dataclass

ONE_DAY_S = 86_400.0  # the most any duration option may ask for: time budgets, warm-up, --duration-s
SHOWN_CHARS = 40  # of the text given, in the error (a 5,000-digit number is not repeated whole)


def shown(text: str) -> str:
    """The text given, as the error quotes it (at most ``SHOWN_CHARS`` characters)."""
    return repr(text if len(text) <= SHOWN_CHARS else text[:SHOWN_CHARS] + "…")


def number_text(value: float) -> str:
    """1000000 → '1,000,000'; 86400000.0 → '86,400,000'; 0.5 → '0.5'."""
    if isinstance(value, int) or (math.isfinite(value) and value == int(value) and abs(value) < 1e16):
        return f"{int(value):,}"
    return f"{value:g}"


@dataclass(frozen=True)
class Bound:
    """A finite ``kind`` (int or float) from ``low`` to ``high``; ``low_open``/``high_open`` exclude the
    end itself. ``why`` says what the most stands for (shown with it), ``unit`` follows the numbers;
    ``between`` words both ends as one range ("between 0 and 4294967295") instead of "> 0" / "at most"."""

    kind: type
    low: float
    high: float
    why: str = ""
    unit: str = ""
    low_open: bool = False
    high_open: bool = False
    between: bool = False

    @property
    def maximum(self) -> float:
        return self.high

    def describe(self) -> str:
        """The range in words, for the docs and help: '0 … 1,000,000', '> 0 … 86,400 s'."""
        low = f"> {number_text(self.low)}" if self.low_open else number_text(self.low)
        high = f"< {number_text(self.high)}" if self.high_open else number_text(self.high)
        return f"{low} … {high}{self.unit}"

    def _range(self) -> str:
        ends = " (both excluded)" if self.low_open and self.high_open else ""
        return f"between {number_text(self.low)} and {number_text(self.high)}{self.unit}{ends}"

    def problem(self, value: float) -> str | None:
        """What is wrong with ``value`` (a number already of this kind), or None when it is inside."""
        if isinstance(value, float) and not math.isfinite(value):
            return "is not a finite number"
        below = value <= self.low if self.low_open else value < self.low
        above = value >= self.high if self.high_open else value > self.high
        if self.between and (below or above):
            return f"must be {self._range()}"
        if below:
            if self.kind is int and not self.low_open and self.low == 1:
                return "must be > 0"
            return f"must be {'>' if self.low_open else '>='} {number_text(self.low)}"
        if above:
            why = f" ({self.why})" if self.why else ""
            if self.high_open:
                return f"must be below {number_text(self.high)}{self.unit}{why}"
            return f"at most {number_text(self.high)}{self.unit}{why}"
        return None

    def parse(self, text: str) -> float:
        """``text`` as a number of this kind inside the bounds; ValueError (its message says why) else."""
        try:
            value = self.kind(text)
        except (ValueError, OverflowError):  # int('1e3'), int of a 5,000-digit string, float('x')
            raise ValueError(f"{shown(text)} is not a{'n integer' if self.kind is int else ' number'}") from None
        wrong = self.problem(value)
        if wrong is not None:
            raise ValueError(f"{shown(text)} {wrong}" if not wrong.startswith("at most") else f"{shown(text)}: {wrong}")
        return value

    def __call__(self, text: str) -> float:
        """As an argparse ``type=``: a bad value is argparse's one-line error naming the option."""
        try:
            return self.parse(text)
        except ValueError as err:
            raise argparse.ArgumentTypeError(str(err)) from None
