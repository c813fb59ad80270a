"""``trtprof fix-fp16``: find a small set of nodes to keep in FP32 so that the FP16 candidate meets the
accuracy budget, then measure what that costs in speed with compare's own machinery.

Why: the range analysis says which tensors overflow, but not whether keeping them FP32 is enough (an
underflow or a rounding-sensitive reduction can still fail the budget), and no anchor says what the
fix costs in speed. Polygraphy's ``debug precision`` bisects over the layers to find how many must
run in higher precision; the search here does the same on the user's inputs:

1. the plain FP16 graph: when it already meets the budget, nothing needs keeping;
2. the range analysis' keep-list (its findings' producers and readers, already built): often enough;
3. otherwise bisection over the graph (topological order): the shortest prefix of nodes which, kept
   FP32 with the seed, meets the budget, then the latest start of that window that still does:
   about 2·log2(nodes) evaluations. (It assumes keeping more nodes never hurts, as Polygraphy does.)

Every evaluation converts and builds the keep-list and judges its outputs against the FP32 reference
with ``accuracy.judge``. Where the backend does not compute in FP16 (ONNX Runtime's CPU provider
runs the FP16 graph in FP32 behind casts: its outputs would pass any budget), the FP16 graph is
evaluated with numpy float16 arithmetic instead (``onnx.reference``: 1e9 really becomes inf), and
the result says so. ``max_builds`` bounds the evaluations.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

import numpy as np

if TYPE_CHECKING:
    from .report_value import CompareDocument

DEFAULT_MAX_BUILDS = 24  # ≈ 2 + 2·log2(2000 nodes): enough to bisect any model trtprof has met
# How outputs of a keep-list candidate are obtained
ENGINE = "engine"  # the backend's FP16 engine (really computes in FP16)
EMULATED = "emulated"  # onnx.reference on the converted graph: numpy float16 arithmetic


@dataclass(frozen=True)
class Trial:
    """One evaluated keep-list."""

    stage: str  # "plain", "seed", "prefix", "window"
    nodes: tuple[str, ...]
    verdict: str  # OK / DEGRADED / BROKEN, or BUILD_FAILED
    reason: str
    cosine: float | None = None
    top1: float | None = None

    def to_json(self) -> dict[str, Any]:
        return {"stage": self.stage, "nodes": list(self.nodes), "kept": len(self.nodes), "verdict": self.verdict,
                "reason": self.reason, "cosine": self.cosine, "top1": self.top1}


@dataclass
class Search:
    """The search's log and its answer (``keep`` None: no keep-list met the budget)."""

    budget: str
    evaluation: str  # ENGINE or EMULATED
    inputs: str
    nodes: int  # candidate nodes in the graph
    max_builds: int
    trials: list[Trial] = field(default_factory=list)
    keep: tuple[str, ...] | None = None
    stopped: str = ""  # why the search stopped early ("" when it finished)
    model: str = ""  # the model as the user named it: the page's ``reuse: trtprof build MODEL …`` line

    @property
    def option(self) -> str:
        from ..convert.fp16range import option_text

        return option_text(self.keep) if self.keep else ""

    @property
    def best(self) -> Trial | None:
        return next((t for t in self.trials if self.keep is not None and t.nodes == self.keep and t.verdict == "OK"), None)

    def to_json(self) -> dict[str, Any]:
        return {"budget": self.budget, "evaluation": self.evaluation, "inputs": self.inputs, "nodes": self.nodes,
                "max_builds": self.max_builds, "builds": len(self.trials), "keep": list(self.keep or []),
                "found": self.keep is not None, "option": self.option, "stopped": self.stopped or None,
                **({"model": self.model} if self.model else {}),
                "trials": [t.to_json() for t in self.trials]}


class BuildLimit(Exception):
    """``max_builds`` evaluations done."""


def candidate_nodes(proto: Any) -> list[str]:
    """Nodes of the graph ``proto`` a keep-list may name, in graph (topological) order: trtprof's names for
    them (``prepare_for_fp16``), without Constants and trtprof's own output Identities."""
    from ..convert.fp16 import prepare_for_fp16
    from ..convert.fp16_fixes import DETACH_NODE_PREFIX

    prepared, _ = prepare_for_fp16(proto)
    return [n.name for n in prepared.graph.node
            if n.op_type != "Constant" and not n.name.startswith(DETACH_NODE_PREFIX)]


