"""TensorFlow access and the three tf2onnx routes (Keras file, SavedModel, frozen GraphDef).

Each route returns the ONNX proto, a ``Reference`` that runs the *original* TensorFlow model on given
feeds (the faithfulness check compares against it) and notes. TensorFlow, tf2onnx and keras are
imported inside the functions."""
from __future__ import annotations

import contextlib
import logging
import os
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Sequence

import numpy as np

from ...errors import BadInput, BadModel, MissingDependency, first_line
from .args import Shape, tf_tensor_name


def import_tf() -> tuple[Any, Any]:
    """(tensorflow, tf2onnx), or MissingDependency naming the ``tf`` extra."""
    # TF's C++ logging writes banners to stderr at import; trtprof's errors must stay one line.
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    try:
        import tensorflow as tf
    except ImportError as err:
        raise MissingDependency("tensorflow", "tf", why="needed to convert TensorFlow models") from err
    try:
        import tf2onnx
        import tf2onnx.tf_loader  # noqa: F401  (submodule used below)
        # Draws a name from tf2onnx's counter when first imported, which would shift every name in
        # the first conversion of a process (see the counter reset in convert_tf): import it first.
        import tf2onnx.rewriter.loop_rewriter_base  # noqa: F401
    except ImportError as err:
        raise MissingDependency("tf2onnx", "tf", why="needed to convert TensorFlow models") from err
    return tf, tf2onnx


@contextlib.contextmanager
def quiet_logs() -> Iterator[None]:
    """tf2onnx and TF log warnings and errors for normal events (and errors we report ourselves);
    silence them for the conversion, then restore the levels."""
    loggers = [logging.getLogger(name) for name in ("tf2onnx", "tensorflow", "absl")]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        for lg, level in zip(loggers, levels):
            lg.setLevel(level)


Reference = Callable[[Mapping[str, np.ndarray], Sequence[str], Sequence[str]], list[np.ndarray]]


def convert_keras(tf: Any, tf2onnx: Any, path: Path, opset: int | None, **_: Any) -> tuple[Any, Reference, list[str]]:
    import keras

    try:
        model = keras.models.load_model(str(path), compile=False)
    except Exception as err:
        raise BadModel(f"not a loadable Keras model ({type(err).__name__}: {first_line(err)})", path=path) from err
    proto, _ = tf2onnx.convert.from_keras(model, opset=opset)

    def reference(feeds: Mapping[str, np.ndarray], onnx_inputs: Sequence[str], onnx_outputs: Sequence[str]) -> list[np.ndarray]:
        # from_keras keeps model.inputs / model.outputs order; Keras names are not the ONNX names.
        args = [tf.constant(feeds[name]) for name in onnx_inputs]
        result = model(args[0] if len(args) == 1 else args, training=False)
        return [np.asarray(t) for t in tf.nest.flatten(result)]

    return proto, reference, []


def convert_savedmodel(
    tf: Any, tf2onnx: Any, path: Path, opset: int | None, signature: str | None = None, **_: Any
) -> tuple[Any, Reference, list[str]]:
    try:
        imported = tf.saved_model.load(str(path))
    except Exception as err:
        raise BadModel(f"not a loadable SavedModel ({type(err).__name__}: {first_line(err)})", path=path) from err
    names = [s for s in imported.signatures.keys() if not s.startswith("_")]
    if not names:
        raise BadModel("SavedModel has no serving signature (export it with model.export(dir))", path=path)
    if signature is None:
        signature = "serving_default" if "serving_default" in names else names[0]
    elif signature not in names:
        raise BadInput(f"signature {signature!r} not in the SavedModel (has: {', '.join(names)})", path=path)
    graph_def, inputs, outputs, renames = tf2onnx.tf_loader.from_saved_model(
        str(path), None, None, tag=["serve"], signatures=[signature], return_tensors_to_rename=True
    )
    proto, _ = tf2onnx.convert.from_graph_def(
        graph_def, name=path.name, input_names=inputs, output_names=outputs, opset=opset, tensors_to_rename=renames
    )
    func = imported.signatures[signature]

    def reference(feeds: Mapping[str, np.ndarray], onnx_inputs: Sequence[str], onnx_outputs: Sequence[str]) -> list[np.ndarray]:
        # The ONNX names are the signature's structured names: feed and read by name.
        result = func(**{name: tf.constant(feeds[name]) for name in onnx_inputs})
        return [np.asarray(result[name]) for name in onnx_outputs]

    return proto, reference, []


def convert_graphdef(
    tf: Any,
    tf2onnx: Any,
    path: Path,
    opset: int | None,
    inputs: Sequence[tuple[str, Shape | None]] = (),
    outputs: Sequence[tuple[str, Shape | None]] = (),
    **_: Any,
) -> tuple[Any, Reference, list[str]]:
    if not inputs or not outputs:
        raise BadInput("a frozen graph (.pb) has no signature: name its tensors with --inputs and --outputs (trtprof build: --tf-inputs and --tf-outputs)", path=path)
    in_names = [tf_tensor_name(n) for n, _ in inputs]
    out_names = [tf_tensor_name(n) for n, _ in outputs]
    graph_def = tf.compat.v1.GraphDef()
    try:
        graph_def.ParseFromString(path.read_bytes())
    except Exception as err:
        raise BadModel(f"not a frozen TensorFlow GraphDef ({type(err).__name__})", path=path) from err
    if not graph_def.node:
        raise BadModel("not a frozen TensorFlow GraphDef (no nodes)", path=path)
    ops = {node.name for node in graph_def.node}
    missing = [n for n in in_names + out_names if n.rsplit(":", 1)[0] not in ops]
    if missing:
        placeholders = [node.name for node in graph_def.node if node.op == "Placeholder"]
        raise BadInput(
            f"tensor(s) {', '.join(missing)} not in the graph (its placeholders: {', '.join(placeholders) or 'none'})",
            path=path,
        )
    frozen, in_names, out_names = tf2onnx.tf_loader.from_graphdef(str(path), in_names, out_names)
    shape_override = {
        tf_tensor_name(n): list(shape) for n, shape in inputs if shape is not None
    }
    proto, _ = tf2onnx.convert.from_graph_def(
        frozen,
        name=path.stem,
        input_names=in_names,
        output_names=out_names,
        opset=opset,
        shape_override=shape_override or None,
    )

    def _import() -> None:
        tf.compat.v1.import_graph_def(graph_def, name="")

    wrapped = tf.compat.v1.wrap_function(_import, [])
    pruned = wrapped.prune(
        [wrapped.graph.get_tensor_by_name(n) for n in in_names],
        [wrapped.graph.get_tensor_by_name(n) for n in out_names],
    )

    def reference(feeds: Mapping[str, np.ndarray], onnx_inputs: Sequence[str], onnx_outputs: Sequence[str]) -> list[np.ndarray]:
        # No renames on this route: ONNX names are the TF tensor names.
        result = pruned(*[tf.constant(feeds[name]) for name in in_names])
        by_name = dict(zip(out_names, tf.nest.flatten(result)))
        return [np.asarray(by_name[name]) for name in onnx_outputs]

    return proto, reference, []


ROUTES = {"keras": convert_keras, "savedmodel": convert_savedmodel, "graphdef": convert_graphdef}


def versions(tf: Any, tf2onnx: Any) -> dict[str, str]:
    import onnx

    import onnxruntime

    return {
        "tensorflow": tf.__version__,
        "tf2onnx": tf2onnx.__version__,
        "onnx": onnx.__version__,
        "onnxruntime": onnxruntime.__version__,
    }
