"""A/B of two models whose inputs differ only in name: the second built from a copy that takes the
first's input names (issue 34: "A/B pairs outputs (and inputs) by position").

Why a copy and not a renaming runner: every path that feeds an arm (the worker processes, the in-process
loads, the accuracy pass, the GPU loop's bound buffers) keys its inputs by the baseline's names; a copy
whose graph inputs carry those names computes exactly what the original does (only names change) and
needs none of them to know. The copy and its engines live in the what-if area (``whatif.whatif_dir``),
apart from the user's engines, like any changed model.

Paired only when it is safe: the same number of inputs, in order of the same dtype and rank with equal
static dims, and none of the new names already used inside the second graph (a clash would rewire it).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

# the folder of the renamed copies inside the what-if area
RENAMED_DIR = "renamed-inputs"


def inputs_by_position(a: Any, b: Any) -> dict[str, str]:
    """{b's input name: a's} when the names differ but the inputs match one to one in order (dtype,
    rank, static dims); {} when the names already match (as sets) or the inputs do not pair."""
    ai, bi = list(a.inputs), list(b.inputs)
    if {t.name for t in ai} == {t.name for t in bi} or len(ai) != len(bi) or not ai:
        return {}
    for ta, tb in zip(ai, bi):
        if ta.dtype != tb.dtype or len(ta.shape) != len(tb.shape):
            return {}
        if any(isinstance(x, int) and isinstance(y, int) and x > 0 and y > 0 and x != y
               for x, y in zip(ta.shape, tb.shape)):
            return {}
    return {tb.name: ta.name for ta, tb in zip(ai, bi) if tb.name != ta.name}


def graph_names(graph: Any) -> set[str]:
    """Every tensor name a graph (and its subgraphs) defines or reads."""
    names = {v.name for v in [*graph.input, *graph.output, *graph.value_info]}
    names |= {t.name for t in graph.initializer}
    for node in graph.node:
        names |= set(node.input) | set(node.output)
        for attr in node.attribute:
            for sub in ([attr.g] if attr.HasField("g") else []) + list(attr.graphs):
                names |= graph_names(sub)
    return names


def rename(graph: Any, mapping: dict[str, str]) -> None:
    """Rename tensors in place: graph inputs, outputs, value infos and every node's inputs, subgraphs
    included (an If or Loop body reads outer-scope names)."""
    for v in [*graph.input, *graph.output, *graph.value_info]:
        if v.name in mapping:
            v.name = mapping[v.name]
    for node in graph.node:
        for i, name in enumerate(node.input):
            if name in mapping:
                node.input[i] = mapping[name]
        for attr in node.attribute:
            subs = ([attr.g] if attr.HasField("g") else []) + list(attr.graphs)
            for sub in subs:
                rename(sub, mapping)


def renamed_copy(model: Any, mapping: dict[str, str], out: Path) -> Any:
    """``model`` (an ``OnnxModel``, or a file read once here) with its inputs renamed by ``mapping``: a
    copy of its graph written to ``out`` and returned as the ``OnnxModel`` that made it (``OnnxModel.save``:
    not read back); None when a new name is already a tensor of the graph (renaming would join two tensors)."""
    from ..model.onnx_model import OnnxModel, as_model

    source = as_model(model)
    assert source is not None
    used = graph_names(source.proto.graph) - set(mapping)
    if any(new in used for new in mapping.values()):
        return None
    proto = source.copy_proto()  # the arm's graph stays as it was read
    rename(proto.graph, mapping)
    return OnnxModel.save(proto, out)


def pair_inputs(arms: Sequence[Any], area: Path, describe: Any) -> tuple[list[Any], list[str]]:
    """The arms with each one whose inputs pair by position with the baseline's replaced by its renamed
    copy (written in ``area`` from the arm's model, ``loaded`` when it carries one; the copy is the arm's
    ``loaded`` from then on, built from it, not read back), and one line per such arm saying what was paired.
    ``describe(arm)``: its model's inputs and outputs (``ab.arm_io``), None for what is not an ONNX file (left
    as it is)."""
    from dataclasses import replace

    arms = list(arms)
    base = describe(arms[0]) if arms and not arms[0].options else None
    if base is None:
        return arms, []
    lines = []
    for k, arm in enumerate(arms[1:], start=1):
        info = describe(arm) if not arm.options else None
        mapping = inputs_by_position(base, info) if info is not None else {}
        if not mapping:
            continue
        source = arm.loaded if arm.loaded is not None else arm.model  # the arm's model, read once
        copy = renamed_copy(source, mapping, Path(area) / RENAMED_DIR / Path(arm.model).name)
        if copy is None:
            continue  # the names clash: the check that follows refuses the pair, naming the inputs
        arms[k] = replace(arm, model=copy.path, engines_dir=Path(area), loaded=copy)
        lines.append(f"inputs paired by position ({arm.label} → {arms[0].label}): "
                     + ", ".join(f"{b} ↔ {a}" for b, a in mapping.items())
                     + f" (the names differ; dtypes and shapes match; {arm.label} is built from a copy with "
                       f"{arms[0].label}'s input names: {copy.path})")
    return arms, lines