def search_keep_list(evaluate: Callable[[Sequence[str]], Any], nodes: Sequence[str], seed: Sequence[str],
                     search: Search, on_trial: Callable[[Trial], None] | None = None) -> Search:
    """Fill ``search`` with the trials and the keep-list found. ``evaluate(keep)`` returns (the
    accuracy verdict dict of ``accuracy.judge``, the AccuracyDelta) or raises ``BuildFailed``."""
    def ok(stage: str, keep: Sequence[str]) -> bool:
        if len(search.trials) >= search.max_builds:
            raise BuildLimit
        keep = tuple(dict.fromkeys(keep))
        trial = _trial(evaluate, stage, keep)
        search.trials.append(trial)
        if on_trial is not None:
            on_trial(trial)
        return trial.verdict == "OK"

    seed = [n for n in dict.fromkeys(seed) if n in set(nodes)]
    try:
        if ok("plain", []):
            search.keep = ()
            return search
        if seed and ok("seed", seed):
            search.keep = tuple(seed)
            return search
        if not ok("prefix", [*seed, *nodes]):
            search.stopped = "even every node kept in FP32 misses the budget (the budget may be tighter than FP32 " \
                             "itself is reproducible: check an A/A run)"
            return search
        search.keep = tuple(dict.fromkeys([*seed, *nodes]))
        low, high = 0, len(nodes)  # prefix length: low fails, high meets
        while high - low > 1:
            mid = (low + high) // 2
            if ok("prefix", [*seed, *nodes[:mid]]):
                high = mid
                search.keep = tuple(dict.fromkeys([*seed, *nodes[:mid]]))
            else:
                low = mid
        start, end = 0, high  # window start: start meets, end (an empty window) does not
        while end - start > 1:
            mid = (start + end) // 2
            if ok("window", [*seed, *nodes[mid:high]]):
                start = mid
                search.keep = tuple(dict.fromkeys([*seed, *nodes[mid:high]]))
            else:
                end = mid
    except BuildLimit:
        search.stopped = f"stopped after --max-builds {search.max_builds} evaluations" + \
            ("; the smallest keep-list found so far is kept" if search.keep is not None else "")
    return search


def _trial(evaluate: Callable[[Sequence[str]], Any], stage: str, keep: tuple[str, ...]) -> Trial:
    from ..errors import BuildFailed, TrtprofError

    try:
        verdict, acc = evaluate(keep)
    except (BuildFailed, TrtprofError) as err:
        return Trial(stage, keep, "BUILD_FAILED", str(err).splitlines()[0])
    return Trial(stage, keep, verdict["verdict"], verdict["reason"], acc.cosine, acc.top1)


# ---------------------------------------------------------------------------------------------
# Evaluating a keep-list
# ---------------------------------------------------------------------------------------------


def emulated_outputs(proto: Any, keep: Sequence[str], batches: Sequence[Mapping[str, np.ndarray]],
                     samples: int | None, batch_size: int) -> dict[str, np.ndarray]:
    """The FP16 graph of ``proto`` keeping ``keep`` in FP32, run with numpy float16 arithmetic (onnx.reference)
    on every batch; outputs joined as the reference's are (``user_inputs.join_batches``: along dim 0,
    trimmed to ``samples``, where dim 0 is the batch), one batch of random inputs (``samples`` None) as
    it came (a rank-0 output stays one)."""
    from onnx.reference import ReferenceEvaluator

    from ..convert.fp16 import convert_fp16
    from ..errors import BuildFailed
    from ..convert.fp16range import build_error
    from ..model.user_inputs import join_batches

    error = build_error(proto, keep)
    if error:
        raise BuildFailed(f"the FP16 graph keeping {len(keep)} node(s) in FP32 does not build: {error}")
    evaluator = ReferenceEvaluator(convert_fp16(proto, keep_fp32_nodes=keep).model)
    names = [o.name for o in proto.graph.output]
    parts: dict[str, list[np.ndarray]] = {n: [] for n in names}
    with np.errstate(over="ignore", invalid="ignore", divide="ignore", under="ignore"):
        for feeds in batches:
            for name, value in zip(names, evaluator.run(None, dict(feeds))):
                parts[name].append(np.asarray(value))
    if samples is None and len(batches) == 1:  # random inputs: the reference is this one batch as it came
        return {n: v[0] for n, v in parts.items()}
    return {n: join_batches(v, batch_size, samples or batch_size * len(batches)) for n, v in parts.items()}


