"""compare's accuracy pass by load 0's worker (issue 33) gives the verdict the in-parent pass gave.

Real engines on ONNX Runtime (CPU), fp32 baseline and fp16 candidate: the old path (every engine loaded
in this process: ``load_reference`` without a pool, as ``--in-process`` still runs it) and the new one
(load 0's worker computes the outputs; this process loads no engine) must see the same feeds, the
same reference arm and the same metrics, so the same numbers and the same verdict.
"""
from __future__ import annotations

import numpy as np
import pytest

from trtprof.compare import core as cmp
from trtprof.measure import bench, interleave, workers

pytest.importorskip("onnxruntime")

TINY = interleave.RoundPlan(time_budget_s=0.0, round_iterations=5, min_loads=2, min_rounds=2)


def untimed(data):
    """A JSON dict without the seconds the range analysis took (the one field that is a timing)."""
    if isinstance(data, dict):
        return {k: untimed(v) for k, v in data.items() if k != "seconds"}
    return [untimed(v) for v in data] if isinstance(data, list) else data


@pytest.fixture
def arms(conv_model, tmp_path):
    from trtprof.builder.pipeline import BuildSettings, build_engines
    from trtprof.spec import Precision

    built = build_engines(conv_model, [Precision.FP32, Precision.FP16], [1, 4],
                          settings=BuildSettings(engines_dir=tmp_path / "e", backend="onnxruntime"))
    return {o.record.precision: o.record for o in built}, built[0].model


def test_the_workers_reference_is_the_parents(arms):
    records, model = arms
    options = cmp.CompareOptions(plan=TINY, seed=3)
    old = cmp.load_reference(records, [1, 4], options, model, None)
    pool = workers.WorkerPool(records, planned=2)
    try:
        pool.spawn(2)
        new = cmp.load_reference(records, [1, 4], options, model, pool)
    finally:
        pool.close()
    assert new.shapes == old.shapes and new.devices == old.devices and new.autotune == old.autotune
    assert new.fp16_range is not None and untimed(new.fp16_range.to_json()) == untimed(old.fp16_range.to_json())
    for batch in (1, 4):
        assert set(new.outputs[batch]) == {"fp32", "fp16"}
        for arm, outputs in old.outputs[batch].items():
            assert set(new.outputs[batch][arm]) == set(outputs)
            for name, value in outputs.items():
                np.testing.assert_array_equal(new.outputs[batch][arm][name], value)
        assert set(new.memory[batch]) == {"fp32", "fp16"}
    work = [r["what"] for r in pool.concurrent["work"]]
    assert "the accuracy pass (load 0's worker)" in work and "the FP16 range analysis (this process)" in work


def test_compare_gives_the_same_accuracy_verdict_with_and_without_workers(arms, monkeypatch):
    """The whole compare, once in-process (the old pass) and once with workers (the new one): every
    candidate's accuracy JSON (metrics, FP16 range prediction, verdict) is the same; and with workers
    this process loaded no engine before measuring (each load is a worker's)."""
    records, model = arms
    loaded = []
    real = bench.load_runner
    monkeypatch.setattr(bench, "load_runner", lambda record, *a, **k: loaded.append(record.precision) or real(record, *a, **k))
    reports = {}
    for isolation in (cmp.ISOLATION_IN_PROCESS, cmp.ISOLATION_PROCESS):
        loaded.clear()
        reports[isolation] = cmp.compare_records(records, [1, 4], cmp.CompareOptions(plan=TINY, isolation=isolation),
                                                 model=model).to_json()
        if isolation == cmp.ISOLATION_PROCESS:
            assert loaded == []  # the workers load their engines in their own processes
        else:
            assert loaded[:2] == ["fp32", "fp16"]  # the in-process pass: every engine here first
    old, new = (reports[i]["comparisons"] for i in (cmp.ISOLATION_IN_PROCESS, cmp.ISOLATION_PROCESS))
    assert [c["batch_size"] for c in old] == [c["batch_size"] for c in new] == [1, 4]
    for a, b in zip(old, new):
        assert untimed(a["accuracy"]) == untimed(b["accuracy"])
        assert a["accuracy"]["predicted"] is not None and a["accuracy"]["caveat"] == b["accuracy"]["caveat"]
        assert a["accuracy"]["verdict"]["verdict"] in ("OK", "DEGRADED", "BROKEN")
