"""GPU launches: CUDA graph replay by default, ``--eager`` to time eager launches, both flags refused."""
from __future__ import annotations

import argparse

import pytest

from trtprof.cli import _common
from trtprof.errors import BadInput


def _args(*argv: str, backend: str = "torch") -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    _common.add_launch_args(parser)
    args = parser.parse_args(list(argv))
    args.backend = backend
    return args


def test_graphs_are_the_default_and_eager_is_asked_for():
    assert _common.cuda_graph(_args()) is True
    assert _common.cuda_graph(_args("--cuda-graph")) is True
    assert _common.cuda_graph(_args("--eager")) is False
    with pytest.raises(BadInput, match="--eager and --cuda-graph contradict"):
        _common.cuda_graph(_args("--eager", "--cuda-graph"))


def test_the_launch_line_is_printed_for_gpu_backends_only(monkeypatch):
    from trtprof.system import cuda

    monkeypatch.setattr(cuda, "device_count", lambda: 0)
    assert _common.launch_line(_args(backend="onnxruntime")) is None
    assert _common.launch_line(_args(backend="auto")) is None
    assert _common.launch_line(_args()).startswith("timing: CUDA graph replay (the default")
    assert _common.launch_line(_args("--eager")) == "timing: eager launches (--eager)"
    monkeypatch.setattr(cuda, "device_count", lambda: 1)
    assert _common.launch_line(_args(backend="auto")) is not None


def test_compare_on_a_gpu_says_what_its_loads_are(monkeypatch):
    """The loads line (compare.gpu_lines): side by side by default, with what that does to small batch sizes and
    the flag that avoids it; alone with --serial-loads; nothing of loads in-process or on the CPU."""
    from trtprof.cli import compare
    from trtprof.system import cuda

    monkeypatch.setattr(cuda, "device_count", lambda: 0)

    def lines(*argv: str, backend: str = "torch") -> str | None:
        args = _args(backend=backend)
        args.in_process, args.serial_loads = "--in-process" in argv, "--serial-loads" in argv
        args.side_by_side_loads = "--side-by-side-loads" in argv
        return compare.gpu_lines(args, compare.isolation(args))

    default = lines()
    assert default.startswith("timing: CUDA graph replay") and "\nloads: worker processes side by side (the default)" in default
    assert "--serial-loads measures each load alone" in default
    assert "loads: one worker process at a time (--serial-loads), each alone on the GPU as a user's own loop is" \
        in lines("--serial-loads")
    assert "loads:" not in lines("--in-process")
    assert lines(backend="onnxruntime") is None
    # onnxruntime-cuda's loads are lone by default (Capabilities.lone_loads); the flag puts them side by side
    assert "loads: one worker process at a time (the default here; --side-by-side-loads" in lines(backend="onnxruntime-cuda")
    assert "side by side (--side-by-side-loads)" in lines("--side-by-side-loads", backend="onnxruntime-cuda")


@pytest.mark.parametrize("backend, argv, expected", [
    ("onnxruntime-cuda", (), "serial"), ("onnxruntime-cuda", ("--side-by-side-loads",), "process"),
    ("onnxruntime-cuda", ("--in-process",), "in_process"), ("torch", (), "process"), ("onnxruntime", (), "process"),
    ("torch", ("--serial-loads",), "serial"), ("no-such-backend", (), "process"),
])
def test_compare_s_loads_are_lone_by_default_only_where_the_backend_says_so(backend, argv, expected):
    from trtprof.cli import compare

    args = _args(backend=backend)
    args.in_process, args.serial_loads = "--in-process" in argv, "--serial-loads" in argv
    args.side_by_side_loads = "--side-by-side-loads" in argv
    assert compare.isolation(args) == {"serial": "serial", "process": "process",
                                       "in_process": compare.cmp.ISOLATION_IN_PROCESS}[expected]
