"""train-compare on a Keras model (TensorFlow, CPU): the mixed policy is really applied, loss scaling
counts skipped steps, losses stay finite, and a verdict comes out of compare's statistics."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

pytestmark = pytest.mark.tf


@pytest.fixture(scope="module")
def keras_net(tmp_path_factory) -> Path:
    """The report's net in miniature, written as the report writes it: Conv2D(3, k, 2, 'same',
    activation='elu') with growing kernel sizes (16×16×3 input, so it runs in a second on a CPU)."""
    pytest.importorskip("tensorflow")
    import keras

    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((16, 16, 3))] +
                             [keras.layers.Conv2D(3, k, 2, "same", activation="elu") for k in (4, 8)])
    path = tmp_path_factory.mktemp("keras") / "report_small.keras"
    model.save(path)
    return path


def test_keras_mixed_float16_verdict_on_cpu(keras_net):
    from trtprof.measure.interleave import RoundPlan
    from trtprof.stats.speedup import verdict
    from trtprof.train.api import train_compare
    from trtprof.train.run import MAX_CI_RATIO, NOT_MEASURABLE, TrainOptions

    plan = RoundPlan(time_budget_s=0.3, round_iterations=3, first_warmup=2, first_warmup_ms=0)
    data = train_compare(keras_net, "fp32,amp-fp16", (4,), plan, TrainOptions(steps=4, device="cpu"))
    assert data["backend"] == "keras-train"
    c = data["comparisons"][0]
    s = c["speedup"]
    wide = s["ci_high"] / s["ci_low"] > MAX_CI_RATIO  # a loaded CPU: "not measurable here", not a speedup
    assert c["verdict"] == (NOT_MEASURABLE if wide else verdict(s["ci_low"], s["ci_high"]))
    assert s["ci_low"] <= s["estimate"] <= s["ci_high"]
    arms = data["batches"][0]["arms"]
    assert arms["fp32"]["framework"]["layers_computing_in_half"] == 0
    fp16 = arms["amp-fp16"]
    assert fp16["framework"]["policy"] == "mixed_float16"
    assert fp16["framework"]["layers_computing_in_half"] == fp16["framework"]["layers_with_weights"] == 2
    assert fp16["all_finite"] and fp16["skipped_steps"] is not None and fp16["framework"]["loss_scale"] > 0
    # same start: the first loss of both arms is the same model on the same data (FP16 rounding apart)
    assert abs(fp16["loss_first"] - arms["fp32"]["loss_first"]) < 0.02 * abs(arms["fp32"]["loss_first"])
    assert fp16["loss_last"] != fp16["loss_first"]  # it trained
    rules = {f["rule"] for f in c["diagnosis"]}
    assert {"keras_policy", "loss_scaling", "cpu_only"} <= rules


def test_keras_cli_and_refusals(keras_net, tmp_path, capsys):
    from trtprof.cli import main

    out = tmp_path / "k.json"
    rc = main(["train-compare", str(keras_net), "--precisions", "fp32,amp-bf16", "--batch-sizes", "2",
               "--budget", "0.2", "--round-iterations", "2", "--steps", "2", "--out", str(out), "--optimizer", "sgd"])
    assert rc == 0 and json.loads(out.read_text())["comparisons"][0]["candidate"] == "amp-bf16"
    capsys.readouterr()
    rc = main(["train-compare", str(keras_net), "--precisions", "fp32,tf32", "--out", str(tmp_path / "x.json")])
    err = capsys.readouterr().err
    assert rc == 2 and "tf32" in err and "Traceback" not in err
