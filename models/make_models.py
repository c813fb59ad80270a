"""Make trtprof's sample TensorFlow models reproducibly, without downloads.

    python models/make_models.py [OUT_DIR] [--models conv_elu_3x3_f32_256,mlp,...] [--formats keras,savedmodel,onnx]
                                 [--update-manifest]

Writes ``OUT_DIR/<name>.keras``, ``OUT_DIR/<name>_savedmodel/`` and ``OUT_DIR/<name>.onnx`` (the last
through ``trtprof convert``, so the ONNX is checked against TensorFlow). OUT_DIR defaults to
``models/build/`` (git-ignored: the files are large and regenerable). ``--update-manifest`` rewrites
``models/manifest.json`` with what was measured here; without it the script compares its ONNX
sha256 with the manifest and says whether they match.

Weights come from ``keras.utils.set_random_seed(SEED)`` before each model is built, so the same
TensorFlow/Keras versions give the same weights. ResNet50 and MobileNetV2 use ``weights=None`` (no
download) and ``classifier_activation=None``: with random weights a softmax head is flat (MobileNetV2
gives 0.001 everywhere), which hides every numerical error an FP16 check is meant to find.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any, Callable

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:  # conv_elu.py beside this file, also when imported as models.make_models
    sys.path.insert(0, str(HERE))
MANIFEST = HERE / "manifest.json"
DEFAULT_OUT = HERE / "build"
SEED = 0
FORMATS = ("keras", "savedmodel", "onnx")


def conv_elu_3x3_f32_256(keras: Any) -> Any:
    """32, 64, 128, 256 filters of 3×3, stride 2, 'same', ELU (formerly "convnet"; models/conv_elu.py)."""
    from conv_elu import keras_model

    return keras_model("conv_elu_3x3_f32_256", keras)


def report_conv_elu_k32_256(keras: Any) -> Any:
    """The report's code read literally: Conv2D(3, k, 2, 'same', elu), k = 32…256 (models/conv_elu.py)."""
    from conv_elu import keras_model

    return keras_model("report_conv_elu_k32_256", keras)


def mlp(keras: Any) -> Any:
    """A small MLP: 256 features → 512 → 512 → 10 logits."""
    inputs = keras.Input((256,), name="features")
    x = keras.layers.Dense(512, activation="relu")(inputs)
    x = keras.layers.Dense(512, activation="relu")(x)
    return keras.Model(inputs, keras.layers.Dense(10)(x), name="mlp")


def resnet50(keras: Any) -> Any:
    return keras.applications.ResNet50(weights=None, classifier_activation=None, input_shape=(224, 224, 3))


def mobilenetv2(keras: Any) -> Any:
    return keras.applications.MobileNetV2(weights=None, classifier_activation=None, input_shape=(224, 224, 3))


MODELS: dict[str, tuple[Callable[[Any], Any], str]] = {
    "conv_elu_3x3_f32_256": (conv_elu_3x3_f32_256,
                             "Keras functional, 4x Conv2D(3x3, stride 2, same, elu) 32/64/128/256 filters"),
    "report_conv_elu_k32_256": (report_conv_elu_k32_256,
                                "Keras functional, 4x Conv2D(3 filters, kernel 32/64/128/256, stride 2, same, elu)"),
    "mlp": (mlp, "Keras functional, Dense 512-512-10 (relu), logits"),
    "mobilenetv2": (mobilenetv2, "keras.applications.MobileNetV2(weights=None, classifier_activation=None)"),
    "resnet50": (resnet50, "keras.applications.ResNet50(weights=None, classifier_activation=None)"),
}


def weights_sha256(model: Any) -> str:
    """sha256 of the model's weights (shape, dtype, bytes, in layer order): what the seed fixes,
    independent of how a file format or tf2onnx names and orders things."""
    import hashlib

    import numpy as np

    digest = hashlib.sha256()
    for array in model.get_weights():
        array = np.ascontiguousarray(array)
        digest.update(f"{array.dtype.str}{array.shape}".encode())
        digest.update(array.tobytes())
    return digest.hexdigest()


# tf2onnx de-duplicates equal constants (MobileNetV2's many Relu6 bounds and BatchNorm factors) and
# which duplicate keeps its name varies from run to run: same graph, same weights, other bytes.
# Measured: three runs, three sha256s, identical node lists and initializer values; not Python's
# hash seed (two runs with PYTHONHASHSEED=0 differ too). weights_sha256 is reproducible for it.
ONNX_SHA_NOT_REPRODUCIBLE = {"mobilenetv2"}


