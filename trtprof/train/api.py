"""``train_compare``: MODEL → the right trainer (PyTorch for ONNX, TensorFlow for Keras) → JSON."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from .. import compare as cmp
from ..errors import BadInput, BadModel
from .run import TrainOptions, compare_training

KERAS_SUFFIXES = (".keras", ".h5", ".hdf5")


def is_keras(path: Path) -> bool:
    return path.suffix.lower() in KERAS_SUFFIXES


def train_compare(
    model: Any,
    precisions: str | None,
    batch_sizes: Sequence[int],
    plan: cmp.RoundPlan,
    options: TrainOptions = TrainOptions(),
    *,
    device: str = "auto",
    shapes: Mapping[str, tuple[int, ...]] | None = None,
    on_batch: Callable[[int, cmp.InterleavedOutcome], None] | None = None,
    on_arm: Callable[[int, str, Any], None] | None = None,
) -> dict[str, Any]:
    from ..inputs import make_inputs, resolve_shapes

    path = Path(model)
    if not path.exists():
        raise BadModel("no such file", path=path)
    trainer: Any
    if is_keras(path):
        from .keras import KerasTrainer, parse_keras_arms

        trainer = KerasTrainer(path, optimizer=options.optimizer, loss=options.loss, seed=options.seed)
        arms = parse_keras_arms(precisions)
        if options.find_max_batch:
            raise BadInput("--find-max-batch: only for ONNX models on the PyTorch backend")
    elif path.is_dir():
        raise BadModel("train-compare takes an ONNX file or a Keras .keras/.h5 file (a SavedModel has no training "
                       "graph to rebuild; save the model with model.save('model.keras'))", path=path)
    else:
        from .pytorch import TorchTrainer
        from .step import parse_arms, resolve_device

        dev = resolve_device(device)
        arms = parse_arms(precisions, dev)
        if options.find_max_batch and dev != "cuda":
            raise BadInput("--find-max-batch needs a GPU (it searches GPU memory)")
        trainer = TorchTrainer(path, device=dev, optimizer=options.optimizer, loss=options.loss, seed=options.seed)
    overrides = dict(shapes or {})

    def shapes_for(batch: int) -> Mapping[str, tuple[int, ...]]:
        return resolve_shapes(trainer.inputs, batch, overrides, model_path=str(path))

    def make_feeds(s: Mapping[str, tuple[int, ...]]) -> Mapping[str, Any]:
        return make_inputs(trainer.inputs, s, seed=options.seed)

    return compare_training(trainer, arms, batch_sizes, plan, options, model_name=path.stem, shapes_for=shapes_for,
                            make_feeds=make_feeds, on_batch=on_batch, on_arm=on_arm)
