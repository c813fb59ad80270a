"""The TensorFlow/Keras side of ``train-compare``: a .keras/.h5 model rebuilt per arm under a Keras
mixed-precision policy, trained with the same loss and optimizer, timed by the same interleaved loop.

Arms: ``fp32`` (policy float32), ``amp-fp16`` (``mixed_float16``, the optimizer wrapped in
``LossScaleOptimizer``: dynamic loss scaling, the Keras counterpart of GradScaler), ``amp-bf16``
(``mixed_bfloat16``, no loss scaling). Each arm is a clone of the model whose every layer gets the
arm's policy, with the original weights copied in, so every arm starts from the same weights.

The step is a ``tf.function`` (GradientTape: forward, FP32 loss on the output cast to float32,
gradients, ``apply_gradients``), timed on the host clock around a call that reads the loss back
(which waits for the device). Verified on a CPU only (policy applied, loss finite, verdict produced);
on a GPU the same code runs but its speed has not been verified here.
"""
from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator, Mapping

import numpy as np

from ..errors import BadInput, BadModel, MissingDependency, UnsupportedPrecision
from ..spec import TensorSpec
from .run import ArmRun, Trainer
from .step import ADAM_LR, ARMS, LOSS_OUTPUT, SGD_LR, SGD_MOMENTUM, TrainArm

KERAS_ARMS: dict[str, tuple[TrainArm, str]] = {  # the PyTorch arms, each with its Keras dtype policy
    "fp32": (ARMS["fp32"], "float32"),
    "amp-fp16": (ARMS["amp-fp16"], "mixed_float16"),
    "amp-bf16": (ARMS["amp-bf16"], "mixed_bfloat16"),
}
DEFAULT_KERAS_ARMS = ("fp32", "amp-fp16", "amp-bf16")


def parse_keras_arms(text: str | None) -> list[TrainArm]:
    names = list(DEFAULT_KERAS_ARMS) if text is None else list(
        dict.fromkeys(t.strip().lower() for t in text.split(",") if t.strip()))
    if "tf32" in names:
        raise UnsupportedPrecision("--precisions: tf32 is offered for the PyTorch backend only (TF's switch is global)")
    unknown = [n for n in names if n not in KERAS_ARMS]
    if unknown:
        raise BadInput(f"--precisions: unknown {', '.join(unknown)} for a Keras model (choose from {', '.join(KERAS_ARMS)})")
    if len(names) < 2:
        raise BadInput(f"--precisions {text!r}: give a baseline and at least one candidate, e.g. fp32,amp-fp16")
    return [KERAS_ARMS[n][0] for n in names]


def _import_keras() -> tuple[Any, Any]:
    try:
        from ..convert.tf.routes import quiet_logs

        with quiet_logs():
            import tensorflow as tf
            import keras
    except ImportError as err:
        raise MissingDependency("tensorflow", "tf", why="trains Keras models") from err
    return tf, keras


@contextmanager
def _policy(keras: Any, name: str) -> Iterator[None]:
    previous = keras.config.dtype_policy()
    keras.config.set_dtype_policy(name)
    try:
        yield
    finally:
        keras.config.set_dtype_policy(previous)