def make(name: str, out_dir: Path, formats: tuple[str, ...]) -> dict[str, Any]:
    """Build one model from its seed and write the asked formats; return its manifest entry."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import keras

    from trtprof.convert.tf.args import content_sha256
    from trtprof.convert.tf.conversion import convert_tf

    build, source = MODELS[name]
    # Layer names come from per-process counters ("input_layer_1" for the second model built) and
    # end up in the ONNX bytes: reset them so a model's file does not depend on what was built before.
    keras.backend.clear_session()
    keras.utils.set_random_seed(SEED)
    model = build(keras)
    entry: dict[str, Any] = {
        "name": name,
        "source": source,
        "seed": SEED,
        "inputs": {t.name.split(":")[0]: [None, *t.shape[1:]] for t in model.inputs},
        "params": int(model.count_params()),
        "weights_sha256": weights_sha256(model),
        "files": {},
    }
    out_dir.mkdir(parents=True, exist_ok=True)
    keras_path = out_dir / f"{name}.keras"
    if "keras" in formats or "onnx" in formats:
        model.save(keras_path)
        entry["files"]["keras"] = keras_path.name
    if "savedmodel" in formats:
        sm = out_dir / f"{name}_savedmodel"
        model.export(str(sm), verbose=False)  # Keras 3: model.save(dir) fails; export writes a SavedModel
        entry["files"]["savedmodel"] = sm.name
    if "onnx" in formats:
        onnx_path = out_dir / f"{name}.onnx"
        result = convert_tf(keras_path, onnx_path)
        assert result.check is not None
        entry["files"]["onnx"] = onnx_path.name
        entry["onnx_sha256"] = content_sha256(onnx_path)
        entry["onnx_sha256_reproducible"] = name not in ONNX_SHA_NOT_REPRODUCIBLE
        entry["convert_s"] = result.convert_s
        entry["check"] = {
            "max_abs_err": result.check.max_abs_err,
            "max_rel_err": result.check.max_rel_err,  # relative to the output's scale (max |y|)
            "output_scale": result.check.min_output_scale,
        }
        entry["measured_with"] = {**result.versions, "keras": keras.__version__, "python": platform.python_version()}
    import conv_elu

    if name in conv_elu.NETWORKS:  # the same network built without TF (seeded NumPy weights, not Keras's)
        path = conv_elu.make_onnx(name, out_dir / f"{name}.no_tf.onnx")
        entry["onnx_without_tf"] = {"script": "models/conv_elu.py", "file_sha256": conv_elu.file_sha256(path),
                                    "params": conv_elu.parameters(name), "source": conv_elu.DESCRIPTIONS[name]}
    return entry


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out_dir", nargs="?", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--models", default="conv_elu_3x3_f32_256,report_conv_elu_k32_256,mlp", help=f"comma list of {','.join(MODELS)} or 'all'")
    parser.add_argument("--formats", default=",".join(FORMATS), help="comma list of keras,savedmodel,onnx")
    parser.add_argument("--update-manifest", action="store_true", help="record what was measured here")
    args = parser.parse_args(argv)
    names = list(MODELS) if args.models == "all" else [n.strip() for n in args.models.split(",") if n.strip()]
    formats = tuple(f.strip() for f in args.formats.split(",") if f.strip())
    unknown = [n for n in names if n not in MODELS] + [f for f in formats if f not in FORMATS]
    if unknown:
        parser.error(f"unknown model or format: {', '.join(unknown)}")
    manifest = json.loads(MANIFEST.read_text()) if MANIFEST.is_file() else {"models": {}}
    mismatched = []
    for name in names:
        started = time.perf_counter()
        entry = make(name, args.out_dir, formats)
        line = f"{name}: {', '.join(entry['files'].values())} in {args.out_dir} ({time.perf_counter() - started:.1f} s)"
        if "onnx_sha256" in entry:
            known = manifest["models"].get(name, {})
            recorded = known.get("onnx_sha256")
            if not recorded:
                same = "not in the manifest"
            elif recorded == entry["onnx_sha256"]:
                same = "matches the manifest"
            elif name in ONNX_SHA_NOT_REPRODUCIBLE:
                same = "differs from the manifest, as expected for this model (tf2onnx names vary)"
            else:
                same = "DIFFERS from the manifest (other TF/Keras/tf2onnx versions than measured_with?)"
                mismatched.append(name)
            if known.get("weights_sha256") and known["weights_sha256"] != entry["weights_sha256"]:
                same += "; WEIGHTS differ from the manifest"
                mismatched.append(name)
            line += f"; onnx sha256 {entry['onnx_sha256'][:12]}… {same}; convert {entry['convert_s']} s, max abs err {entry['check']['max_abs_err']:.2g}"
        print(line)
        if args.update_manifest:
            entry.pop("files")
            manifest["models"][name] = entry
    if args.update_manifest:
        manifest["note"] = (
            "onnx_sha256 is what models/make_models.py produced with the versions in measured_with; "
            "weights are seeded, but the bytes depend on the TensorFlow, Keras and tf2onnx versions."
        )
        MANIFEST.write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    return 1 if mismatched and not args.update_manifest else 0


if __name__ == "__main__":
    sys.path.insert(0, str(HERE.parent))  # run from a checkout without installing trtprof
    sys.exit(main())
