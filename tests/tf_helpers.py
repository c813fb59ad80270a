"""Small TensorFlow models for the conversion tests, made once per test module.

The conv net and MLP come from ``models/make_models.py`` (so the tests also exercise that script);
the frozen GraphDef is tf2onnx's freeze of the conv net's SavedModel, the form older pipelines ship.
"""
from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def load_model_script(name: str):
    """models/<name>.py as a module (the model scripts are not part of the trtprof package)."""
    spec = importlib.util.spec_from_file_location(f"trtprof_{name}", ROOT / "models" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def load_make_models():
    """models/make_models.py as a module."""
    return load_model_script("make_models")


def make_frozen_graph(saved_model: Path, out: Path) -> tuple[Path, list[str], list[str]]:
    """Freeze ``saved_model``'s serving signature into a GraphDef .pb; return (path, inputs, outputs)."""
    import tensorflow as tf
    from tf2onnx import tf_loader

    graph_def, inputs, outputs = tf_loader.from_saved_model(str(saved_model), None, None)[:3]
    tf.io.write_graph(graph_def, str(out.parent), out.name, as_text=False)
    return out, list(inputs), list(outputs)


def make_lgamma_savedmodel(out: Path) -> Path:
    """A SavedModel using Lgamma, an op tf2onnx 1.17 has no ONNX mapping for."""
    import tensorflow as tf

    class LgammaModule(tf.Module):
        @tf.function(input_signature=[tf.TensorSpec([None, 4], tf.float32)])
        def __call__(self, x):
            return {"y": tf.math.lgamma(x) + 1.0}

    module = LgammaModule()
    tf.saved_model.save(module, str(out), signatures=module.__call__)
    return out
