"""Issue 43 item 4: where a batch size's budget grows for its loads (or cannot hold them), the line says why
the backend's loads cost seconds when the backend declares it (``Capabilities.costly_loads``: torch's cuDNN
autotuning, pointing at onnxruntime-cuda) and says nothing more for a backend that does not."""
from __future__ import annotations

from trtprof import backends
from trtprof.compare.core import CompareHooks, budget_line

GREW = "the first load took 13.6 s: 6 loads × 4 rounds need about 95 s here; the budget grows to 60 s for them"


def heard(backend: str) -> list[tuple[int, str]]:
    lines: list[tuple[int, str]] = []
    line = budget_line(CompareHooks(on_budget=lambda b, text: lines.append((b, text))), 32, backend)
    assert line is not None
    line(GREW)
    return lines


def test_torch_says_its_loads_autotune_and_names_the_cheap_backend():
    ((batch, text),) = heard("torch")
    assert batch == 32 and text.startswith(GREW)
    assert "cuDNN's autotuning" in text and "--backend onnxruntime-cuda" in text
    assert backends.capabilities("torch").costly_loads in text


def test_backends_with_cheap_loads_add_nothing():
    for name in ("onnxruntime", "onnxruntime-cuda", "a-backend-nobody-registered"):
        assert heard(name) == [(32, GREW)]


def test_no_listener_no_line():
    assert budget_line(CompareHooks(), 1, "torch") is None