class KerasTrainStep:
    """Runner: one call = one Keras training step of this arm's clone (host clock)."""

    device = "cpu"  # timed on the host clock: the call returns after the loss is read back

    def __init__(self, trainer: "KerasTrainer", arm: TrainArm) -> None:
        tf, keras = trainer.tf, trainer.keras
        self.tf = tf
        self.arm = arm
        self.inputs = trainer.inputs
        self.outputs = (LOSS_OUTPUT,)
        policy = KERAS_ARMS[arm.name][1]
        with _policy(keras, policy):
            def clone_layer(layer: Any) -> Any:
                config = layer.get_config()
                config["dtype"] = policy
                return layer.__class__.from_config(config)

            try:
                self.model = keras.models.clone_model(trainer.model, clone_function=clone_layer)
            except Exception as err:  # noqa: BLE001 - subclassed models and custom layers cannot be cloned
                raise BadModel(f"cannot rebuild the Keras model under {policy}: {str(err).splitlines()[0][:200]}",
                               path=trainer.path) from err
        self.model.set_weights(trainer.model.get_weights())
        if trainer.optimizer_name == "adam":
            opt = keras.optimizers.Adam(learning_rate=ADAM_LR)
        else:
            opt = keras.optimizers.SGD(learning_rate=SGD_LR, momentum=SGD_MOMENTUM)
        self.optimizer = keras.mixed_precision.LossScaleOptimizer(opt) if arm.grad_scaler else opt
        self.layer_dtypes = {layer.name: str(getattr(layer, "compute_dtype", "?")) for layer in self.model.layers
                             if layer.trainable_weights}
        variables = self.model.trainable_variables
        model, optimizer, scaled = self.model, self.optimizer, arm.grad_scaler
        cross_entropy = trainer.loss_name == "cross-entropy"
        labels_for = trainer.labels_for

        @tf.function(reduce_retracing=True)
        def step(xs: Any, labels: Any) -> Any:
            with tf.GradientTape() as tape:
                y = model(xs, training=True)
                y = tf.cast(y[0] if isinstance(y, (list, tuple)) else y, tf.float32)
                if cross_entropy:
                    loss = tf.reduce_mean(tf.keras.losses.sparse_categorical_crossentropy(labels, y, from_logits=True))
                else:
                    loss = tf.reduce_mean(tf.abs(y - 1.0))  # the report's reduce_mean(|y - 1|)
                target = optimizer.scale_loss(loss) if scaled else loss
            grads = tape.gradient(target, variables)
            optimizer.apply_gradients(zip(grads, variables))
            return loss

        self._step = step
        self._labels_for = labels_for
        self._cache: tuple[tuple, list[Any], Any] | None = None

    def _tensors(self, feeds: Mapping[str, np.ndarray]) -> tuple[list[Any], Any]:
        key = tuple(id(feeds[t.name]) for t in self.inputs)
        if self._cache is None or self._cache[0] != key:
            xs = [self.tf.constant(feeds[t.name]) for t in self.inputs]
            self._cache = (key, xs, self._labels_for(self.model, feeds))
        return self._cache[1], self._cache[2]

    @property
    def loss_scale(self) -> float | None:
        if not self.arm.grad_scaler or not self.optimizer.built:
            return None
        return float(self.optimizer.dynamic_scale.numpy())

    def infer(self, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        xs, labels = self._tensors(feeds)
        loss = self._step(xs if len(xs) > 1 else xs[0], labels)
        return {"loss": np.array([float(loss.numpy())], dtype=np.float32)}

    def close(self) -> None:
        self._cache = None
        self.model = None


class KerasTrainer(Trainer):
    framework = "keras"
    device = "cpu"

    def __init__(self, path: Path, *, optimizer: str, loss: str, seed: int) -> None:
        self.tf, self.keras = _import_keras()
        self.path = Path(path)
        try:
            self.model = self.keras.models.load_model(str(self.path), compile=False)
        except Exception as err:  # noqa: BLE001 - Keras raises ValueError, OSError, … for unreadable files
            raise BadModel(f"not a loadable Keras model ({type(err).__name__}: {str(err).splitlines()[0][:200]})",
                           path=self.path) from err
        self.optimizer_name, self.loss_name, self.seed = optimizer, loss, seed
        self.inputs = tuple(TensorSpec(name=t.name, dtype=str(t.dtype.name if hasattr(t.dtype, "name") else t.dtype),
                                       shape=tuple(None if d is None else int(d) for d in t.shape))
                            for t in self.model.inputs)
        self.device = "cuda" if self.tf.config.list_physical_devices("GPU") else "cpu"

    def labels_for(self, model: Any, feeds: Mapping[str, np.ndarray]) -> Any:
        if self.loss_name != "cross-entropy":
            return self.tf.zeros((), self.tf.int64)
        shape = tuple(int(d) if d is not None else 0 for d in model.outputs[0].shape)
        if len(shape) != 2:
            raise BadInput(f"--loss cross-entropy needs logits [batch, classes]; the model's output is {list(shape)}")
        batch = int(next(iter(feeds.values())).shape[0])
        return self.tf.constant(np.random.default_rng(self.seed).integers(0, shape[1], size=batch))

    def make_runner(self, arm: TrainArm) -> KerasTrainStep:
        return KerasTrainStep(self, arm)

    def solo(self, arm: TrainArm, runner: KerasTrainStep, feeds: Mapping[str, np.ndarray], steps: int,
             reasons: bool) -> ArmRun:
        losses: list[float] = []
        skipped = 0 if arm.grad_scaler else None
        for _ in range(steps):
            scale = runner.loss_scale
            losses.append(float(runner.infer(feeds)["loss"][0]))
            after = runner.loss_scale
            if scale is not None and after is not None and after < scale:
                skipped = (skipped or 0) + 1
        low = [n for n, d in runner.layer_dtypes.items() if d in ("float16", "bfloat16")]
        extra = {"policy": KERAS_ARMS[arm.name][1], "layers_with_weights": len(runner.layer_dtypes),
                 "layers_computing_in_half": len(low), "layer_compute_dtypes": runner.layer_dtypes,
                 "loss_scale": runner.loss_scale}
        return ArmRun(losses=losses, skipped_steps=skipped, memory=None, profile=None, extra=extra)

    def findings(self, base: ArmRun, cand: ArmRun, *, peer: tuple[ArmRun, float] | None, steps: int,
                 timed_ms: float | None = None) -> list[Any]:
        from ..diagnose.findings import Finding

        out = []
        ex = cand.extra or {}
        if ex:
            out.append(Finding("keras_policy",
                               f"{ex['policy']}: {ex['layers_computing_in_half']} of {ex['layers_with_weights']} layers "
                               "with weights compute in half precision (variables stay float32)",
                               {k: ex[k] for k in ("policy", "layers_computing_in_half", "layers_with_weights",
                                                   "layer_compute_dtypes")}))
        if cand.skipped_steps is not None:
            out.append(Finding("loss_scaling", f"LossScaleOptimizer: {cand.skipped_steps} of {steps} steps skipped "
                               f"(non-finite gradients); loss scale now {ex.get('loss_scale')}",
                               {"skipped_steps": cand.skipped_steps, "steps": steps, "loss_scale": ex.get("loss_scale")}))
        if self.device == "cpu":
            out.append(Finding("cpu_only", "measured on a CPU: a correctness run; speed claims need a GPU", {}))
        else:
            out.append(Finding("unverified_gpu", "Keras training speed on a GPU is not verified by trtprof's tests", {}))
        return out

    def environment(self) -> dict[str, Any]:
        return {"framework": "keras", "tensorflow": self.tf.__version__, "keras": self.keras.__version__,
                "device": self.device, "clock": "perf_counter_ns around a step that reads the loss back"}
