"""Measure how wide the pages trtprof writes are in a 1280 px browser window (issue 34: no horizontal scroll).

Each page is opened in headless Chromium at ``--width`` px with a small script appended to a copy of it; the
script writes ``document.documentElement.scrollWidth`` and the elements whose right edge passes the window into
the DOM, and ``--dump-dom`` brings that back. A page passes when its scroll width is no wider than the window.

Usage: python tools/page_width.py PAGE.html [PAGE.html ...] [--width 1280]   (exit 1 when a page is wider)
Needs chromium (``/usr/bin/chromium``; ``apt-get install -y chromium``). Used by tests/report/test_page_width.py.
"""
from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

# a reader's laptop window; the width
WINDOW_PX = 1280
# Chromium's own start can take seconds on a loaded 2-core machine; a page that needs longer is broken anyway
CHROMIUM_TIMEOUT_S = 120

PROBE = """<script>window.addEventListener('load', function () {
  var w = window.innerWidth, wide = [];
  document.querySelectorAll('body *').forEach(function (e) {
    var r = e.getBoundingClientRect();
    if (r.right > w + 0.5) wide.push(e.tagName.toLowerCase() + (e.className ? '.' + e.className : '') +
                                     ' right=' + Math.round(r.right));
  });
  var p = document.createElement('pre'); p.id = 'trtprof-width-probe';
  p.textContent = JSON.stringify({scroll_width: document.documentElement.scrollWidth, window: w,
                                  too_wide: wide.slice(0, 12)});
  document.body.appendChild(p);
});</script>"""


def chromium() -> str | None:
    """The chromium binary, or None when none is installed."""
    return shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")


def measure(page: Path, width: int = WINDOW_PX, binary: str | None = None) -> dict:
    """``{"scroll_width", "window", "too_wide"}`` of ``page`` opened at ``width`` px (the page is not changed)."""
    binary = binary or chromium()
    if binary is None:
        raise RuntimeError("chromium not found (apt-get install -y chromium)")
    with tempfile.TemporaryDirectory(prefix="trtprof-width-") as tmp:
        probe = Path(tmp) / "page.html"
        text = Path(page).read_text(encoding="utf-8")
        probe.write_text(text.replace("</body>", PROBE + "</body>") if "</body>" in text else text + PROBE,
                         encoding="utf-8")
        out = subprocess.run(
            [binary, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             f"--user-data-dir={tmp}/profile", f"--window-size={width},1000", "--virtual-time-budget=5000",
             "--dump-dom", probe.as_uri()],
            capture_output=True, text=True, timeout=CHROMIUM_TIMEOUT_S, check=False)
    found = re.search(r'<pre id="trtprof-width-probe">(.*?)</pre>', out.stdout, re.S)
    if found is None:
        raise RuntimeError(f"{page}: chromium gave no measurement (rc {out.returncode}): {out.stderr[-300:]}")
    return json.loads(found.group(1).replace("&quot;", '"').replace("&amp;", "&").replace("&lt;", "<")
                      .replace("&gt;", ">"))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("pages", nargs="+", type=Path)
    ap.add_argument("--width", type=int, default=WINDOW_PX)
    args = ap.parse_args(argv)
    worst = 0
    for page in args.pages:
        m = measure(page, args.width)
        ok = m["scroll_width"] <= args.width
        worst |= not ok
        print(f"{'ok  ' if ok else 'WIDE'} {page}: scroll width {m['scroll_width']} px in a {args.width} px window"
              + ("" if ok else "; too wide: " + ", ".join(m["too_wide"])))
    return int(worst)


if __name__ == "__main__":
    sys.exit(main())