def judge_outputs(reference: Mapping[str, np.ndarray], candidate: Mapping[str, np.ndarray], budget: Any,
                  inputs: str) -> tuple[dict[str, Any], Any]:
    from .accuracy import compare_outputs, judge

    acc = compare_outputs(reference, candidate, inputs=inputs)
    return judge(acc, budget), acc


@dataclass
class Fix:
    """What ``fix_fp16`` returns: the search, and the comparison of its keep-list (None when none was found)."""

    search: Search
    report: Any = None  # compare.CompareReport of fp32 vs fp16 with the keep-list
    analysis: Any = None  # fp16range.RangeAnalysis that seeded the search

    def search_json(self) -> dict[str, Any]:
        """The file's ``fix_fp16`` block: the search, and the range analysis that seeded it."""
        return {**self.search.to_json(), "range_analysis": self.analysis.to_json() if self.analysis is not None else None}

    def document(self) -> CompareDocument | None:
        """The result as one value (``report_value.CompareDocument``), what the CLI prints and saves: the
        sealed comparison's document with the ``fix_fp16`` block last; None without a measurement."""
        if self.report is None:
            return None
        doc = self.report.seal().document()  # sealed: the budget spent fixed once, it reads no clock
        return replace(doc, blocks={**doc.blocks, "fix_fp16": self.search_json()})

    def to_json(self) -> dict[str, Any]:
        doc = self.document()
        return doc.to_json() if doc is not None else {"schema": None, "comparisons": [], "fix_fp16": self.search_json()}


@dataclass(frozen=True)
class Reference:
    """The FP32 engine's outputs on the inputs the search judges with, and those inputs in batches."""

    outputs: Mapping[str, np.ndarray]
    batches: Sequence[Mapping[str, np.ndarray]]
    samples: int | None  # the user's sample count (outputs trimmed to it); None for one random batch
    inputs: str


def reference_outputs(record: Any, batch_size: int, data: Any, shapes: Mapping[str, tuple[int, ...]] | None,
                      seed: int) -> Reference:
    from .accuracy import run_outputs
    from ..measure.bench import load_runner
    from ..model.inputs import make_inputs, resolve_shapes
    from ..model.user_inputs import run_all

    runner = load_runner(record)
    try:
        if data is not None:
            data.check(runner.inputs, model_path=record.model_path)
            dtypes = {t.name: np.dtype(t.dtype) for t in runner.inputs}
            return Reference(run_all(runner, data, batch_size), list(data.batches(batch_size, dtypes)), data.samples,
                             data.describe())
        overrides = {**record.spec.shape_overrides(), **(shapes or {})}
        feeds = make_inputs(runner.inputs, resolve_shapes(runner.inputs, batch_size, overrides,
                                                          model_path=record.model_path), seed=seed)
        return Reference(run_outputs(runner, feeds), [feeds], None, f"random inputs (seed {seed})")
    finally:
        runner.close()


def keep_option(nodes: Sequence[str]) -> str | None:
    """The ``layer_precisions`` build option keeping ``nodes`` in FP32 (None: nothing kept)."""
    return ",".join(f"{n}:fp32" for n in nodes) or None


