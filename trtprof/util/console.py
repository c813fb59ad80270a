"""Text for a terminal that cannot show every character: trtprof prints '≈', '…', '–', '×', '±' and the
like, and under ``LC_ALL=C`` (an ASCII stdout), a Latin-1 locale or ``PYTHONIOENCODING=ascii`` one of
them used to end the command with a UnicodeEncodeError — after the measurement, before the JSON.

``fit_streams`` (run first by the CLI) makes stdout and stderr write what their encoding cannot hold as
ASCII: a spelled-out form where one reads the same ('≈' → '~', '…' → '...', '×' → 'x', '≥' → '>='), the
letter without its accent ('é' → 'e'), else a ``\\u2248``-style escape. A stream that can encode
everything (UTF-8) is left as it is; files are always written as UTF-8 (``util.files``).
"""
from __future__ import annotations

import codecs
import sys
import unicodedata
from typing import Any

ERRORS = "trtprof-ascii"  # the codec error handler's name

SPELLED = {
    "≈": "~", "…": "...", "–": "-", "—": "--", "−": "-", "×": "x", "±": "+/-", "≥": ">=", "≤": "<=", "≠": "!=",
    "→": "->", "←": "<-", "↔": "<->", "⇒": "=>", "·": ".", "•": "*", "°": " deg", "µ": "u", "μ": "u",
    "²": "^2", "³": "^3", "¹": "^1", "⁻": "^-", "√": "sqrt", "∞": "inf", "Δ": "delta", "σ": "sigma",
    "‘": "'", "’": "'", "“": '"', "”": '"', "«": '"', "»": '"', "✓": "ok", "✗": "x", "✔": "ok", "✘": "x",
    "█": "#", "▏": "|", "▎": "|", "▍": "|", "▌": "|", "▋": "|", "▊": "|", "▉": "|", "│": "|", "─": "-",
    "\u00a0": " ", "\u2009": " ", "\u202f": " ", "\u2007": " ",
}


def ascii_form(char: str) -> str:
    """One character as ASCII: spelled out, without its accent, or as a ``\\uXXXX`` escape."""
    if char in SPELLED:
        return SPELLED[char]
    bare = unicodedata.normalize("NFKD", char).encode("ascii", "ignore").decode("ascii")
    return bare if bare.strip() or char.isspace() else char.encode("ascii", "backslashreplace").decode("ascii")


def _fallback(err: UnicodeError) -> tuple[str, int]:
    if not isinstance(err, UnicodeEncodeError):
        raise err
    return "".join(ascii_form(c) for c in err.object[err.start:err.end]), err.end


codecs.register_error(ERRORS, _fallback)


def needs_fallback(stream: Any) -> bool:
    """Whether ``stream`` cannot encode every character (its encoding is not a UTF)."""
    encoding = getattr(stream, "encoding", None)
    if not encoding:
        return False
    try:
        return not codecs.lookup(encoding).name.startswith("utf")
    except LookupError:
        return True


def fit_streams() -> None:
    """stdout and stderr write what their encoding cannot hold as ASCII (see the module's doc)."""
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None and needs_fallback(stream):
            try:
                reconfigure(errors=ERRORS)
            except (ValueError, OSError):  # a closed or detached stream: nothing will be written to it
                pass


def unescaped(text: str) -> str:
    """``text`` with the surrogate escapes of an undecodable file name (a non-ASCII name under
    ``LC_ALL=C``: 'mod\\udcc3\\udca8le') turned back into the characters its bytes spell in UTF-8
    ('modèle'), or U+FFFD where they spell none: text that UTF-8 files and matplotlib can take."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        pass
    try:
        return text.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    except UnicodeEncodeError:  # a surrogate no file name made (a JSON "\\ud800")
        return text.encode("utf-8", "replace").decode("utf-8")


def unescape_figure_text(fig: Any) -> None:
    """Every text of a matplotlib figure ``unescaped`` before it is drawn (its font code refuses surrogates)."""
    for artist in fig.findobj(lambda a: hasattr(a, "get_text") and hasattr(a, "set_text")):
        text = artist.get_text()
        if isinstance(text, str) and unescaped(text) != text:
            artist.set_text(unescaped(text))
