"""``train_compare``: MODEL → the right trainer → JSON. MODEL is a module factory (``file.py:make``,
``package.module:make``: the user's own ``nn.Module``, PyTorch), an ONNX file (rebuilt by onnx2torch,
PyTorch) or a Keras ``.keras``/``.h5`` file (TensorFlow)."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, Sequence

from ..errors import BadInput, BadModel
from ..measure.interleave import RoundPlan
from .run import TrainHooks, TrainOptions, TrainWorkload, compare_training

KERAS_SUFFIXES = (".keras", ".h5", ".hdf5")


def is_keras(path: Path) -> bool:
    return path.suffix.lower() in KERAS_SUFFIXES


def train_compare(model: Any, precisions: str | None, batch_sizes: Sequence[int] | None, plan: RoundPlan,
                  options: TrainOptions = TrainOptions(), hooks: TrainHooks = TrainHooks()) -> dict[str, Any]:
    """``options.data`` (user_inputs.InputData, ``--inputs``): its first batch instead of random inputs, for the
    timed steps and the loss comparison alike (labels stay seeded)."""
    from ..model.inputs import make_inputs, resolve_shapes

    trainer, arms, name = _trainer(model, precisions, options)
    # not given: a factory's example batch (what the user's own code runs), else 1
    sizes = tuple(batch_sizes or ())
    if not sizes:
        sizes = ((getattr(trainer, "source", None) or {}).get("example_batch") or 1,)

    data = options.data
    overrides = dict(options.shapes or {})
    if data is not None:
        data.check(trainer.inputs, model_path=str(model))
        overrides.update(data.shape_overrides())

    def shapes_for(batch: int) -> Mapping[str, tuple[int, ...]]:
        return resolve_shapes(trainer.inputs, batch, overrides, model_path=str(model))

    def make_feeds(s: Mapping[str, tuple[int, ...]]) -> Mapping[str, Any]:
        return make_inputs(trainer.inputs, s, seed=options.seed, data=data)

    result = compare_training(trainer, arms, plan, options, TrainWorkload(name, sizes, shapes_for, make_feeds), hooks)
    result.setdefault("settings", {})["inputs"] = f"{data.describe()}, first batch" if data is not None else \
        f"random inputs (seed {options.seed})"
    return result


def _trainer(model: Any, precisions: str | None, options: TrainOptions) -> tuple[Any, list[Any], str]:
    """The trainer for MODEL (a module factory, a Keras file or an ONNX file), its arms and its name."""
    from .factory import FactorySpec

    spec = None if Path(str(model)).exists() else FactorySpec.parse(str(model))
    path = Path(str(model))
    trainer: Any
    if spec is not None:
        trainer, arms = _factory_trainer(spec, precisions, options, options.device, dict(options.shapes or {}))
        name = spec.function if spec.function not in ("make", "model") else Path(spec.module).stem.split(".")[-1]
        return trainer, arms, name
    if not path.exists():
        raise BadModel("no such file (or a factory spec: path/to/file.py:FUNCTION or package.module:FUNCTION)", path=path)
    if is_keras(path):
        from .keras import KerasTrainer, parse_keras_arms

        trainer = KerasTrainer(path, optimizer=options.optimizer, loss=options.loss, seed=options.seed)
        arms = parse_keras_arms(precisions)
        if options.find_max_batch:
            raise BadInput("--find-max-batch: only for PyTorch models (a module factory or ONNX)")
        return trainer, arms, path.stem
    if path.is_dir():
        raise BadModel("train-compare takes a module factory (file.py:make), an ONNX file or a Keras .keras/.h5 file "
                       "(a SavedModel has no training graph to rebuild; save the model with model.save('model.keras'))",
                       path=path)
    from .pytorch import TorchTrainer

    dev, arms = _torch_arms(precisions, options, options.device)
    trainer = TorchTrainer.from_onnx(path, device=dev, options=options)
    return trainer, arms, path.stem


def _torch_arms(precisions: str | None, options: TrainOptions, device: str) -> tuple[str, list[Any]]:
    from .step import parse_arms, resolve_device

    dev = resolve_device(device)
    arms = parse_arms(precisions, dev)
    if options.find_max_batch and dev != "cuda":
        raise BadInput("--find-max-batch needs a GPU (it searches GPU memory)")
    return dev, arms


def _factory_trainer(spec: Any, precisions: str | None, options: TrainOptions, device: str,
                     shapes: dict[str, tuple[int, ...]]) -> tuple[Any, list[Any]]:
    """Arms first (a bad --precisions is refused before the user's code runs), then the factory."""
    from .factory import load_factory
    from .pytorch import TorchTrainer

    dev, arms = _torch_arms(precisions, options, device)
    user = load_factory(spec, shapes)
    trainer = TorchTrainer.from_factory(user, spec.text, device=dev, options=options)
    return trainer, arms

