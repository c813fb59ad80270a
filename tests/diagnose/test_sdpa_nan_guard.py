"""The ``sdpa_nan_guard`` finding: from the compare's graph facts (``layers.graph.node_facts`` of a generated
attention graph), on fp16/bf16 comparisons only, silent without the guard."""
from __future__ import annotations

import pytest

from trtprof.diagnose import rules as dg
from trtprof.diagnose.layer_rules import NAN_GUARD_MIN, sdpa_nan_guard
from trtprof.layers.graph import node_facts

from ..layers.test_nan_guard import SHAPES, attention_model
from .test_diagnose import crafted


def facts(layers: int = 2, guard: str = "exact"):
    return node_facts(attention_model(layers, guard=guard), SHAPES)


def test_the_finding_counts_the_guards_and_names_the_way_out():
    f = sdpa_nan_guard(facts(2), "fp16", "torch")
    assert f is not None and f.rule == "sdpa_nan_guard" and f.evidence["guards"] == 2
    assert "2 Softmax outputs pass through IsNaN + Where (e.g. softmax0 → where0)" in f.message
    assert 'attn_implementation="eager"' in f.message and "timm: fused attention off" in f.message
    assert "BERT-base fp16 13 % slower on an H200" in f.message
    assert f.evidence["where_to_softmax"] == {"where0": "softmax0", "where1": "softmax1"}
    assert "ort-fusions" not in f.message  # a torch engine: the ONNX Runtime what-if is not its way out


def test_the_threshold_one_guard_speaks_none_is_silent():
    assert NAN_GUARD_MIN == 1
    one = sdpa_nan_guard(facts(1), "fp16")
    assert one is not None and one.evidence["guards"] == 1 and "1 Softmax output passes through" in one.message
    assert sdpa_nan_guard(facts(1, guard="none"), "fp16") is None


@pytest.mark.parametrize("guard", ["none", "not_softmax", "other_branch", "swapped"])
def test_silent_without_the_pattern(guard):
    assert sdpa_nan_guard(facts(2, guard), "fp16") is None


def test_only_on_half_precision_candidates():
    assert sdpa_nan_guard(facts(2), "bf16") is not None
    for precision in ("tf32", "fp32", "int8"):
        assert sdpa_nan_guard(facts(2), precision) is None
    assert sdpa_nan_guard(None, "fp16") is None and sdpa_nan_guard({}, "fp16") is None


@pytest.mark.parametrize("backend", ["onnxruntime", "onnxruntime-cuda"])
def test_onnxruntime_engines_get_the_fusion_what_if(backend):
    f = sdpa_nan_guard(facts(2), "fp16", backend)
    assert f is not None and "`--what-if ort-fusions`" in f.message


def test_diagnose_carries_it_from_the_pair_evidence():
    graph = facts(2)
    base, cand = crafted("fp32", compute_ms=2.0), crafted("fp16", compute_ms=1.0)
    found = {f.rule: f for f in dg.diagnose(base, cand, dg.PairEvidence(graph=graph, device_kind="cuda"))}
    assert found["sdpa_nan_guard"].evidence["guards"] == 2
    tf32 = crafted("tf32", compute_ms=1.5)
    assert "sdpa_nan_guard" not in {f.rule for f in dg.diagnose(base, tf32, dg.PairEvidence(graph=graph))}
    assert "sdpa_nan_guard" not in {f.rule for f in dg.diagnose(base, cand, dg.PairEvidence())}