def fix_fp16(path: Any, batch_size: int, options: Any, settings: Any = None, *,
             max_builds: int = DEFAULT_MAX_BUILDS, on_trial: Callable[[Trial], None] | None = None,
             on_search_done: Callable[["Fix"], None] | None = None) -> Fix:
    """Search a keep-list for the user's model file ``path`` (ONNX or TensorFlow: read once, ``open_model``;
    every build and evaluation takes that ``OnnxModel``) meeting ``options.accuracy_budget`` (accuracy.AccuracyBudget) on the user's inputs
    (``options.data``, else random inputs of ``options.seed`` with ``options.shapes``), build it, and compare it
    with FP32 under ``options`` (compare.options.CompareOptions: ``compare_records``' speedup, CI, verdicts).
    ``settings`` (builder.pipeline.BuildSettings): where and with which backend the engines are built; the shapes
    and the user's inputs travel in ``options`` alone (one carrier), so ``settings`` must not set them.
    ``on_search_done`` gets the search's ``Fix`` (no comparison yet) as soon as the search ends, before the
    measurement: a keep-list found in minutes is shown, and kept, whatever happens to the measurement (issue 36)."""
    from pathlib import Path

    from ..convert import fp16range
    from ..measure.bench import effective_precision, load_runner
    from ..builder.pipeline import BuildSettings, build_model_engines, open_model
    from ..spec import Precision
    from ..model.user_inputs import run_all

    budget, data, shapes, seed = options.accuracy_budget, options.data, options.shapes, options.seed
    settings = settings if settings is not None else BuildSettings()
    if budget is None:
        raise ValueError("fix_fp16: options.accuracy_budget is the budget the keep-list must meet; none given")
    if settings.shapes is not None or settings.data is not None:
        raise ValueError("fix_fp16: the shapes and the user's inputs travel in options, not in settings")
    engines_dir = settings.engines_dir
    common = replace(settings, shapes=shapes, engines_dir=Path(engines_dir), range_check=False, data=data)
    precisions = [Precision.FP32, Precision.FP16]
    model = open_model(path, precisions, common)  # the user's file read once (a TensorFlow model: its conversion)
    base, plain = (o.record for o in build_model_engines(model, precisions, [batch_size], common))
    proto = model.proto
    ref = reference_outputs(base, batch_size, data, shapes, seed)
    evaluation = EMULATED if effective_precision(plain) in fp16range.NOT_FP16 else ENGINE

    def evaluate(keep: Sequence[str]) -> tuple[dict[str, Any], Any]:
        if evaluation == EMULATED:
            outputs = emulated_outputs(proto, keep, ref.batches, ref.samples, batch_size)
        else:
            [trial] = build_model_engines(model, [Precision.FP16], [batch_size],
                                          replace(common, options={"layer_precisions": keep_option(keep)}))
            runner = load_runner(trial.record)
            try:
                outputs = run_all(runner, data, batch_size) if data is not None else \
                    {k: np.asarray(v) for k, v in runner.infer(ref.batches[0]).items()}
            finally:
                runner.close()
        return judge_outputs(ref.outputs, outputs, budget, ref.inputs)

    feeds = fp16range.sample_batches(data, base.inputs, batch_size) if data is not None else ref.batches[0]
    analysis = fp16range.analyze_safely(proto, feeds, inputs=ref.inputs)
    seed_nodes = analysis.open_nodes if not analysis.suggestion_error else []
    nodes = candidate_nodes(proto)
    search = Search(budget=budget.text, evaluation=evaluation, inputs=ref.inputs, nodes=len(nodes),
                    max_builds=max_builds, model=str(path))
    search_keep_list(evaluate, nodes, seed_nodes, search, on_trial)
    if on_search_done is not None:
        on_search_done(Fix(search, None, analysis))
    if search.keep is None:
        return Fix(search, None, analysis)
    return Fix(search, measure_fix(model, base, search, batch_size, options, common), analysis)


def measure_fix(model: Any, base: Any, search: Search, batch_size: int, options: Any, common: Any) -> Any:
    """Build the keep-list found (with its range analysis) from ``model`` (onnx_model.OnnxModel, read once)
    and compare it with FP32 under ``options`` (compare.options.CompareOptions): the speed cost of the fix,
    with the same CI and verdicts as ``trtprof compare``."""
    from .core import compare_records
    from ..builder.pipeline import build_model_engines
    from ..spec import Precision

    build_options = {"layer_precisions": keep_option(search.keep or ())}
    [fixed] = build_model_engines(model, [Precision.FP16], [batch_size],
                                  replace(common, options=build_options, range_check=True))
    return compare_records({"fp32": base, "fp16": fixed.record}, [batch_size], options, model=model)
