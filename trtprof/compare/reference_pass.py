"""compare's load phase without loading an engine in this process: load 0's worker computes it.

Why: the parent used to load every engine once more beside the workers, for the outputs of the
accuracy pass and the input specs. On the H200 that pass (``load_reference``: torch imported, every
engine converted, each shape autotuned once) took 24 s of a 104 s ResNet-50 compare
(benchmarks/results/gpu_issue33-H200-2026-12-01) while the workers were doing the same work. Load 0's
worker has every arm loaded anyway: it reports each arm's specs, device and autotune setting in its
``ready`` reply (``workers.ArmFacts``) and runs the accuracy pass (``WorkerPool.outputs``) on the same
seeded inputs, before any timing. This process runs the FP16 range analysis (ONNX Runtime on the FP32
model: no engine) while the other workers start. Same feeds, same reference arm, same metrics: the same verdict as before
(tests/compare/test_reference_pass.py compares the two paths).

With the user's ``--inputs`` the accuracy pass runs on their samples (as many as its share of the budget
allows: ``accuracy_pass``), which would travel to the worker and their outputs back through the pipe: that
case stays in the parent (``load_reference``).
"""
from __future__ import annotations

import time
from typing import Any, Callable, Mapping, Sequence

from ..convert import fp16range
from ..measure import bench
from ..measure.concurrent import Span
from ..measure.timing import TimingConfig
from ..model.inputs import DEFAULT_INT_RANGE, make_inputs, resolve_shapes
from ..model.onnx_model import OnnxModel
from ..system import preflight


def checked_shapes(first: Any, baseline: Any, batch_sizes: Sequence[int], options: Any,
                   model: OnnxModel | None) -> tuple[dict[int, dict[str, tuple[int, ...]]], dict[int, int]]:
    """The checks before any measurement, on the baseline arm (a runner or its ``ArmFacts``: ``inputs``,
    ``device``) of ``first``, its record: the user's inputs (refused, exit 2), the integer feeds, every batch
    size's input shapes and whether its inputs fit in memory. Returns the shapes and the inputs' bytes
    per batch size (for ``preflight.allocation_guard``)."""
    data = options.data
    if data is not None:  # the user's inputs: refused (exit 2) before any measurement
        data.check(baseline.inputs, model_path=first.model_path)
    preflight.check_integer_feeds(model.path if model is not None else bench.onnx_of(first), baseline.inputs,
                                  options.ints, data, proto=model.proto if model is not None else None)
    overrides = {**first.spec.shape_overrides(), **(options.shapes or {}), **(data.shape_overrides() if data else {})}
    all_shapes = {b: resolve_shapes(baseline.inputs, b, overrides, model_path=first.model_path)
                  for b in batch_sizes}  # every shape checked before the first measurement
    needed = {b: preflight.check_batch_memory(baseline, b, all_shapes[b])  # as bench does
              for b in batch_sizes}
    return all_shapes, needed


def seeded_as_build(options: Any) -> bool:
    """Are compare's random inputs the ones ``build`` analysed (seed 0, the default integer range)? Then an
    fp16 engine's recorded range analysis is the one compare would run (``fp16range.reusable``)."""
    return options.seed == 0 and tuple(options.ints) == DEFAULT_INT_RANGE and options.data is None


def range_deadline(options: Any, say: Callable[[str], None] | None) -> fp16range.Deadline:
    """The FP16 range analysis' bound: ``RANGE_ANALYSIS_SHARE`` of one batch size's budget from now."""
    now = time.perf_counter()
    return fp16range.Deadline(at=options.time_budget.analysis_deadline(now), say=say)


def from_worker(records: Mapping[str, Any], batch_sizes: Sequence[int], options: Any, model: OnnxModel | None,
                pool: Any, say: Callable[[str], None] | None = None) -> dict[str, Any]:
    """The fields of ``measuring.Reference`` from load 0's worker (``pool``): its arms' facts; the FP16 range
    analysis (when a candidate is fp16) here, on the smallest batch size's inputs made from the same
    seed, while the other workers are still starting; then the accuracy pass, alone once they have
    all loaded their engines (``WorkerPool.outputs`` says why), or, where every GPU arm's first run at a shape
    times no kernels, beside the other workers' priming. No engine is loaded here."""
    say = say or (lambda line: None)
    names = list(records)
    first = records[names[0]]
    say("waiting for load 0's worker to start and load the engines")
    facts = pool.facts()
    baseline = facts[names[0]]
    all_shapes, needed = checked_shapes(first, baseline, batch_sizes, options, model)
    gpu_arms = [facts[n] for n in names if facts[n].device == "cuda"]
    # the accuracy pass beside the others' priming where no arm's first run at a shape times kernels
    beside = bool(gpu_arms) and all(f.primes_beside_others for f in gpu_arms)
    asked: int | None = None  # workers priming ahead (0: loads living one at a time, each primed at its start)
    if gpu_arms:  # the first runs at each shape, side by side, before timing
        asked = pool.prime([(b, all_shapes[b]) for b in batch_sizes], options.seed, options.ints,
                           TimingConfig(cuda_graph=options.plan.cuda_graph, copies=options.plan.copies),
                           after_outputs=beside)
        if asked:  # (loads living one at a time prime each at its start: none ahead)
            say(f"priming: {asked} worker processes set up and run, side by side, each arm whose first run at a shape "
                f"times no kernels (onnxruntime-cuda), once at batch {', '.join(map(str, batch_sizes))}: those first "
                "runs and graph captures are then behind every load's warm-up"
                + ("; load 0's worker after its accuracy pass, which runs beside the others' priming" if beside else ""))
    smallest = min(batch_sizes)
    started = time.monotonic()
    with preflight.allocation_guard(smallest, needed[smallest]):  # FP16 range risks from the FP32 model (issue 10)
        feeds = make_inputs(baseline.inputs, all_shapes[smallest], seed=options.seed, int_range=options.ints)
        fp16_range = fp16range.for_compare(model, records, feeds, seeded_as_build=seeded_as_build(options),
                                           deadline=range_deadline(options, say))
    del feeds
    if fp16_range is not None:
        pool.busy.append(Span("the FP16 range analysis (this process)", started, time.monotonic()))
    say(f"the accuracy pass in load 0's worker (every arm once at batch {', '.join(map(str, batch_sizes))}), "
        + ("beside the other workers' priming" if beside and asked else
           "once the workers started have loaded their engines" if asked != 0 else "before its priming"))
    answers = pool.outputs([(b, all_shapes[b], needed[b]) for b in batch_sizes], options.seed, options.ints)
    return {"shapes": all_shapes, "devices": {n: facts[n].device for n in names},
            "autotune": {n: facts[n].autotune for n in names}, "fp16_range": fp16_range,
            "outputs": {b: answers[b][0] for b in batch_sizes}, "memory": {b: answers[b][1] for b in batch_sizes}}
