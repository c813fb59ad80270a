"""The timing half of the independent plain-PyTorch references (``reference_resnet50_graph.py``,
``reference_report_net.py``): a step warmed up on a side stream (autotuning and lazy init outside the
capture), captured into one CUDA graph, replayed, and the median of per-replay CUDA-event times. It
imports nothing from trtprof: the references stay independent of what they check."""
from __future__ import annotations

from typing import Callable

import numpy as np
import torch


def graph_replay_ms(step: Callable[[], object], iters: int = 200, warmup: int = 5, replays_before: int = 20) -> float:
    stream = torch.cuda.Stream()
    with torch.inference_mode():
        with torch.cuda.stream(stream):
            for _ in range(warmup):
                step()
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, stream=stream):
            step()
        for _ in range(replays_before):
            graph.replay()
        torch.cuda.synchronize()
        times = []
        for _ in range(iters):
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            graph.replay()
            b.record()
            b.synchronize()
            times.append(a.elapsed_time(b))
    return float(np.median(times))
