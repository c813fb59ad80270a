"""The user's own PyTorch model for ``train-compare``: ``path/to/file.py:make`` or ``package.module:make``.

Why: a training benchmark should train what the user trains. An ONNX file is an inference export
(eval mode folds BatchNorm into the convolutions and drops Dropout), so the step rebuilt from it is
not the user's step; an ``nn.Module`` is. The factory is called once, with no arguments, and returns

* ``model`` — an ``nn.Module`` (its inputs then come from ``--shape NAME:D0xD1x…``, float32), or
* ``(model, example_inputs)`` — a tensor or a tuple/list of tensors; their shapes (batch dim replaced
  by each ``--batch-sizes`` entry) and dtypes define the inputs, or
* ``(model, example_inputs, loss_fn, optimizer_fn)`` — ``loss_fn(output) -> scalar tensor`` (called
  inside autocast, as the AMP recipe computes the loss) and ``optimizer_fn(params) -> Optimizer``;
  either may be None to keep the CLI's ``--loss`` / ``--optimizer``.

Inputs are trtprof's seeded random data of those shapes and dtypes (floats N(0, 1), integers in
``--int-range``-like [0, 100)), the same for every arm, as for ONNX models.
"""
from __future__ import annotations

import importlib
import importlib.util
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from ..errors import BadInput, BadModel
from ..spec import TensorSpec

# ``file.py:make`` or ``pkg.mod:make``: a module part and a Python identifier after the last colon.
_SPEC = re.compile(r"^(?P<module>.+?)(?P<py>\.py)?:(?P<func>[A-Za-z_][A-Za-z0-9_]*)$")
_DOTTED = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")


@dataclass(frozen=True)
class FactorySpec:
    text: str
    module: str  # a file path (``file``) or a dotted module name
    function: str
    file: bool

    @classmethod
    def parse(cls, text: str) -> "FactorySpec | None":
        """None when ``text`` is not a factory spec (then it is a model file path)."""
        m = _SPEC.match(str(text))
        if m is None:
            return None
        if m.group("py"):
            return cls(str(text), m.group("module") + ".py", m.group("func"), file=True)
        if _DOTTED.match(m.group("module")):
            return cls(str(text), m.group("module"), m.group("func"), file=False)
        return None

    @property
    def where(self) -> str:
        return f"{self.module}:{self.function}"


@dataclass
class UserModel:
    """What a factory gave, normalised."""

    module: Any
    inputs: tuple[TensorSpec, ...]
    example_batch: int | None
    loss_fn: Callable[[Any], Any] | None
    optimizer_fn: Callable[[Any], Any] | None
    form: str  # "model" | "model+inputs" | "model+inputs+loss+optimizer"

    def to_json(self) -> dict[str, Any]:
        return {"form": self.form, "inputs": [t.to_json() for t in self.inputs], "example_batch": self.example_batch,
                "loss": "factory's loss_fn" if self.loss_fn else None,
                "optimizer": "factory's optimizer_fn" if self.optimizer_fn else None,
                "module_class": type(self.module).__name__}


def _import(spec: FactorySpec) -> Any:
    if spec.file:
        path = Path(spec.module)
        if not path.is_file():
            raise BadModel("no such file (factory spec FILE.py:FUNCTION)", path=path)
        name = f"trtprof_user_factory_{abs(hash(str(path.resolve())))}"
        mod_spec = importlib.util.spec_from_file_location(name, path)
        if mod_spec is None or mod_spec.loader is None:
            raise BadModel("cannot be imported as a Python module", path=path)
        module = importlib.util.module_from_spec(mod_spec)
        sys.modules[name] = module
        sys.path.insert(0, str(path.resolve().parent))  # the file's own sibling imports work
        try:
            mod_spec.loader.exec_module(module)
        except SystemExit as err:  # sys.exit() at import must not end trtprof with its code and nothing done
            sys.modules.pop(name, None)
            raise BadModel(f"importing it called sys.exit({err.code!r}); a factory file must define functions",
                           path=path) from err
        except Exception as err:  # noqa: BLE001 - the user's code: any error is reported in one line
            sys.modules.pop(name, None)
            raise BadModel(f"importing it failed: {type(err).__name__}: {_first_line(err)}", path=path) from err
        finally:
            sys.path.remove(str(path.resolve().parent))
        return module
    try:
        return importlib.import_module(spec.module)
    except ModuleNotFoundError as err:
        raise BadModel(f"no module named {err.name!r} (factory spec package.module:FUNCTION)", path=spec.module) from err
    except Exception as err:  # noqa: BLE001 - the user's code
        raise BadModel(f"importing it failed: {type(err).__name__}: {_first_line(err)}", path=spec.module) from err


