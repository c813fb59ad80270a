"""The pages of every CLI command, made once per test session (``cli_pages.make_pages``: about 45 s on the
2-core machine) for the structure tests (test_cli_pages.py) and the width measurement (test_page_width.py)."""
from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def cli_pages(tmp_path_factory) -> dict[str, Path]:
    pytest.importorskip("onnxruntime")
    pytest.importorskip("matplotlib")
    from .cli_pages import make_pages

    # a session fixture runs before the suite's function-level TRTPROF_ALLOW_FEWER_LOADS (tests/conftest.py):
    # its tiny budgets (sweep cells in subprocesses included) measure fewer loads as --allow-fewer-loads asks
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TRTPROF_ALLOW_FEWER_LOADS", "1")
        return make_pages(tmp_path_factory.mktemp("cli-pages"))