def _first_line(err: BaseException) -> str:
    text = str(err).strip().splitlines()
    return text[0][:200] if text else ""


def load_factory(spec: FactorySpec, shapes: dict[str, tuple[int, ...]] | None = None) -> UserModel:
    """Import, call and check the factory; every failure is one ``BadModel``/``BadInput`` line
    naming the file or module, the function and the cause."""
    from .step import import_torch

    torch = import_torch()
    module = _import(spec)
    fn = getattr(module, spec.function, None)
    if fn is None:
        raise BadModel(f"has no function {spec.function!r}", path=spec.module)
    if not callable(fn):
        raise BadModel(f"{spec.function} is a {type(fn).__name__}, not a function", path=spec.module)
    try:
        made = fn()
    except SystemExit as err:  # sys.exit(0) must not make train-compare exit 0 with nothing measured
        raise BadModel(f"{spec.function}() called sys.exit({err.code!r}) instead of returning a model",
                       path=spec.module) from err
    except Exception as err:  # noqa: BLE001 - the user's code
        raise BadModel(f"{spec.function}() failed: {type(err).__name__}: {_first_line(err)}", path=spec.module) from err
    return normalise(made, spec, torch, shapes or {})


def normalise(made: Any, spec: FactorySpec, torch: Any, shapes: dict[str, tuple[int, ...]]) -> UserModel:
    where = spec.where
    loss_fn = optimizer_fn = None
    if isinstance(made, torch.nn.Module):
        model, examples, form = made, None, "model"
    elif isinstance(made, (tuple, list)) and len(made) in (2, 4):
        model, examples = made[0], made[1]
        form = "model+inputs"
        if len(made) == 4:
            loss_fn, optimizer_fn = made[2], made[3]
            form = "model+inputs+loss+optimizer"
            for label, f in (("loss_fn", loss_fn), ("optimizer_fn", optimizer_fn)):
                if f is not None and not callable(f):
                    raise BadModel(f"{spec.function}() returned a {label} that is not callable "
                                   f"({type(f).__name__})", path=spec.module)
    else:
        kind = f"a {len(made)}-tuple" if isinstance(made, (tuple, list)) else f"a {type(made).__name__}"
        raise BadModel(f"{spec.function}() returned {kind}; expected an nn.Module, (model, example_inputs) or "
                       "(model, example_inputs, loss_fn, optimizer_fn)", path=spec.module)
    if not isinstance(model, torch.nn.Module):
        raise BadModel(f"{spec.function}() returned a {type(model).__name__} as the model, not a torch.nn.Module",
                       path=spec.module)
    if not any(p.requires_grad for p in model.parameters()):
        raise BadModel(f"{where}: the model has no trainable parameters (nothing to train)", path=None)
    inputs, batch = _input_specs(examples, spec, torch, shapes)
    return UserModel(module=model.float().train(), inputs=inputs, example_batch=batch, loss_fn=loss_fn,
                     optimizer_fn=optimizer_fn, form=form)


def _input_specs(examples: Any, spec: FactorySpec, torch: Any,
                 shapes: dict[str, tuple[int, ...]]) -> tuple[tuple[TensorSpec, ...], int | None]:
    if examples is None:
        if not shapes:
            raise BadInput(f"{spec.where} returned only a model: give its input shape with --shape NAME:D0xD1x… "
                           "(e.g. --shape input:1x3x224x224), or return (model, example_inputs)")
        return tuple(TensorSpec(name=n, dtype="float32", shape=(None,) + tuple(s[1:])) for n, s in shapes.items()), None
    tensors = [examples] if isinstance(examples, torch.Tensor) else examples
    if not isinstance(tensors, (tuple, list)) or not tensors or not all(isinstance(t, torch.Tensor) for t in tensors):
        raise BadModel(f"{spec.function}() returned example_inputs that are not a tensor or a tuple of tensors",
                       path=spec.module)
    if any(t.dim() == 0 for t in tensors):
        raise BadModel(f"{spec.function}() returned a 0-dim example input (the first dim is the batch)",
                       path=spec.module)
    names = ["input"] if len(tensors) == 1 else [f"input{i}" for i in range(len(tensors))]
    unknown = sorted(set(shapes) - set(names))
    if unknown:
        raise BadInput(f"--shape {unknown[0]}: the factory's inputs are named {', '.join(names)}")
    specs = tuple(TensorSpec(name=n, dtype=str(t.dtype).removeprefix("torch."),
                             shape=(None,) + tuple(shapes.get(n, tuple(t.shape))[1:]))
                  for n, t in zip(names, tensors))
    return specs, int(tensors[0].shape[0])
